# Usage: python3 cover.py DB NEIGHBOURS.npy K_LIST (docs/retrieval.md section 7). Share of val tokens (chunk u+1) whose n-gram ending at it (context may reach into chunk u) occurs in what CCA reads
import sys; sys.path.insert(0, __import__('os').path.dirname(__file__))
from common import *
db=sys.argv[1]; knnp=sys.argv[2]; ks=[int(x) for x in sys.argv[3].split(',')]
ch,d,o,s,val=load(db); knn=np.load(knnp); N=len(ch); cs=ch.shape[1]
P=np.uint64(1000003)
def hashes(t,n):
    t=t.astype(np.uint64)
    if len(t)<n: return np.zeros(0,dtype=np.uint64)
    h=np.zeros(len(t)-n+1,dtype=np.uint64)
    for k in range(n): h=h*P+t[k:len(t)-n+1+k]+np.uint64(1)
    return h
vc=[c for c in np.where(val[d])[0] if c+1<N and d[c+1]==d[c]]
rng=np.random.default_rng(0); samp=rng.choice(vc,min(1500,len(vc)),replace=False)
for n in (4,8,12):
  for k in ks:
    hit=tot=0
    for c in samp:
        ctx=np.concatenate([ch[c],ch[c+1]]); ctx=ctx[ctx!=0]
        h=hashes(ctx,n)[-int((ch[c+1]!=0).sum()):] if len(ctx)>=n else np.zeros(0,np.uint64)
        ret=[]
        for j in knn[c,:k]:
            if j<0 or val[d[j]]: continue
            b=np.concatenate([ch[j], ch[j+1] if j+1<N and d[j+1]==d[j] else np.zeros(0,ch.dtype)]); b=b[b!=0]
            ret.append(hashes(b,n))
        ret=np.concatenate(ret) if ret else np.zeros(0,np.uint64)
        hit+=np.isin(h,ret).sum(); tot+=int((ch[c+1]!=0).sum())
    print(f'n={n} k={k}: share of tokens copyable from the read neighbours {hit/tot:.3f}')
