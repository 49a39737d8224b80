#!/usr/bin/env bash
# Links the cached default models into a data directory's models folder.
# Usage: scripts/install-models.sh DATA_DIR
set -euo pipefail
HOME_DIR=${1:?usage: install-models.sh DATA_DIR}
MODELS="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}/models"
mkdir -p "$HOME_DIR/models"
# Voice: the converted Whisper models (whisper-*), from scripts/setup.sh.
for m in "$MODELS"/*.gguf "$MODELS"/all-MiniLM-L6-v2 "$MODELS"/whisper-*; do
  [ -e "$m" ] || continue
  target="$HOME_DIR/models/$(basename "$m")"
  [ -e "$target" ] && continue
  # Hard links where possible (same disk, no copy); otherwise copy.
  cp -rl "$m" "$target" 2>/dev/null || cp -r "$m" "$target"
done
