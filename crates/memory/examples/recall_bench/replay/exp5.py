from common import *
# Keyword hits outside the query's pool of 200 vector hits: no vector score
# ('pool-only'), density measured against the pool ('kw-too'), or the pool's
# median density ('median', shipped).
M, k = 200, 10
for name, rows, Vn, QV, meta, Q, splits, pos in sets():
    cc = QV @ Vn.T
    for variant in ('pool-only', 'kw-too', 'median'):
        out = np.full_like(cc, -9)
        for i, q in enumerate(Q):
            top = np.argpartition(-cc[i], M)[:M]
            S = Vn[top] @ Vn[top].T
            np.fill_diagonal(S, -1)
            r = np.sort(S, axis=1)[:, -k:].mean(1)
            out[i, top] = cc[i, top] - 0.5 * r
            ts = set(top.tolist())
            kr = [pos[int(x)] for x in q['keyword'] if pos[int(x)] not in ts]
            if not kr or variant == 'pool-only':
                continue
            if variant == 'kw-too':
                out[i, kr] = cc[i, kr] - 0.5 * np.sort(Vn[kr] @ Vn[top].T, axis=1)[:, -k:].mean(1)
            else:
                out[i, kr] = cc[i, kr] - 0.5 * np.median(r)
        print(name, variant, [(sp, evaluate(rows, out, Q, split=sp)) for sp in splits])
