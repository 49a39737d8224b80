#!/usr/bin/env bash
# Sets up (idempotently) and runs every test: Rust unit and integration
# tests (real local model and real keychain included), the generated-types
# drift check, the UI's type check and component tests, and the end-to-end
# test of the real app window under Xvfb. Ends with one "N passed, N failed" line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
CACHE="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}"
export LEDGERMIND_TEST_MODEL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
export LEDGERMIND_TEST_EMBEDDER="$CACHE/models/all-MiniLM-L6-v2" LEDGERMIND_MINILM_DIR="$CACHE/models/all-MiniLM-L6-v2"
export LEDGERMIND_THREADS="${LEDGERMIND_THREADS:-1}"
export LEDGERMIND_FIXTURES="$CACHE/fixtures"
export PATH="$HOME/.cargo/bin:$PATH"
(cd ui && npm run --silent build)
# One profile and one target dir for unit, CLI and end-to-end tests.
cargo build --workspace --all-targets
exec scripts/with-keychain.sh scripts/test-suites.sh
