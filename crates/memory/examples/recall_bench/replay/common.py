import json, sqlite3, sys, numpy as np
def load(name):
    d=f'/tmp/membench/{name}-7-8000-all-MiniLM-L6-v2'
    db=sqlite3.connect(d+'/index.db')
    rows=[];vecs=[]
    for r,b in db.execute('select rowid, embedding from vectors order by rowid'):
        rows.append(r); vecs.append(np.frombuffer(b,dtype='<f4'))
    V=np.stack(vecs); rows=np.array(rows)
    meta={r:(t,ts) for r,t,ts in db.execute('select rowid,text,ts_ms from items')}
    Q=[json.loads(l) for l in open(d+'/questions.jsonl')]
    return rows,V,meta,Q
def norm(X):
    return X/np.linalg.norm(X,axis=-1,keepdims=True)
def evaluate(rows,cosM,Q,wv=0.8,wk=0.2,sat=4.0,n=50,split=None):
    h5=h10=tot=0; ranks=[]
    for i,q in enumerate(Q):
        if split is not None and q['tune']!=split: continue
        tot+=1
        cos=cosM[i]
        vi=np.argpartition(-cos,n)[:n]
        kw={int(k):v for k,v in q['keyword'].items()}
        kwtop=sorted(kw,key=lambda r:-kw[r])[:n] if wk>0 else []
        cand=set(rows[vi].tolist()) if wv>0 else set()
        cand|=set(kwtop)
        pos={r:j for j,r in enumerate(rows.tolist())} if not hasattr(evaluate,'pos') else evaluate.pos
        evaluate.pos=pos
        sc=[]
        for r in cand:
            k=max(kw.get(r,0.0),0.0); c=max(float(cos[pos[r]]),0.0)
            sc.append(((wk*k/(k+sat)+wv*c)/(wk+wv), r))
        sc.sort(reverse=True)
        top=[r for _,r in sc[:10]]
        e=q['evidence']
        if e in top[:5]: h5+=1
        if e in top: h10+=1
    return 100*h5/tot,100*h10/tot
if __name__=='__main__':
    for name in 'AB':
        rows,V,meta,Q=load(name)
        evaluate.__dict__.pop('pos',None)
        Vn=norm(V); QV=norm(np.array([q['vector'] for q in Q],dtype=np.float32))
        split=False if name=='A' else None
        base=QV@Vn.T
        print(name,'ours',evaluate(rows,base,Q,split=split),'emb',evaluate(rows,base,Q,1,0,split=split))
        mu=Vn.mean(0)
        C=norm(Vn-mu); QC=norm(QV-mu)
        cc=QC@C.T
        print(name,'centered ours',evaluate(rows,cc,Q,split=split),'emb',evaluate(rows,cc,Q,1,0,split=split))
        U,S,Wt=np.linalg.svd(Vn-mu,full_matrices=False)
        for D in (1,2,3,5,8):
            P=Wt[:D]
            Cd=norm((Vn-mu)-(Vn-mu)@P.T@P); Qd=norm((QV-mu)-(QV-mu)@P.T@P)
            cd=Qd@Cd.T
            print(name,f'abtt D={D} ours',evaluate(rows,cd,Q,split=split),'emb',evaluate(rows,cd,Q,1,0,split=split))

def sets():
    """Each set's rows, normalised vectors, query vectors, texts, questions,
    splits to report (A: tuning and held-out; B: all) and row → position."""
    for name in 'AB':
        rows, V, meta, Q = load(name)
        evaluate.__dict__.pop('pos', None)
        Vn = norm(V)
        QV = norm(np.array([q['vector'] for q in Q], dtype=np.float32))
        pos = {r: j for j, r in enumerate(rows.tolist())}
        yield name, rows, Vn, QV, meta, Q, ([True, False] if name == 'A' else [None]), pos
