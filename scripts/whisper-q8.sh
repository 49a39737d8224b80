#!/usr/bin/env bash
# Makes the q8_0 Whisper weights (model-q8_0.gguf) beside the converted,
# pinned model.safetensors of whisper-tiny.en and whisper-base, with the
# voice crate's quantizer (crates/voice/examples/whisper_quantize). The
# quantizer is deterministic, so its output is pinned like its input: a file
# that does not have the pinned SHA-256 is removed, and the voice engine
# then loads the f32 weights (it picks q8_0 only when the file is there).
# q8_0 holds the WER of f32 on the LibriVox clips and decodes faster
# (examples/stt_bench prints both in the same run).
# Usage: scripts/whisper-q8.sh MODELS_DIR QUANTIZE_BIN
#        scripts/whisper-q8.sh MODELS_DIR --check
# --check makes nothing: it removes files that are not the pinned ones and
# fails when a model's q8_0 file is missing (so setup knows to build the
# quantizer).
set -euo pipefail
MODELS=${1:?usage: whisper-q8.sh MODELS_DIR QUANTIZE_BIN|--check}
BIN=${2:?usage: whisper-q8.sh MODELS_DIR QUANTIZE_BIN|--check}
FILE=model-q8_0.gguf
declare -A PINNED=(
  [whisper-tiny.en]=db8916199ac5fe6e416a161d62423cdbc2f469fa04636716339b0a09122d873f
  [whisper-base]=2736ae8f0e42defbb6c7dd7b488d7b2c539f1c7d8df94efb38889d9ed56ed546
)
status=0
for name in whisper-tiny.en whisper-base; do
  dir="$MODELS/$name"
  sha=${PINNED[$name]}
  [ -f "$dir/model.safetensors" ] || continue
  if [ -f "$dir/$FILE" ] && echo "$sha  $dir/$FILE" | sha256sum -c --quiet >/dev/null 2>&1; then
    continue
  fi
  rm -f "$dir/$FILE"
  if [ "$BIN" = --check ]; then
    status=1
    continue
  fi
  # The quantizer writes FILE.partial and renames it when whole.
  if ! "$BIN" "$dir" >/dev/null; then
    echo "whisper-q8: could not quantize $name; the f32 weights stay in use" >&2
    rm -f "$dir/$FILE" "$dir/$FILE.partial"
    status=1
    continue
  fi
  if ! echo "$sha  $dir/$FILE" | sha256sum -c --quiet >/dev/null 2>&1; then
    echo "whisper-q8: $name/$FILE does not have the pinned SHA-256 $sha (got $(sha256sum "$dir/$FILE" | cut -c1-64)); removed, the f32 weights stay in use" >&2
    rm -f "$dir/$FILE"
    status=1
  fi
done
exit $status
