"""Offline replay of `MemoryIndex::recall` on LoCoMo, to try a ranking idea
in minutes before writing it in Rust. Reads the indexes `locomo_bench --keep
DIR` kept and the questions `BENCH_DUMP=1` wrote beside them; vectors are the
stored floats (the index ranks by int8), keyword scores FTS5's own bm25 on
the kept index. Tuning conversations only unless `--held-out` is given.

    BENCH_SHORT=1 BENCH_DUMP=1 target/debug/examples/locomo_bench --keep /tmp/locomo
    pip install numpy
    LOCOMO_KEEP=/tmp/locomo LEDGERMIND_BENCH=DIR python3 replay.py   # or LOCOMO_DATA=FILE

The LoCoMo data is not in the repository (CC BY-NC, for measuring only):
without it the replay says so and measures nothing, as `locomo_bench` does.

It printed 0.762 for session 24's product settings on the tuning split, the
figure of the Rust run, and 0.811 with the lift of the side a question names
(0.813 once the persona's side was named only by its own name), 0.825 with
replies taking more of their question, 0.840 with the lift of the date a
question names.
"""
import json, re, sqlite3, sys, os, glob
import numpy as np
from collections import Counter, defaultdict

ROOT = os.environ.get('LOCOMO_KEEP', '/tmp/locomo')
DATA = os.environ.get('LOCOMO_DATA') or (os.path.join(os.environ['LEDGERMIND_BENCH'], 'locomo-tune.json') if os.environ.get('LEDGERMIND_BENCH') else '')
if not DATA or not os.path.isfile(DATA):
    sys.exit(f"LoCoMo data not found at {DATA!r}: nothing measured. Set LOCOMO_DATA=FILE, or LEDGERMIND_BENCH=DIR holding locomo-tune.json.")
STOP = set("""a about am an and any are as at be been but by can could did do does for from had has have he her him his how i if in into is it its me my of on or our she so that the their them then there they this to was we were what when where which who why will with would you your ever again remember tell told said did mentioned""".split())

def fts_terms(text):
    words = [w.lower() for w in re.split(r'[^\w]|_', text) if w]
    kept = [w for w in words if w not in STOP] or words
    out = []
    for w in kept:
        if w not in out: out.append(w)
    return out[:32]

class Conv:
    def __init__(self, d):
        self.db = sqlite3.connect(d + '/index.db')
        rows = self.db.execute('select i.rowid, i.external_id, i.text, i.ts_ms from items i order by rowid').fetchall()
        self.rows = [r[0] for r in rows]
        self.pos = {r: j for j, r in enumerate(self.rows)}
        self.ext = {r[0]: r[1] for r in rows}
        self.text = {r[0]: r[2] for r in rows}
        self.ts = {r[0]: r[3] for r in rows}
        vec = dict(self.db.execute('select rowid, embedding from vectors'))
        self.V = np.stack([np.frombuffer(vec[r], dtype='<f4') for r in self.rows])
        self.V /= np.linalg.norm(self.V, axis=1, keepdims=True)
        order = sorted(self.rows, key=lambda r: (self.ts[r], r))
        self.nb = {}
        for j, r in enumerate(order):
            p = order[j - 1] if j > 0 and self.ts[r] - self.ts[order[j - 1]] <= 6 * 3600000 else None
            n = order[j + 1] if j + 1 < len(order) and self.ts[order[j + 1]] - self.ts[r] <= 6 * 3600000 else None
            self.nb[r] = (p, n)
        self.Q = [json.loads(l) for l in open(d + '/questions.jsonl')]
        # Who said each turn, from the LoCoMo file (the index has it too,
        # as by_human, in indexes made after it had that column).
        sample = [x for x in json.load(open(DATA)) if d.rstrip('/').split('/')[-1].startswith(x['sample_id'] + '-')][0]
        conv = sample['conversation']
        self.names = (conv['speaker_a'], conv['speaker_b'])
        self.spk = {t['dia_id']: t['speaker'] for k, v in conv.items() if k.startswith('session_') and isinstance(v, list) for t in v}
        self.by_ext = {v: k for k, v in self.ext.items()}

    def bm25(self, terms, limit=None):
        """row -> -bm25 for rows matching any term (all matches)."""
        if not terms: return {}
        m = ' OR '.join('"%s"' % t for t in terms)
        sql = 'select rowid, -bm25(items_fts) from items_fts where items_fts match ? order by bm25(items_fts), rowid desc'
        if limit: sql += ' limit %d' % limit
        return dict(self.db.execute(sql, (m,)).fetchall())

