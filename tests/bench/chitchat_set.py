#!/usr/bin/env python3
"""Small talk written by other people, as a conversation set for
replies_cli.py: one side of real open-domain chats between two people
(chitchat-dataset 0.9.0, MIT, the wheel setup already fetches for the
guard), said to a persona turn by turn. There are no fact questions in it;
what it measures is how the persona talks: replies that say the message
back, speak as the person, ask back, help-desk lines and replies that say
the reply before again.

    python3 tests/bench/chitchat_set.py > /tmp/chitchat.json
    python3 tests/bench/replies_cli.py --bin target/debug/ledgermind \\
        --models ~/.cache/ledgermind/models --set /tmp/chitchat.json --split held-out

Conversations are split into tune and held-out by a hash of their id, so
the split never changes; the first `--per-split` of each split with at least
`--turns` turns of the person who opened the chat are taken.
"""
import argparse
import hashlib
import json
import os
import sys
import zipfile

WHEEL = "chitchat_dataset-0.9.0-py3-none-any.whl"


def opener_turns(conversation):
    """The turns of the person who opened the chat, each a group of their messages."""
    groups = conversation["messages"]
    if not groups or not groups[0]:
        return []
    opener = groups[0][0]["sender"]
    turns = []
    for g in groups:
        if g and g[0]["sender"] == opener:
            text = " ".join(m["text"].strip() for m in g if m["text"].strip())
            if text:
                turns.append(text)
    return turns


def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("LEDGERMIND_CACHE", os.path.expanduser("~/.cache/ledgermind"))
    ap.add_argument("--wheel", default=os.path.join(cache, "wheels", WHEEL))
    ap.add_argument("--per-split", type=int, default=8)
    ap.add_argument("--turns", type=int, default=8)
    args = ap.parse_args()
    if not os.path.exists(args.wheel):
        sys.exit(f"{args.wheel} is missing: scripts/setup.sh fetches it (chitchat-dataset 0.9.0 from PyPI)")
    with zipfile.ZipFile(args.wheel) as z:
        data = json.loads(z.read("chitchat_dataset/dataset.json").decode("utf-8"))
    out = {"tune": [], "held-out": []}
    for cid in sorted(data, key=lambda c: hashlib.sha256(c.encode()).hexdigest()):
        split = "tune" if int(hashlib.sha256(f"split:{cid}".encode()).hexdigest(), 16) % 2 == 0 else "held-out"
        if len(out[split]) >= args.per_split:
            continue
        turns = opener_turns(data[cid])
        # Chats that are only greetings say little about how a persona talks.
        if len(turns) < args.turns or sum(len(t.split()) for t in turns[: args.turns]) < 6 * args.turns:
            continue
        out[split].append({
            "id": f"chitchat-{cid[:8]}",
            "split": split,
            "language": "en",
            "persona": "Sam",
            "description": "A warm friend who likes to chat",
            "turns": [{"say": t[:400]} for t in turns[: args.turns]],
        })
    json.dump({"source": "chitchat-dataset 0.9.0 (MIT), one side of each chat",
               "conversations": out["tune"] + out["held-out"]}, sys.stdout, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
