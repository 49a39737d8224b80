from common import *
for name, rows, Vn, QV, meta, Q, splits, pos in sets():
    for label,(D,QD) in {'plain':(Vn,QV),'centered':(norm(Vn-Vn.mean(0)),norm(QV-Vn.mean(0)))}.items():
        cc=QD@D.T
        for M,k,lam in [(100,5,1.0),(200,10,0.5),(200,10,1.0),(300,10,1.0),(200,5,1.0),(200,20,1.0)]:
            out=np.full_like(cc,-9)
            for i in range(len(Q)):
                top=np.argpartition(-cc[i],M)[:M]
                S=D[top]@D[top].T; np.fill_diagonal(S,-1)
                r=np.sort(S,axis=1)[:,-k:].mean(1)
                out[i,top]=cc[i,top]-lam*0.5*r
            res=[f"{sp}:{evaluate(rows,out,Q,split=sp)}" for sp in splits]
            print(name,label,M,k,lam,' '.join(res))