DEF = dict(wv=0.7, wk=0.3, sat=12.0, n=50, dens=0.5, kctx=(0.25, 0.15), vctx=(0.3, 0.3), pool=200, speaker=0.15,
           answer=0.1, penalty=0.02, date=0.1)

MONTHS = [('january', 'janeiro'), ('february', 'fevereiro'), ('march', 'março'), ('april', 'abril'), ('may', 'maio'),
          ('june', 'junho'), ('july', 'julho'), ('august', 'agosto'), ('september', 'setembro'), ('october', 'outubro'),
          ('november', 'novembro'), ('december', 'dezembro')]

def query_dates(text):
    """memory::query_dates: [start, end) unix ms of each day (a day wider on
    each side) and month the question names with its year."""
    import datetime
    words = [w.lower() for w in re.split(r'[^\w]|_', text) if w and w.lower() not in ('de', 'of', 'the')]
    month = lambda w: next((i + 1 for i, names in enumerate(MONTHS) if w in names), None)
    def day(w):
        m = re.fullmatch(r'(\d+)(st|nd|rd|th|º)?', w)
        return int(m.group(1)) if m and 1 <= int(m.group(1)) <= 31 else None
    year = lambda w: int(w) if len(w) == 4 and w.isdigit() and 1900 <= int(w) <= 2200 else None
    def midnight(y, m, d):
        try: return int(datetime.datetime(y, m, d, tzinfo=datetime.timezone.utc).timestamp()) * 1000
        except ValueError: return None
    out, i, DAY = [], 0, 86400000
    while i < len(words):
        w = lambda k: words[i + k] if i + k < len(words) else ''
        y = year(w(2))
        dm = (day(w(0)), month(w(1))) if day(w(0)) and month(w(1)) else (day(w(1)), month(w(0))) if month(w(0)) and day(w(1)) else None
        if dm and y:
            t = midnight(y, dm[1], dm[0])
            if t is not None: out.append((t - DAY, t + 2 * DAY))
            i += 3
        elif month(w(0)) and year(w(1)):
            m, y = month(w(0)), year(w(1))
            out.append((midnight(y, m, 1), midnight(y + 1, 1, 1) if m == 12 else midnight(y, m + 1, 1)))
            i += 2
        else:
            i += 1
    return out

def asks(text):
    """memory::asks_a_question."""
    return text.rstrip().endswith(('?', '？'))

def query_names(text):
    """memory::query_names: capitalised words not at a sentence's start."""
    out = []; start = True
    for w in text.split():
        b = re.sub(r'^\W+|\W+$', '', w)
        for suf in ("'s", "’s"):
            if b.endswith(suf): b = b[:-len(suf)]
        if not start and b[:1].isupper() and len(b) > 1 and b not in out: out.append(b)
        start = w.endswith(('.', '?', '!', ':')) or (b == '' and start)
    return out

def named_side(c, text):
    """The speaker a question names (memory::is_persona_name and
    memory::is_persons_name over the first 200 turns holding each name; the
    persona is speaker B, as locomo_bench imports it): the persona by its
    own name, the person by a name the persona says in >= 80 % of >= 10
    turns; names pointing to both sides cancel."""
    side = None
    person, persona = c.names
    for name in query_names(text):
        if name in re.split(r'\W+', persona):
            who = persona
        else:
            rows = [r for r in c.rows if name in c.text[r]][:200]
            if len(rows) < 10: continue
            if Counter(c.spk.get(c.ext[r]) for r in rows).get(persona, 0) < 0.8 * len(rows): continue
            who = person
        if side not in (None, who): return None
        side = who
    return side

