# The ceiling on copying from the training documents (docs/retrieval.md section 7): the share of validation tokens
# that end an n-gram seen anywhere in the training documents. Usage: python3 ngram.py DB
import sys; sys.path.insert(0, __import__('os').path.dirname(__file__))
from common import *
ch,d,o,s,val=load(sys.argv[1] if len(sys.argv)>1 else 'db32')
ndoc=len(o)-1
def doc_tokens(i):
    t=ch[o[i]:o[i+1]].reshape(-1); return t[t!=0].astype(np.uint64)
P=np.uint64(1000003)
def ngram_hashes(t,n):
    if len(t)<n: return np.zeros(0,dtype=np.uint64)
    h=np.zeros(len(t)-n+1,dtype=np.uint64)
    for k in range(n):
        h=h*P+t[k:len(t)-n+1+k]+np.uint64(1)
    return h
for n in (4,8,12,16,24):
    tr=np.concatenate([ngram_hashes(doc_tokens(i),n) for i in range(ndoc) if not val[i]])
    trs=np.unique(tr)
    hit=0;tot=0
    for i in range(ndoc):
        if not val[i]: continue
        t=doc_tokens(i); h=ngram_hashes(t,n)
        hit+=np.isin(h,trs).sum(); tot+=len(t)
    print(f'n={n}: share of val tokens ending an n-gram seen in training: {hit/tot:.3f}')
