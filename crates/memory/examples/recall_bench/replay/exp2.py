from common import *
import sys
for name, rows, Vn, QV, meta, Q, splits, pos in sets():
    mu=Vn.mean(0); C=norm(Vn-mu); QC=norm(QV-mu)
    base=QV@Vn.T; cc=QC@C.T
    # neighbourhood density of each doc (k nearest among docs), on centered
    S=C@C.T
    np.fill_diagonal(S,-1)
    for k in (5,10,30):
        r=np.sort(S,axis=1)[:,-k:].mean(1)
        for lam in (0.25,0.5,1.0):
            cs=cc-lam*0.5*r[None,:]
            for sp in splits:
                print(name,sp,f'csls k={k} lam={lam}','ours',evaluate(rows,cs,Q,split=sp),'emb',evaluate(rows,cs,Q,1,0,split=sp))
    for sp in splits:
        print(name,sp,'plain ours',evaluate(rows,base,Q,split=sp),'emb',evaluate(rows,base,Q,1,0,split=sp))
        print(name,sp,'centered ours',evaluate(rows,cc,Q,split=sp),'emb',evaluate(rows,cc,Q,1,0,split=sp))
