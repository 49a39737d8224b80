#!/usr/bin/env bash
# Drives the real desktop app (built binary, real WebKit web view, real
# local model, real keychain) under Xvfb through tauri-driver and
# WebKitWebDriver. Screenshots go to artifacts/e2e.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
APP="$PWD/target/debug/ledgermind-desktop"
[ -x "$APP" ] || { echo "build the app first: cargo build -p ledgermind-desktop"; exit 1; }
E2E_HOME=$(mktemp -d /tmp/ledgermind-e2e.XXXXXX)
scripts/install-models.sh "$E2E_HOME"
export LEDGERMIND_HOME="$E2E_HOME" LEDGERMIND_APP="$APP" WEBKIT_DISABLE_COMPOSITING_MODE=1
export LEDGERMIND_ARTIFACTS="${LEDGERMIND_ARTIFACTS:-$PWD/artifacts}/e2e" LEDGERMIND_E2E_PHASE="${LEDGERMIND_E2E_PHASE:-all}"
mkdir -p "$LEDGERMIND_ARTIFACTS"
xvfb-run -a -s "-screen 0 1280x800x24" bash -c '
  tauri-driver --port 4444 >"$LEDGERMIND_ARTIFACTS/tauri-driver.log" 2>&1 &
  driver=$!
  for _ in $(seq 1 50); do curl -sf http://127.0.0.1:4444/status >/dev/null 2>&1 && break; sleep 0.2; done
  node tests/e2e/app.e2e.mjs; rc=$?
  kill $driver 2>/dev/null; wait $driver 2>/dev/null
  exit $rc'
rc=$?
if [ $rc -eq 0 ]; then
  # The same data directory must still verify from the CLI after the UI run.
  if target/debug/ledgermind --home "$E2E_HOME" verify; then echo "E2E PASSED"; else rc=1; fi
fi
rm -rf "$E2E_HOME"
exit $rc
