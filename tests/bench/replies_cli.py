#!/usr/bin/env python3
"""Facts-then-questions conversations through the command line, one
`ledgermind chat` process per message (as a script or a held-out check runs
it), on the default model and, beside it in the same run, on the tiny model.

    python3 tests/bench/replies_cli.py --bin target/debug/ledgermind \
        --models ~/.cache/ledgermind/models [--split held-out] [--set FILE ...]

Each arm gets a fresh data directory holding only its model (hard links),
under a private keychain (run it through scripts/with-keychain.sh). Prints,
per arm: fact questions answered, loops, Portuguese questions answered in
Portuguese, and the wall time of each `chat` process (p50, p90).
"""
import argparse
import os
import re
import statistics
import sys

from conversations import add_set_args, embedder, fold, fresh_home, load_conversations, run

PT_WORDS = set("o os as às um uma umas é são seu sua seus suas meu minha eu que de da do das dos em na no não você "
               "voce ele ela está esta isso muito também tambem se chama nome mora trabalha como onde qual".split())
EN_WORDS = set("the a an is are your you he she it of in on at and my what which where works lives named "
               "called name live work".split())




def words(text):
    return [w for w in re.split(r"[^\w']+", text.lower()) if w]


def portuguese(text):
    ws = words(text)
    return sum(w in PT_WORDS for w in ws) > sum(w in EN_WORDS for w in ws)


def loops(text, run=6):
    ws = [re.sub(r"\W", "", w.lower()) for w in text.split()]
    ws = [w for w in ws if w]
    seen = set()
    for i in range(len(ws) - run + 1):
        k = tuple(ws[i:i + run])
        if k in seen:
            return True
        seen.add(k)
    return False






def arm(name, model_files, args, conversations):
    stats = dict(questions=0, answered=0, replies=0, loops=0, pt_questions=0, pt_in_pt=0, times=[], failed=0)
    for c in conversations:
        # A data directory per conversation: nothing of one is recalled in another.
        env = dict(os.environ, LEDGERMIND_HOME=fresh_home(f"lm-replies-{name}-", model_files))
        persona = c["persona"]
        _, p = run([args.bin, "persona", "create", persona, "--description", c["description"]], env)
        if p.returncode != 0:
            sys.exit(f"{name}: persona create failed: {p.stderr.strip()}")
        for i, t in enumerate(c["turns"]):
            secs, p = run([args.bin, "chat", persona, t["say"]], env)
            reply = p.stdout.strip()
            if p.returncode != 0:
                stats["failed"] += 1
                reply = f"[failed] {p.stderr.strip()[:200]}"
            stats["times"].append(secs)
            stats["replies"] += 1
            stats["loops"] += loops(reply)
            mark = ""
            if t.get("expect"):
                stats["questions"] += 1
                ok = any(fold(e) in fold(reply) for e in t["expect"])
                stats["answered"] += ok
                mark = "OK  " if ok else "MISS"
                if c["language"].startswith("pt"):
                    stats["pt_questions"] += 1
                    in_pt = portuguese(reply)
                    stats["pt_in_pt"] += in_pt
                    mark += "" if in_pt else " (not pt)"
            if args.verbose or t.get("expect"):
                print(f"  {name:<8} {c['id']:<14} #{i + 1:<2} {secs:5.1f}s {mark:<13} {t['say']} → {reply[:150]!r}", flush=True)
    return stats


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * p))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    add_set_args(ap)
    args = ap.parse_args()
    conversations = load_conversations(args)
    # The embedder is shared by both arms (recall); the chat model differs.
    extra = embedder(args)
    arms = [("default", args.default)] + ([] if args.no_baseline else [("tiny", args.baseline)])
    results = {}
    for name, model in arms:
        files = [os.path.join(args.models, model)] + extra
        results[name] = arm(name, files, args, conversations)
    print(f"\n{len(conversations)} conversations ({args.split}), one `ledgermind chat` process per message")
    print(f"{'arm':<8} {'answered':>10} {'loops':>8} {'pt in pt':>9} {'p50 s':>7} {'p90 s':>7} {'failed':>7}")
    for name, s in results.items():
        print(f"{name:<8} {s['answered']:>4}/{s['questions']:<5} {s['loops']:>3}/{s['replies']:<4} "
              f"{s['pt_in_pt']:>3}/{s['pt_questions']:<5} {pct(s['times'], .5):>7.2f} {pct(s['times'], .9):>7.2f} {s['failed']:>7}")


if __name__ == "__main__":
    main()
