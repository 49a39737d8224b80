"""What the command-line conversation benchmarks share: the conversation
set and its filters, a fresh data directory holding only the models an arm
uses, one timed CLI process, and accent-free lower case for judging."""
import json
import os
import subprocess
import tempfile
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SET = os.path.join(HERE, "..", "..", "crates", "cli", "bench", "replies.json")


def fold(text):
    """Lower case without accents, so "Violão" matches "violao"."""
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c))


def run(cmd, env, timeout=600):
    """Runs one CLI process; answers its wall time and the finished process."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return time.monotonic() - t0, p


def link_models(home, model_files):
    """Hard links (folders: symbolic links) to the models, never copies."""
    os.makedirs(os.path.join(home, "models"), exist_ok=True)
    for f in model_files:
        target = os.path.join(home, "models", os.path.basename(f))
        if os.path.isdir(f):
            os.symlink(f, target)
        else:
            os.link(f, target)


def fresh_home(prefix, model_files):
    home = tempfile.mkdtemp(prefix=prefix)
    link_models(home, model_files)
    return home


def add_set_args(ap):
    """The arguments every benchmark takes: binary, models, which conversations."""
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True, help="folder holding the GGUF files")
    ap.add_argument("--default", default="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--baseline", default="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--set", action="append", help="conversation files (default: the bench replies set)")
    ap.add_argument("--split", default="all", help="tune, held-out or all")
    ap.add_argument("--only", help="comma-separated conversation ids")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--verbose", action="store_true")


def load_conversations(args):
    conversations = []
    for f in args.set or [DEFAULT_SET]:
        with open(f) as fh:
            conversations += json.load(fh)["conversations"]
    conversations = [c for c in conversations if args.split == "all" or c.get("split") == args.split]
    if args.only:
        keep = set(args.only.split(","))
        conversations = [c for c in conversations if c["id"] in keep]
    return conversations


def embedder(args):
    """The embedder folder both arms share (recall), when there is one."""
    return [p for p in [os.path.join(args.models, "all-MiniLM-L6-v2")] if os.path.isdir(p)]
