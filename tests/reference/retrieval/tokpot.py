# Usage: python3 tokpot.py DB NEIGHBOURS.npy TOKEN_LOSSES.npy EVAL.json [K] (docs/retrieval.md section 7): per-token loss of each mode split by whether the predicted token is copyable from what CCA reads
import sys, json; sys.path.insert(0, __import__('os').path.dirname(__file__))
from common import *
db, knnp, tl, js = sys.argv[1:5]; k=int(sys.argv[5]) if len(sys.argv)>5 else 2
ch,d,o,s,val=load(db); knn=np.load(knnp); N,cs=ch.shape
L=np.load(tl); J=json.load(open(js)); modes=J['modes']; first=J['token_losses']['sequence_first_chunks']
n=L.shape[2]
def ctx_match(seq_tokens, t, ret, nmin):
    # longest m such that seq[t-m+1..t] (ending at predicted token t) occurs in ret
    best=0
    for m in range(1, 40):
        if t-m+1<0: break
        pat=seq_tokens[t-m+1:t+1]
        found=False
        for r in ret:
            if len(r)<m: continue
            w=np.lib.stride_tricks.sliding_window_view(r,m)
            if (w==pat).all(1).any(): found=True;break
        if not found: break
        best=m
    return best
rows=[]
for si,c0 in enumerate(first):
    doc=d[c0]; end=o[doc+1]
    seq=np.zeros(n+1,dtype=np.int64)
    for i in range(n+1):
        row=c0+i//cs
        if row<end: seq[i]=ch[row,i%cs]
    for t in range(n):
        if np.isnan(L[0,si,t]): continue
        p=t+1; u=p//cs
        if u==0: m=0
        else:
            src=c0+u-1; ret=[]
            for j in knn[src,:k]:
                if j<0 or val[d[j]]: continue
                b=np.concatenate([ch[j], ch[j+1] if j+1<N and d[j+1]==d[j] else np.zeros(0,ch.dtype)]); ret.append(b[b!=0])
            m=ctx_match(seq,p,ret,1)
        rows.append((m,)+tuple(L[:,si,t]))
    if si>=120: break
R=np.array(rows); m=R[:,0]
print('tokens',len(R),'modes',modes)
for lo,hi in [(0,0),(1,3),(4,7),(8,15),(16,99)]:
    sel=(m>=lo)&(m<=hi)
    print(f'match len {lo}-{hi}: share {sel.mean():.3f}  '+'  '.join(f'{mo} {R[sel,1+i].mean():.3f}' for i,mo in enumerate(modes)))
