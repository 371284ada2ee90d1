# Usage: python3 copymix.py DB NEIGHBOURS.npy TOKEN_LOSSES.npy EVAL.json K TOPK [MODE_INDEX [SEQUENCES]] (docs/retrieval.md
# sections 7 and 17). SEQUENCES: how many of the report's sequences (default 160, section 7's; 0 = all of them).
# Gain a copy mechanism could bring: mix the baseline LM (gold-token loss from --token-losses) with a copy
# prediction from the retrieved text (longest suffix match of the context, next token after it), lambda per
# match length fitted on the same tokens (optimistic but indicative).
import sys, json; sys.path.insert(0, __import__('os').path.dirname(__file__))
from common import *
db, knnp, tl, js, k, K = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
mi=int(sys.argv[7]) if len(sys.argv)>7 else 3
nseq=int(sys.argv[8]) if len(sys.argv)>8 else 160
ch,d,o,s,val=load(db); knn=np.load(knnp); N,cs=ch.shape
L=np.load(tl); J=json.load(open(js)); first=J['token_losses']['sequence_first_chunks']; n=L.shape[2]
flat=ch.reshape(-1)
def lcr_len(a,b):
    best=0; prev=np.zeros(len(b)+1,dtype=np.int32)
    for x in a:
        if x==0: prev=np.zeros(len(b)+1,dtype=np.int32); continue
        cur=np.zeros(len(b)+1,dtype=np.int32); eq=(b==x); cur[1:][eq]=prev[:-1][eq]+1; best=max(best,int(cur.max())); prev=cur
    return best
def copy_pred(ctx, ret):
    # longest m: ctx[-m:] occurs in some r at position p (not at its end) -> predict r[p+m]
    best=(0,None)
    for r in ret:
        for m in range(1, min(len(ctx), 48)+1):
            pat=ctx[-m:]
            if len(r)<m+1: break
            w=np.lib.stride_tricks.sliding_window_view(r[:-1],m)
            hits=np.nonzero((w==pat).all(1))[0]
            if len(hits)==0: break
            if m>best[0]: best=(m,int(r[hits[-1]+m]))
    return best
rows=[]
for si,c0 in enumerate(first[:nseq] if nseq>0 else first):
    doc=d[c0]; end=o[doc+1]
    seq=np.zeros(n+1,dtype=np.int64)
    for i in range(n+1):
        row=c0+i//cs
        if row<end: seq[i]=ch[row,i%cs]
    rets={}
    for t in range(n):
        if np.isnan(L[mi,si,t]): continue
        p=t+1; u=p//cs
        if u==0: rows.append((0,0,L[mi,si,t])); continue
        if u not in rets:
            src=c0+u-1; cands=[j for j in knn[src,:K] if j>=0 and not val[d[j]]]
            items=[]
            for j in cands:
                b=np.concatenate([ch[j], ch[j+1] if j+1<N and d[j+1]==d[j] else np.zeros(0,ch.dtype)]); b=b[b!=0]
                items.append((lcr_len(ch[src],b) if K>k else 0, b))
            if K>k: items.sort(key=lambda x:-x[0])
            rets[u]=[b for _,b in items[:k]]
        m,y=copy_pred(seq[max(0,p-48):p], rets[u])
        rows.append((m, int(y==seq[p]) if y is not None else 0, L[mi,si,t]))
R=np.array(rows,dtype=float); m=R[:,0]; ok=R[:,1]; base=R[:,2]; pg=np.exp(-base)
total=base.sum(); newtot=0
print('tokens',len(R),'base loss %.4f'%base.mean())
for lo,hi in [(0,0),(1,1),(2,2),(3,4),(5,8),(9,16),(17,999)]:
    sel=(m>=lo)&(m<=hi)
    if sel.sum()==0: continue
    best=(0,base[sel].sum())
    for lam in np.linspace(0,0.99,100):
        v=-np.log((1-lam)*pg[sel]+lam*ok[sel]).sum()
        if v<best[1]: best=(lam,v)
    newtot+=best[1]
    print(f'match {lo}-{hi}: share {sel.mean():.3f} copy right {ok[sel].mean():.3f} base {base[sel].mean():.3f} lambda {best[0]:.2f} mixed {best[1]/sel.sum():.3f}')
print('mixture gain over all tokens: %.4f nats'%((total-newtot)/len(R)))
