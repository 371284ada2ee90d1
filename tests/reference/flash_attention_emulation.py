# By hand (numpy): kernels/nn_flash_attention_cuda.cu's arithmetic emulated (bf16 Q, K, V, dO, P and dS; fp32
# accumulation; 64-row blocks with the online softmax), against exact attention in double on the bf16-rounded inputs,
# by the op harness's metric rms(x - ref) / rms(ref). Checks that the nn.flash_attention cases' bf16 bound (5e-3) holds for
# the algorithm itself, before any GPU runs it. Usage: python3 tests/reference/flash_attention_emulation.py
import numpy as np, sys
def bf(x):
    x = np.asarray(x, np.float32); u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)
def ref(q,k,v,do,causal):
    N=q.shape[0]; s=q@k.T
    if causal: s=np.where(np.tril(np.ones((N,N),bool)), s, -np.inf)
    p=np.exp(s-s.max(1,keepdims=True)); p/=p.sum(1,keepdims=True)
    o=p@v; dp=do@v.T; ds=p*(dp-(p*dp).sum(1,keepdims=True))
    return o, ds@k, ds.T@q, p.T@do
def emu(q,k,v,do,causal,Bk=64):
    N,D=q.shape; qb,kb,vb,dob=[bf(x).astype(np.float32) for x in (q,k,v,do)]
    O=np.zeros((N,D),np.float32); lse=np.zeros(N,np.float32)
    for q0 in range(0,N,Bk):
        rows=slice(q0,min(q0+Bk,N)); m=np.full(rows.stop-q0,-np.inf,np.float32); l=np.zeros_like(m); acc=np.zeros((rows.stop-q0,D),np.float32)
        last = q0//Bk if causal else (N-1)//Bk
        for kb0 in range(0,(last+1)*Bk,Bk):
            cols=slice(kb0,min(kb0+Bk,N))
            S=(qb[rows]@kb[cols].T).astype(np.float32)
            I=np.arange(rows.start,rows.stop)[:,None]; J=np.arange(cols.start,cols.stop)[None,:]
            hid = (J>I) if causal else np.zeros_like(S,bool)
            S=np.where(hid,-np.inf,S); mn=np.maximum(m,S.max(1)); alpha=np.where(np.isinf(m),0,np.exp(m-mn))
            P=bf(np.where(hid,0,np.exp(S-mn[:,None]))); l=l*alpha+P.sum(1); m=mn
            acc=acc*alpha[:,None]+P@vb[cols]
        O[rows]=acc/l[:,None]; lse[rows]=m+np.log(l)
    delta=(do.astype(np.float32)*O).sum(1)
    dq=np.zeros((N,D),np.float32); dk=np.zeros_like(dq); dv=np.zeros_like(dq)
    I=np.arange(N)[:,None]; J=np.arange(N)[None,:]
    S=qb@kb.T; hid=(J>I) if causal else np.zeros((N,N),bool)
    P=np.where(hid,0,np.exp(S-lse[:,None])); dP=dob@vb.T; dS=np.where(hid,0,P*(dP-delta[:,None]))
    dv=bf(P).T@dob; dk=bf(dS).T@qb; dq=bf(dS)@kb
    return O,dq,dk,dv
rng=np.random.default_rng(1)
for (N,D,causal,amp) in [(130,32,True,1),(200,64,True,1),(150,128,True,1),(100,64,False,1),(1024,64,True,0.125**0.5*1)]:
    q,k,v,do=[rng.uniform(-1,1,(N,D)) for _ in range(4)]
    q=q*amp
    r=ref(*[bf(x).astype(np.float64) for x in (q,k,v,do)],causal)
    e=emu(q,k,v,do,causal)
    print(N,D,causal,' '.join(f'{n}:{np.sqrt(((a-b)**2).mean()/(b**2).mean()):.2e}' for n,a,b in zip(['o','dq','dk','dv'],e,r)))
