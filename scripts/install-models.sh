#!/usr/bin/env bash
# Links the cached default models into a data directory's models folder.
# Usage: scripts/install-models.sh DATA_DIR
set -euo pipefail
HOME_DIR=${1:?usage: install-models.sh DATA_DIR}
MODELS="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}/models"
mkdir -p "$HOME_DIR/models"
# The document library's embedder (multilingual-e5-small; MiniLM without it).
# Voice: the converted Whisper models (whisper-*), Silero, the Piper voice and
# the ONNX Runtime library they run on, from scripts/setup.sh.
for m in "$MODELS"/*.gguf "$MODELS"/all-MiniLM-L6-v2 "$MODELS"/multilingual-e5-small "$MODELS"/guard-classifier-v2.bin "$MODELS"/whisper-* \
  "$MODELS"/silero-vad "$MODELS"/piper-* "$MODELS"/onnxruntime; do
  [ -e "$m" ] || continue
  target="$HOME_DIR/models/$(basename "$m")"
  # The guard's classifier is retrained when its corpus changes: replace a stale copy.
  if [ -f "$target" ] && [ "$(basename "$m")" = guard-classifier-v2.bin ] && ! cmp -s "$m" "$target"; then
    rm -f "$target"
  fi
  # A model folder already linked gains the files setup made in it since
  # (Whisper's q8_0 weights beside the f32 ones).
  if [ -d "$target" ] && [ -d "$m" ]; then
    for f in "$m"/*; do
      [ -f "$f" ] || continue
      [ -e "$target/$(basename "$f")" ] || cp -l "$f" "$target/" 2>/dev/null || cp "$f" "$target/"
    done
    continue
  fi
  [ -e "$target" ] && continue
  # Hard links where possible (same disk, no copy); otherwise copy.
  cp -rl "$m" "$target" 2>/dev/null || cp -r "$m" "$target"
done
