#!/usr/bin/env python3
"""Memory extraction on facts-then-questions conversations, through the
command line, on the default model and, beside it in the same run, on the
tiny model.

    scripts/with-keychain.sh python3 tests/bench/extraction_cli.py \
        --bin target/debug/ledgermind --models ~/.cache/ledgermind/models \
        [--split tune|held-out|all] [--set FILE ...] [--no-baseline] [--verbose]

Per conversation (a fresh data directory holding only its models, hard
links): `persona create`, one `ledgermind chat PERSONA TEXT` process per
turn, then `memories --persona NAME --extract-now --json`.

Judged automatically:
  * a fact (one per question turn) is held when some memory item's text
    contains one of the question's expected words (case and accents folded);
  * an item is ungrounded when it shares no content word (stop words
    removed, crude stemming) with anything the person said in that
    conversation.
The expected words judge; they are never shown to the program.

Prints per arm and per split: facts held / facts, ungrounded items / items,
items per conversation and the time of the `--extract-now` run. `--verbose`
shows every item.

`--keep DIR` keeps each conversation's data directory as it was before its
extraction ran (models left out); `--replay DIR` skips the chats and runs
only the extraction on copies of those directories, so a change to the
extraction is measured on the very same messages. Both need the keychain to
outlive the run: set LEDGERMIND_KEYCHAIN_DIR for scripts/with-keychain.sh.
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile

from conversations import add_set_args, embedder, fold, fresh_home, link_models, load_conversations, run


# Function words (en, pt-BR, folded): sharing only these grounds nothing.
STOP = set("""
a an the and or but if of in on at to for from with by as into about over after before than then so too very
is are was were be been being am do does did doing have has had having will would can could should may might must
i me my mine myself you your yours he him his she her hers it its we us our they them their this that these those
who whom whose what which where when why how there here not no yes all any some each every just also only
person user writer someone something likes like named called name thing things
o os as um uma uns umas e ou mas se de da do das dos em na no nas nos num numa ao aos pelo pela pelos pelas
por para com sem sobre que quem qual quais onde quando como porque muito muita muitos muitas tambem ja nao sim
eu me mim meu minha meus minhas voce seu sua seus suas ele ela eles elas nos nosso nossa isso isto esse essa este
esta aquele aquela ser sou es foi era sao estar estou esta estava tem tenho ter ha pessoa usuario gosta chama
""".split())




def content_words(text):
    return {w for w in re.split(r"[^\w]+", fold(text)) if w and w not in STOP and (len(w) >= 3 or w.isdigit())}


def same_word(w, v):
    # Crude stemming: equal, or the first five letters shared (the whole
    # shorter word when shorter, at least four): "lives"/"live",
    # "medica"/"medico"; "nursing"/"nurse" are not.
    if w == v:
        return True
    shared = len(os.path.commonprefix([w, v]))
    return min(len(w), len(v)) >= 4 and shared >= min(5, len(w), len(v))


def grounded(item, said_words):
    return any(same_word(w, v) for w in content_words(item) for v in said_words)








def copy_without_models(src, dst):
    shutil.copytree(src, dst, symlinks=True, ignore=lambda d, names: ["models"] if os.path.samefile(d, src) else [])


def set_model(args, env, persona, model_id):
    _, p = run([args.bin, "models", "use", model_id, "--persona", persona], env)
    if p.returncode != 0:
        sys.exit(f"models use {model_id} failed: {p.stderr.strip()}")


def arm(name, model_files, args, conversations):
    per_split = {}
    for c in conversations:
        s = per_split.setdefault(c.get("split", "?"), dict(convs=0, facts=0, held=0, items=0, ungrounded=0, secs=0.0, failed=0, timeouts=0))
        s["convs"] += 1
        persona = c["persona"]
        kept = os.path.join(args.replay or args.keep or "", name, c["id"])
        if args.replay:
            # Each arm replays its own kept chats: switching the model of a
            # home kept for another arm starts an engine whose worker runs
            # the due extraction with the old (absent) model first.
            if not os.path.isdir(kept):
                sys.exit(f"{name}: no kept chats in {kept} (run --keep for this arm)")
            home = tempfile.mkdtemp(prefix=f"lm-extract-{name}-")
            os.rmdir(home)
            copy_without_models(kept, home)
            link_models(home, model_files)
            env = dict(os.environ, LEDGERMIND_HOME=home)
        else:
            home = fresh_home(f"lm-extract-{name}-", model_files)
            env = dict(os.environ, LEDGERMIND_HOME=home)
            _, p = run([args.bin, "persona", "create", persona, "--description", c["description"]], env)
            if p.returncode != 0:
                sys.exit(f"{name}: persona create failed: {p.stderr.strip()}")
            if args.fast_chat and name == "default":
                set_model(args, env, persona, args.fast_chat_id)
            for t in c["turns"]:
                _, p = run([args.bin, "chat", persona, t["say"]], env)
                if p.returncode != 0:
                    s["failed"] += 1
                    print(f"  {name} {c['id']}: chat failed: {p.stderr.strip()[:200]}", flush=True)
            if args.fast_chat and name == "default":
                set_model(args, env, persona, args.default_id)
            if args.keep:
                if os.path.exists(kept):
                    shutil.rmtree(kept)
                copy_without_models(home, kept)
            if args.chat_only:
                print(f"  {name:<8} {c['id']:<15} chats kept", flush=True)
                shutil.rmtree(home, ignore_errors=True)
                continue
        secs, p = run([args.bin, "memories", "--persona", persona, "--extract-now", "--json"], env, timeout=900)
        s["secs"] += secs
        # On a loaded machine the run may outlast `--extract-now`'s limit:
        # counted, then the rest of the queue is run again (--retries).
        for _ in range(args.retries):
            if p.returncode == 0 or "TIMEOUT" not in p.stderr:
                break
            s["timeouts"] += 1
            print(f"  {name} {c['id']}: extraction outlasted the limit; running the rest", flush=True)
            secs, p = run([args.bin, "memories", "--persona", persona, "--extract-now", "--json"], env, timeout=900)
            s["secs"] += secs
        if p.returncode != 0:
            s["failed"] += 1
            print(f"  {name} {c['id']}: memories failed: {p.stderr.strip()[:300]}", flush=True)
        items = [json.loads(line) for line in p.stdout.splitlines() if line.strip().startswith("{")]
        said = set()
        for t in c["turns"]:
            said |= content_words(t["say"])
        texts = [fold(i["text"]) for i in items]
        facts = [t for t in c["turns"] if t.get("expect")]
        held = [any(fold(e) in x for x in texts for e in t["expect"]) for t in facts]
        bad = [i for i in items if not grounded(i["text"], said)]
        s["facts"] += len(facts)
        s["held"] += sum(held)
        s["items"] += len(items)
        s["ungrounded"] += len(bad)
        misses = [t["say"] for t, h in zip(facts, held) if not h]
        print(f"  {name:<8} {c['id']:<15} held {sum(held)}/{len(facts)}  items {len(items):>2}  ungrounded {len(bad)}  "
              f"{secs:6.1f}s" + (f"  missed: {misses}" if misses else ""), flush=True)
        if args.verbose:
            for i in items:
                mark = "  UNGROUNDED" if i in bad else ""
                print(f"      {i['kind']:<7} {i['confidence']:.2f}  {i['text']}{mark}", flush=True)
        elif bad:
            for i in bad:
                print(f"      ungrounded: {i['kind']} {i['text']!r}", flush=True)
        shutil.rmtree(home, ignore_errors=True)
    return per_split


def line(label, s):
    pct = 100.0 * s["held"] / s["facts"] if s["facts"] else float("nan")
    return (f"{label:<22} {s['held']:>3}/{s['facts']:<3} {pct:5.1f}%  {s['ungrounded']:>3}/{s['items']:<4} "
            f"{s['items'] / max(1, s['convs']):>7.1f}  {s['secs']:>8.1f}  {s['secs'] / max(1, s['convs']):>7.1f}  {s['failed']:>6}  {s['timeouts']:>8}")


def main():
    ap = argparse.ArgumentParser()
    add_set_args(ap)
    ap.add_argument("--arm", choices=["default", "tiny"], help="run only this arm (two processes can then share the work)")
    ap.add_argument("--fast-chat", action="store_true",
                    help="default arm: the tiny model writes the replies, the default model extracts "
                         "(extraction reads only the person's messages; for tuning on a slow machine)")
    ap.add_argument("--default-id", default="qwen2.5-coder-1.5b")
    ap.add_argument("--fast-chat-id", default="smollm2-135m")
    ap.add_argument("--keep", help="keep each data directory as it was before extraction, under this folder")
    ap.add_argument("--retries", type=int, default=0, help="run --extract-now again this often after a TIMEOUT")
    ap.add_argument("--chat-only", action="store_true", help="with --keep: only the chats, no extraction")
    ap.add_argument("--replay", help="skip the chats: extract from the directories --keep kept here")
    args = ap.parse_args()
    conversations = load_conversations(args)
    extra = embedder(args)
    arms = [("default", args.default)] + ([] if args.no_baseline else [("tiny", args.baseline)])
    if args.arm:
        arms = [a for a in arms if a[0] == args.arm]
    results = {}
    for name, model in arms:
        files = [os.path.join(args.models, model)] + extra
        if args.fast_chat and name == "default":
            files.append(os.path.join(args.models, args.baseline))
        results[name] = arm(name, files, args, conversations)
    how = "replayed chats" if args.replay else "one `ledgermind chat` process per message"
    if args.fast_chat and not args.replay:
        how += " (default arm: replies by the tiny model)"
    print(f"\n{len(conversations)} conversations ({args.split}), {how}")
    print(f"{'arm / split':<22} {'facts held':>15} {'ungrounded':>9} {'items/conv':>10} {'extract s':>9} {'s/conv':>7} {'failed':>6} {'timeouts':>8}")
    for name, per_split in results.items():
        total = {}
        for split, s in sorted(per_split.items()):
            print(line(f"{name} / {split}", s))
            for k, v in s.items():
                total[k] = total.get(k, 0) + v
        if len(per_split) > 1:
            print(line(f"{name} / all", total))


if __name__ == "__main__":
    main()
