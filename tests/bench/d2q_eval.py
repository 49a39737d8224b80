#!/usr/bin/env python3
"""Passages with the questions a model wrote for them (doc2query), measured
on faq_bench's dump: the product's BM25 and vector lists from the dump, the
written questions as a BM25 list and a MiniLM list (a passage's best
question), fused by weighted RRF as the library fuses; tuning and held-out
halves as faq_bench splits them.

  BENCH_DUMP=/tmp/d faq_bench GOLD.tsv FAQ_DIR          # /tmp/d.MiniLM.json
  d2q_probe MODEL.gguf /tmp/d.MiniLM.json WRITTEN.jsonl  # the questions
  LEDGERMIND_MINILM_DIR=… python3 tests/bench/d2q_eval.py /tmp/d.MiniLM.json WRITTEN.jsonl target/debug/examples/embed_probe WORKDIR

Needs nltk (Porter stemmer, as FTS5's porter tokenizer) from PyPI.
"""
import functools, json, math, os, re, subprocess, sys
from collections import defaultdict, Counter
dump = json.load(open(sys.argv[1]))
gen = {}
for l in open(sys.argv[2]):
    v = json.loads(l)
    qs_ = [re.sub(r'^\s*\d+[.)]\s*', '', x).strip() for x in v["questions"].split("\n")]
    gen[v["id"]] = [x for x in qs_ if len(x) > 8]
chunks = dump["chunks"]; qs = dump["questions"]
ids = [c["id"] for c in chunks]
print("generated for", sum(1 for c in chunks if c["id"] in gen), "of", len(chunks))
# embeddings: queries and generated questions
texts = [q["question"] for q in qs]
owner = []
for c in chunks:
    for g in gen.get(c["id"], []):
        texts.append(g); owner.append(c["id"])
if not os.path.exists(os.path.join(sys.argv[4], 'vec.jsonl')) or sum(1 for _ in open(os.path.join(sys.argv[4], 'vec.jsonl'))) != len(texts):
    json.dump(texts, open(os.path.join(sys.argv[4], 'texts.json'), 'w'))
    subprocess.run([sys.argv[3], os.path.join(sys.argv[4], 'texts.json'), os.path.join(sys.argv[4], 'vec.jsonl')], check=True)
vecs = [json.loads(l) for l in open(os.path.join(sys.argv[4], 'vec.jsonl'))]
qv = {q["id"]: vecs[i] for i, q in enumerate(qs)}
gv = vecs[len(qs):]
def dot(a, b): return sum(x*y for x, y in zip(a, b))
try:
    from nltk.stem import PorterStemmer
except ImportError:
    sys.exit("d2q_eval: needs nltk (pip install nltk) for the Porter stemmer FTS5 uses")
_ps = PorterStemmer()
_sc = {}
def _st(w):
    if w not in _sc: _sc[w] = _ps.stem(w)
    return _sc[w]
def words(t): return [_st(w) for w in re.findall(r"\w+", t.lower())]
def bm25_index(docs, k1=1.2, b=0.75):
    toks = [words(d) for d in docs]; avg = sum(map(len, toks))/len(toks)
    df = Counter(w for t in toks for w in set(t)); N = len(toks); tfs = [Counter(t) for t in toks]
    def search(q):
        sc = []
        for i, tf in enumerate(tfs):
            s = 0.0; L = len(toks[i])
            for w in words(q):
                if w in tf:
                    idf = math.log(1+(N-df[w]+0.5)/(df[w]+0.5)); s += idf*tf[w]*(k1+1)/(tf[w]+k1*(1-b+b*L/avg))
            sc.append(s)
        return [ids[i] for i in sorted(range(N), key=lambda i: -sc[i])[:50]]
    return search
B = {"text": bm25_index([c["text"] for c in chunks]),
     "text+q": bm25_index([c["text"]+"\n"+"\n".join(gen.get(c["id"], [])) for c in chunks]),
     "q": bm25_index(["\n".join(gen.get(c["id"], [])) for c in chunks])}
@functools.lru_cache(maxsize=None)
def ranked(source, qid):
    """A question's top 50 passage ids from one source: the dump's own
    lists ("vector", "bm25"), a BM25 index of `B`, or "qvec" (a passage's
    best written question by MiniLM)."""
    q = by_id[qid]
    if source in ("vector", "bm25"):
        return q[source]
    if source in B:
        return B[source](q["question"])
    best = defaultdict(lambda: -1.0)
    for o, g in zip(owner, gv):
        best[o] = max(best[o], dot(qv[qid], g))
    return sorted(best, key=lambda i: -best[i])[:50]
by_id = {q["id"]: q for q in qs}
def rrf(lists, weights, k=60):
    s = defaultdict(float)
    for L, w in zip(lists, weights):
        for r, i in enumerate(L): s[i] += w/(k+r+1)
    return sorted(s, key=lambda i: -s[i])
def score(f, held):
    n = r5 = 0; mrr = 0
    for q in qs:
        if q["held_out"] != held or not q["relevant"]: continue
        n += 1; top = f(q)[:10]; rel = set(q["relevant"])
        r = next((i for i, c in enumerate(top) if c in rel), None)
        if r is not None: r5 += r < 5; mrr += 1/(r+1)
    return f"R@5 {r5/n:.3f} MRR {mrr/n:.3f}"
# Each arm: the sources it fuses and their RRF weights; the first two and
# "fusion" are the baseline of the same run (the product's own lists).
ARMS = [
    ("BM25 product (dump)", [("bm25", 1)]),
    ("vector product (dump)", [("vector", 1)]),
    ("py bm25 text", [("text", 1)]),
    ("py bm25 text+q", [("text+q", 1)]),
    ("qvec only", [("qvec", 1)]),
    ("rrf vec.7 bm25dump.3 (≈fusion)", [("vector", .7), ("bm25", .3)]),
    ("rrf vec.7 bm25 text+q.3", [("vector", .7), ("text+q", .3)]),
]
for wv, wq, wb in [(.5, .2, .3), (.35, .35, .3), (.4, .4, .2), (.3, .5, .2), (.5, .3, .2)]:
    ARMS.append((f"rrf vec{wv} qvec{wq} bm25dump{wb}", [("vector", wv), ("qvec", wq), ("bm25", wb)]))
    ARMS.append((f"rrf vec{wv} qvec{wq} bm25 t+q{wb}", [("vector", wv), ("qvec", wq), ("text+q", wb)]))
for extra in [[("q", .2)], [("qvec", .2)], [("qvec", .2), ("q", .2)], [("qvec", .35)], [("qvec", .35), ("q", .35)], [("qvec", .5), ("q", .2)]]:
    name = "rrf vec.7 bm25dump.3 " + " ".join(("bm25q" if s == "q" else s) + str(w).lstrip("0") for s, w in extra)
    ARMS.append((name, [("vector", .7), ("bm25", .3)] + extra))
for name, sources in ARMS:
    f = lambda q, sources=sources: rrf([ranked(s, q["id"]) for s, _ in sources], [w for _, w in sources])
    print(f"{name:36} tuning {score(f, False)}   held {score(f, True)}")
