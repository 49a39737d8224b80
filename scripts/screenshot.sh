#!/usr/bin/env bash
# Saves a picture of the virtual display scripts/run.sh opened the app in
# (or of $DISPLAY when set): scripts/screenshot.sh [FILE.png]
set -euo pipefail
out="${1:-ledgermind-$(date +%Y%m%d-%H%M%S).png}"
file="${TMPDIR:-/tmp}/ledgermind-display-$(id -u)"
if [ -z "${DISPLAY:-}" ]; then
  [ -s "$file" ] || { echo "no display: start the app with scripts/run.sh first" >&2; exit 1; }
  DISPLAY="$(cat "$file")"
fi
DISPLAY="$DISPLAY" import -window root "$out"
echo "$out"