def rank(c, q, qv, kw_all, s=DEF):
    """The product's ranking, rows best first. kw_all: row -> bm25 of every match."""
    named = named_side(c, q['text']) if s['speaker'] > 0 else None
    dates = query_dates(q['text'])
    n = s['n']
    kw_sorted = sorted(kw_all, key=lambda r: (-kw_all[r], -r))
    keyword = kw_sorted[:n]
    cos_all = c.V @ qv
    pool_idx = np.argsort(-cos_all, kind='stable')[:max(n, s['pool'])]
    pool = [c.rows[i] for i in pool_idx]
    P = c.V[pool_idx]
    G = P @ P.T
    np.fill_diagonal(G, -np.inf)
    k = min(10, len(pool) - 1)
    dens_vals = np.sort(G, axis=1)[:, ::-1][:, :k].mean(axis=1)
    dens = {r: float(d) for r, d in zip(pool, dens_vals)}
    med = float(np.sort(dens_vals)[len(dens_vals) // 2])
    cos = lambda r: float(cos_all[c.pos[r]])
    dv = lambda r: dens.get(r, med)
    sim = lambda r: cos(r) - s['dens'] * dv(r)
    vhits = sorted(pool, key=lambda r: (-sim(r), -r))[:n]
    seeds = set(keyword) | set(vhits)
    ctx = set()
    for r in seeds:
        for x in c.nb[r]:
            if x is not None and x not in seeds: ctx.add(x)
    kwf = lambda r: max(kw_all.get(r, 0.0), 0.0)
    simf = lambda r: max(sim(r), 0.0)
    wk, wv = s['wk'], s['wv']
    out = {}
    for r in seeds | ctx:
        p, nx = c.nb[r]
        a = s['answer'] if p and asks(c.text[p]) else 0.0
        kk = kwf(r) + ((s['kctx'][0] + a) * kwf(p) if p else 0) + (s['kctx'][1] * kwf(nx) if nx else 0)
        vv = simf(r) + ((s['vctx'][0] + a) * simf(p) if p else 0) + (s['vctx'][1] * simf(nx) if nx else 0)
        said = 1.0 if named is not None and c.spk.get(c.ext[r]) == named else 0.0
        ws = s['speaker'] if named is not None else 0.0
        pen = s['penalty'] if asks(c.text[r]) else 0.0
        wd = s['date'] if dates else 0.0
        dated = 1.0 if any(a <= c.ts[r] < b for a, b in dates) else 0.0
        out[r] = max((wk * kk / (kk + s['sat']) + wv * vv + ws * said + wd * dated) / (wk + wv + ws + wd) - pen, 0.0)
    return sorted(out, key=lambda r: (-out[r], -r))

def load_all():
    ds = sorted(glob.glob(ROOT + '/conv-*'))
    return [Conv(d) for d in ds]

def recall_at(c, q, ranked, k=10):
    ev = [e for e in q['evidence'] if e in c.by_ext]
    if not ev: return None
    top = set(c.ext[r] for r in ranked[:k])
    return sum(1 for e in set(ev) if e in top) / len(set(ev))

CATS = [1, 2, 3, 4]
HELD = '--held-out' in sys.argv

def report(name, convs, fn, held=HELD, k=10):
    tot = defaultdict(list)
    for c in convs:
        for q in c.Q:
            if q['held'] != held: continue
            r = recall_at(c, q, fn(c, q), k)
            if r is None: continue
            tot[q['category']].append(r); tot[0].append(r)
    m = lambda x: sum(x) / len(x) if x else 0
    print('%-40s %.3f  | %s  (n=%d)' % (name, m(tot[0]), ' '.join('%.3f' % m(tot[c]) for c in CATS), len(tot[0])), flush=True)
    return m(tot[0])

def base(c, q):
    return rank(c, q, np.array(q['vector'], dtype=np.float32), c.bm25(fts_terms(q['text'])))

def plain_bm25(c, q):
    kw = c.bm25(fts_terms(q['text']))
    return sorted(kw, key=lambda r: (-kw[r], -r))

if __name__ == '__main__':
    convs = load_all()
    report('plain fts bm25', convs, plain_bm25)
    report('product (replay)', convs, base)
    report('without the speaker lift', convs,
           lambda c, q: rank(c, q, np.array(q['vector'], dtype=np.float32), c.bm25(fts_terms(q['text'])), dict(DEF, speaker=0.0)))
    report('without the date lift', convs,
           lambda c, q: rank(c, q, np.array(q['vector'], dtype=np.float32), c.bm25(fts_terms(q['text'])), dict(DEF, date=0.0)))

def misses(convs, fn, cat=None, limit=20, held=HELD):
    shown = 0
    for c in convs:
        for q in c.Q:
            if q['held'] != held or (cat and q['category'] != cat): continue
            r = recall_at(c, q, fn(c, q))
            if r is None or r >= 1: continue
            ranked = fn(c, q)
            print('\nQ[%d] %s  (meaning: %s) recall %.2f' % (q['category'], q['text'], q['meaning'], r))
            for e in q['evidence']:
                if e not in c.by_ext: continue
                row = c.by_ext[e]
                rk = ranked.index(row) + 1 if row in ranked else None
                print('  GOLD %s rank %s: %s' % (e, rk, c.text[row][:150]))
            for row in ranked[:3]:
                print('  top %s: %s' % (c.ext[row], c.text[row][:120]))
            shown += 1
            if shown >= limit: return
