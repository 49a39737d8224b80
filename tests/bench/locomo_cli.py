#!/usr/bin/env python3
"""LoCoMo recall through the command line, as a held-out check runs it:
`persona create`, `import-conversation`, then `recall PERSONA --queries FILE
--k 10 --json`, each conversation in a fresh data directory. Speaker A is the
person, speaker B the persona (named after B); each turn's dialogue id is its
row id, so the results name the evidence turns directly. Prints recall@10 per
conversation and per category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop), the first three conversations as tuning, the rest held out,
the same split `locomo_bench` uses.

The data (snap-research/locomo, CC BY-NC 4.0: for measuring only) is read
at run time from --data, else $LEDGERMIND_BENCH/locomo-tune.json; it is never
copied into the repository, and without it the script says so and exits.

  scripts/with-keychain.sh python3 tests/bench/locomo_cli.py \
      --bin target/debug/ledgermind [--only conv-26] [--keep DIR]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TUNE_COUNT = 3


def session_time(text):
    """'1:56 pm on 8 May, 2023' → an aware datetime (UTC), as the bench reads it."""
    clock, date = text.strip().lower().split(" on ", 1)
    hm, ampm = clock.split(" ", 1)
    h, m = (int(x) for x in hm.split(":"))
    if ampm == "pm" and h != 12:
        h += 12
    elif ampm == "am" and h == 12:
        h = 0
    parts = [p for p in date.replace(",", " ").split() if p]
    day, month, year = int(parts[0]), MONTHS.index(parts[1]) + 1, int(parts[2])
    return datetime(year, month, day, h, m, tzinfo=timezone.utc)


def import_rows(sample):
    conv = sample["conversation"]
    a, b = conv["speaker_a"], conv["speaker_b"]
    rows = []
    n = 1
    while f"session_{n}" in conv:
        start = session_time(conv[f"session_{n}_date_time"])
        for i, t in enumerate(conv[f"session_{n}"]):
            rows.append({
                "id": t["dia_id"],
                "speaker": "human" if t["speaker"] == a else b,
                "text": t["text"],
                "timestamp": (start + timedelta(seconds=30 * i)).isoformat().replace("+00:00", "Z"),
            })
        n += 1
    return rows


def words(text):
    return re.findall(r"\w+", text.lower())


def bm25_top(rows, query, k, k1=1.2, b=0.75):
    """Plain BM25 over the turns (Lucene's idf), the baseline printed beside."""
    docs = [words(r["text"]) for r in rows]
    avg = sum(map(len, docs)) / max(len(docs), 1)
    df = defaultdict(int)
    for d in docs:
        for w in set(d):
            df[w] += 1
    n = len(docs)
    scores = []
    q = set(words(query))
    for r, d in zip(rows, docs):
        tf = defaultdict(int)
        for w in d:
            tf[w] += 1
        score = 0.0
        for w in q:
            if tf[w]:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                score += idf * tf[w] * (k1 + 1) / (tf[w] + k1 * (1 - b + b * len(d) / avg))
        scores.append((score, r["id"]))
    scores.sort(key=lambda x: -x[0])
    return {i for _, i in scores[:k]}


def run(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(REPO / "target/debug/ledgermind"))
    ap.add_argument("--data")
    ap.add_argument("--only", help="comma-separated sample ids")
    ap.add_argument("--keep", help="keep each conversation's data directory here")
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()

    bench = os.environ.get("LEDGERMIND_BENCH")
    data = args.data or (bench and os.path.join(bench, "locomo-tune.json"))
    if not data or not os.path.exists(data):
        print(f"LoCoMo data not found ({data or 'no --data, no $LEDGERMIND_BENCH'}): pass --data FILE or set LEDGERMIND_BENCH; nothing measured.")
        return 0
    samples = json.load(open(data))
    only = set(args.only.split(",")) if args.only else None

    totals = defaultdict(lambda: [0.0, 0])  # (arm, split, category) -> [sum, n]
    for index, sample in enumerate(samples):
        sid = sample["sample_id"]
        if only and sid not in only:
            continue
        split = "tuning" if index < TUNE_COUNT else "held out"
        persona = sample["conversation"]["speaker_b"]
        home = Path(args.keep) / sid if args.keep else Path(tempfile.mkdtemp(prefix=f"locomo-{sid}-"))
        home.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(REPO / "scripts/install-models.sh"), str(home)], check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ, LEDGERMIND_HOME=str(home))
        conv_file, query_file = home / "conversation.json", home / "queries.jsonl"
        rows = import_rows(sample)
        conv_file.write_text(json.dumps(rows))
        questions = [q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]
        query_file.write_text("".join(json.dumps({"query": q["question"]}) + "\n" for q in questions))
        run([args.bin, "persona", "create", persona], env)
        run([args.bin, "import-conversation", persona, str(conv_file)], env)
        lines = run([args.bin, "recall", persona, "--queries", str(query_file), "--k", str(args.k), "--json"], env)
        answers = [json.loads(line) for line in lines.splitlines() if line.strip().startswith("{")]
        if len(answers) != len(questions):
            sys.exit(f"{sid}: {len(answers)} answers for {len(questions)} questions")
        per = defaultdict(lambda: [0.0, 0])
        for q, a in zip(questions, answers):
            found = set()
            for r in a["results"][: args.k]:
                found.add(r.get("id"))
                found.update(r.get("source_ids") or [])
            evidence = set(q["evidence"])
            for arm, hits in (("ours", found), ("plain BM25", bm25_top(rows, q["question"], args.k))):
                share = len(evidence & hits) / len(evidence)
                for key in (q["category"], "all"):
                    per[(arm, key)][0] += share
                    per[(arm, key)][1] += 1
                    totals[(arm, split, key)][0] += share
                    totals[(arm, split, key)][1] += 1
        for arm in ("ours", "plain BM25"):
            cats = " / ".join(f"{per[(arm, c)][0] / per[(arm, c)][1]:.3f}" if per[(arm, c)][1] else "-" for c in CATEGORIES)
            print(f"{sid} ({split}, persona {persona}) {arm}: recall@{args.k} "
                  f"{per[(arm, 'all')][0] / per[(arm, 'all')][1]:.3f} (n={per[(arm, 'all')][1]}; {cats})", flush=True)
    for split in ("tuning", "held out"):
        for arm in ("ours", "plain BM25"):
            s, n = totals[(arm, split, "all")]
            if not n:
                continue
            t = lambda c: totals[(arm, split, c)]
            cats = " / ".join(f"{t(c)[0] / t(c)[1]:.3f}" if t(c)[1] else "-" for c in CATEGORIES)
            print(f"{split}, {arm}: recall@{args.k} {s / n:.3f} (n={n}; {' / '.join(CATEGORIES.values())}: {cats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
