#!/usr/bin/env bash
# Benchmarks, each printing ratios against a baseline measured in the same run:
#   startup  cold start + idle memory vs a minimal Tauri 2 app
#   chat     send → first token: our overhead vs the local model's time
#   ledger   appends and verify vs raw Ed25519 sign/verify
#   recall   retrieval quality and latency (see crates/memory)
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
what="${1:-all}"
CACHE="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}"
cargo build -q --workspace --all-targets
BIN="$PWD/target/debug"
bench_home() { local h; h=$(mktemp -d /tmp/ledgermind-bench.XXXXXX); scripts/install-models.sh "$h" >&2; echo "$h"; }

if [ "$what" = all ] || [ "$what" = startup ]; then
  echo "== startup: Ledgermind vs minimal Tauri app =="
  H=$(bench_home)
  LEDGERMIND_HOME="$H" LEDGERMIND_APP="$BIN/ledgermind-desktop" MINIMAL_APP="$BIN/minimal-tauri-app" \
  WEBKIT_DISABLE_COMPOSITING_MODE=1 scripts/with-keychain.sh xvfb-run -a -s "-screen 0 1280x800x24" bash -c '
    tauri-driver --port "${E2E_PORT:-4444}" --native-port $((${E2E_PORT:-4444} + 1)) >"${BENCH_LOG:-/dev/null}" 2>&1 & d=$!
    for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:${E2E_PORT:-4444}/status" >/dev/null && break; sleep 0.2; done
    LEDGERMIND_WEBDRIVER="http://127.0.0.1:${E2E_PORT:-4444}" node tests/bench/startup.mjs "${ROUNDS:-5}"; kill $d'
  rm -rf "$H"
fi
if [ "$what" = all ] || [ "$what" = chat ]; then
  echo "== chat: send → first token on the local model =="
  H=$(bench_home)
  scripts/with-keychain.sh "$BIN/ledgermind" --home "$H" bench chat --runs "${RUNS:-21}"
  rm -rf "$H"
fi
if [ "$what" = all ] || [ "$what" = ledger ]; then
  echo "== ledger: appends and verify vs raw Ed25519 =="
  H=$(bench_home)
  scripts/with-keychain.sh "$BIN/ledgermind" --home "$H" bench ledger --events "${EVENTS:-100000}"
  rm -rf "$H"
fi
