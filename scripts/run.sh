#!/usr/bin/env bash
# Sets up (idempotently), builds and opens Ledgermind on its embedded
# defaults: the bundled local model and a local database in the OS data
# directory (or $LEDGERMIND_HOME). Headless machines get a virtual display.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export LEDGERMIND_HOME="${LEDGERMIND_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/ledgermind}"
scripts/install-models.sh "$LEDGERMIND_HOME"
(cd ui && npm run --silent build)
# The same build as the test command (one feature set, one target dir):
# building only the app's packages resolves other dependency features and
# compiles the heavy dependencies a second time.
cargo build --workspace --all-targets
BIN="$PWD/target/debug/ledgermind-desktop"
echo "Ledgermind data: $LEDGERMIND_HOME"
# Without a session keychain, scripts/with-keychain.sh starts a private one:
# keep it next to the cache, so the next launch finds the same signing keys.
CACHE_DIR="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}"
export LEDGERMIND_KEYCHAIN_DIR="${LEDGERMIND_KEYCHAIN_DIR:-${CACHE_DIR%/}-keychain}"
if ! { [ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] && secret-tool search --all service ledgermind >/dev/null 2>&1; }; then
  echo "No session keychain found: Ledgermind's private keychain is $LEDGERMIND_KEYCHAIN_DIR (kept between launches, mode 0700)."
  echo "The command line on the same data: LEDGERMIND_KEYCHAIN_DIR=$LEDGERMIND_KEYCHAIN_DIR scripts/with-keychain.sh target/debug/ledgermind keys status"
fi
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec scripts/with-keychain.sh "$BIN"
fi
# A virtual display of its own, named in a file so scripts/screenshot.sh
# (and xdotool) can reach the window.
n=99
while [ -e "/tmp/.X$n-lock" ] && [ "$n" -gt 10 ]; do n=$((n - 1)); done
Xvfb ":$n" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
DISPLAY_FILE="${TMPDIR:-/tmp}/ledgermind-display-$(id -u)"
trap 'kill "$xvfb" 2>/dev/null; rm -f "$DISPLAY_FILE"' EXIT
echo ":$n" > "$DISPLAY_FILE"
export DISPLAY=":$n" WEBKIT_DISABLE_COMPOSITING_MODE=1
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X$n" ] && break; sleep 0.1; done
echo "No display found: running in a virtual X display ($DISPLAY). Screenshot: scripts/screenshot.sh [FILE.png]"
scripts/with-keychain.sh "$BIN"
