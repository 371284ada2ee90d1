# Helpers of the retrieval analyses (docs/retrieval.md section 7): the validation split as retro-train draws it
# (splitmix64 of the document index < 0.05), a database folder as numpy arrays, the longest common token run.
import numpy as np
M=(1<<64)-1
def splitmix64(x):
    x=(x+0x9e3779b97f4a7c15)&M
    x=((x^(x>>30))*0xbf58476d1ce4e5b9)&M
    x=((x^(x>>27))*0x94d049bb133111eb)&M
    return x^(x>>31)
def is_val(doc, frac=0.05):
    return (splitmix64(doc)>>11)*2.0**-53 < frac
def load(db):
    ch=np.load(f'{db}/chunks.npy'); d=np.load(f'{db}/doc_ids.npy'); o=np.load(f'{db}/doc_offsets.npy'); s=np.load(f'{db}/seq_starts.npy')
    ndoc=len(o)-1
    val=np.array([is_val(i) for i in range(ndoc)])
    return ch,d,o,s,val
def lcr(a,b):
    # longest common contiguous run between 1D arrays a (query) and b
    best=0
    n,m=len(a),len(b)
    prev=np.zeros(m+1,dtype=np.int32)
    for i in range(n):
        cur=np.zeros(m+1,dtype=np.int32)
        eq=(b==a[i])
        cur[1:][eq]=prev[:-1][eq]+1
        best=max(best,int(cur.max()))
        prev=cur
    return best
