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
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec scripts/with-keychain.sh "$BIN"
fi
echo "No display found: running in a virtual X display (Xvfb). Screenshots: scripts/screenshot.sh"
export WEBKIT_DISABLE_COMPOSITING_MODE=1
exec scripts/with-keychain.sh xvfb-run -a -s "-screen 0 1280x800x24" "$BIN"
