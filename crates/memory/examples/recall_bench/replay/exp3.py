from common import *
for name, rows, Vn, QV, meta, Q, splits, pos in sets():
    mu=Vn.mean(0); C=norm(Vn-mu); QC=norm(QV-mu)
    cc=QC@C.T
    N=len(rows)
    # (b) local density among top-M hits of each query
    for M,k,lam in [(200,10,1.0),(500,10,1.0),(500,30,1.0),(1000,30,1.0),(2000,30,1.0)]:
        out=cc.copy()
        for i in range(len(Q)):
            top=np.argpartition(-cc[i],M)[:M]
            S=C[top]@C[top].T; np.fill_diagonal(S,-1)
            r=np.sort(S,axis=1)[:,-k:].mean(1)
            out[i]=-9; out[i,top]=cc[i,top]-lam*0.5*r
        for sp in splits:
            print(name,sp,f'local M={M} k={k} lam={lam}','ours',evaluate(rows,out,Q,split=sp),'emb',evaluate(rows,out,Q,1,0,split=sp))
    # (c) sampled density
    rng=np.random.default_rng(1)
    for samp in (500,1000,2000):
        idx=rng.choice(N,samp,replace=False)
        S=C@C[idx].T
        kk=max(1,round(30*samp/N))
        r=np.sort(S,axis=1)[:,-kk-1:-1].mean(1)
        cs=cc-0.5*r[None,:]
        for sp in splits:
            print(name,sp,f'sampled {samp} k={kk}','ours',evaluate(rows,cs,Q,split=sp),'emb',evaluate(rows,cs,Q,1,0,split=sp))
