#!/usr/bin/env python3
"""Facts-then-questions conversations through the command line, one
`ledgermind chat` process per message (as a script or a held-out check runs
it), on the default model and, beside it in the same run, on the tiny model.

    python3 tests/bench/replies_cli.py --bin target/debug/ledgermind \
        --models ~/.cache/ledgermind/models [--split held-out] [--set FILE ...]

Each arm gets a fresh data directory holding only its model (hard links),
under a private keychain (run it through scripts/with-keychain.sh). Prints,
per arm: fact questions answered, loops, Portuguese questions answered in
Portuguese, and the wall time of each `chat` process (p50, p90). For the
messages that tell something (small talk), it counts the replies that only
say the message back ("echoed"), that speak as the person ("as them", "I
live in Lisbon."), and that ask something back; and, over all replies, the
help-desk phrases a friend does not use ("How can I help you today?") and
the replies that say three words running of the reply before them again;
for the questions, the answers given in the person's voice ("I like to eat
ramen.").
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


# Words that carry no content of their own: a reply made of the message's
# content words plus these says the message back.
FILLER = set(fold(w) for w in """you your you're are is was it its it's that that's this so and the a an of to in
on at for with yes right true really oh wow nice good great sounds
você voce vocês está esta estás é e o a os as um uma de do da em no na que isso certo verdade sim
muito legal bom ótimo otimo tem""".split())


def content_words(text):
    return [w for w in (fold(x) for x in words(text)) if len(w) > 2 and w not in FILLER]


def echoed(message, reply):
    """The reply's content words are (nearly) all the message's own."""
    said = set(content_words(message))
    mine = content_words(reply)
    return bool(mine) and "?" not in reply and sum(w in said for w in mine) >= 0.75 * len(mine)


def as_them(reply):
    """A reply that starts as the person would ("I live…", "Eu toco…")."""
    first = fold(words(reply)[0]) if words(reply) else ""
    return first in {"i", "i'm", "my", "eu", "meu", "minha", "meus", "minhas"}


SERVICE = re.compile(r"(help|assist) you( with anything)?( today)?|any other questions|as an ai|language model|"
                     r"posso (te )?ajudar|modelo de linguagem|sou uma? (ia|intelig)", re.I)


def service_talk(reply):
    """Help-desk phrasing a friend does not use ("How can I help you today?")."""
    return bool(SERVICE.search(reply))


def runs(text, n):
    ws = [fold(w) for w in words(text)]
    return {tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)}


def says_again(previous, reply, n=3):
    """The reply repeats a run of n words of the reply before it ("Que ótimo! Como vai?" turn after turn)."""
    return bool(previous) and bool(runs(previous, n) & runs(reply, n))


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
    stats = dict(questions=0, answered=0, replies=0, loops=0, pt_questions=0, pt_in_pt=0, times=[], failed=0,
                 told=0, echoed=0, as_them=0, asked=0, service=0, again=0, answer_as_them=0)
    for c in conversations:
        # A data directory per conversation: nothing of one is recalled in another.
        env = dict(os.environ, LEDGERMIND_HOME=fresh_home(f"lm-replies-{name}-", model_files))
        persona = c["persona"]
        _, p = run([args.bin, "persona", "create", persona, "--description", c["description"]], env)
        if p.returncode != 0:
            sys.exit(f"{name}: persona create failed: {p.stderr.strip()}")
        previous = ""
        for i, t in enumerate(c["turns"]):
            secs, p = run([args.bin, "chat", persona, t["say"]], env)
            reply = p.stdout.strip()
            if p.returncode != 0:
                stats["failed"] += 1
                reply = f"[failed] {p.stderr.strip()[:200]}"
            stats["times"].append(secs)
            stats["replies"] += 1
            stats["loops"] += loops(reply)
            stats["service"] += service_talk(reply)
            stats["again"] += says_again(previous, reply)
            previous = reply
            mark = ""
            if t.get("expect"):
                stats["questions"] += 1
                ok = any(fold(e) in fold(reply) for e in t["expect"])
                stats["answered"] += ok
                mark = "OK  " if ok else "MISS"
                # "What do I like to eat?" → "I like to eat ramen.": the
                # fact, in the person's voice.
                if as_them(reply):
                    stats["answer_as_them"] += 1
                    mark += " as them"
                if c["language"].startswith("pt"):
                    stats["pt_questions"] += 1
                    in_pt = portuguese(reply)
                    stats["pt_in_pt"] += in_pt
                    mark += "" if in_pt else " (not pt)"
            elif not t["say"].rstrip().endswith("?"):
                stats["told"] += 1
                e, a, q = echoed(t["say"], reply), as_them(reply), "?" in reply
                stats["echoed"] += e
                stats["as_them"] += a
                stats["asked"] += q
                mark = "echo" if e else "as them" if a else "asks" if q else ""
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
    print(f"{'arm':<8} {'answered':>10} {'loops':>8} {'pt in pt':>9} {'p50 s':>7} {'p90 s':>7} {'failed':>7}"
          f" {'echoed':>8} {'as them':>8} {'asked':>8} {'help-desk':>10} {'said again':>11} {'answer as them':>15}")
    for name, s in results.items():
        told = s['told']
        print(f"{name:<8} {s['answered']:>4}/{s['questions']:<5} {s['loops']:>3}/{s['replies']:<4} "
              f"{s['pt_in_pt']:>3}/{s['pt_questions']:<5} {pct(s['times'], .5):>7.2f} {pct(s['times'], .9):>7.2f} {s['failed']:>7}"
              f" {s['echoed']:>4}/{told:<3} {s['as_them']:>4}/{told:<3} {s['asked']:>4}/{told:<3}"
              f" {s['service']:>5}/{s['replies']:<4} {s['again']:>6}/{s['replies']:<4} {s['answer_as_them']:>10}/{s['questions']:<4}")


if __name__ == "__main__":
    main()
