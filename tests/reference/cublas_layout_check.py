#!/usr/bin/env python3
"""Replays the cuBLAS calls of kernels/nn_attention_cuda.cu (attention through strided-batched GEMMs) and
kernels/nn_backend_cuda.cu (linear) on an emulation of cuBLAS column-major semantics in numpy, against a direct
attention / linear in numpy (null key/value, masks, causal). Run by hand after changing a GEMM call: a wrong op,
leading dimension or stride fails here without a GPU.  python3 tests/reference/cublas_layout_check.py"""
# Emulates cuBLAS column-major strided-batched sgemm over flat arrays and replays kernels/nn_attention_cuda.cu's
# GEMM calls; compares with a direct numpy attention forward/backward (null kv, mask, causal).
import numpy as np
rng = np.random.default_rng(0)

def gemm(ta, tb, m, n, k, A, ao, lda, sa, B, bo, ldb, sb, C, co, ldc, sc, batch):
    for bt in range(batch):
        a0, b0, c0 = ao + bt*sa, bo + bt*sb, co + bt*sc
        # op(A) m x k ; A stored col-major: element (r, c) at A[a0 + r + c*lda]
        def getA(r, c):  # op(A)[r, c]
            return A[a0 + c + r*lda] if ta else A[a0 + r + c*lda]
        def getB(r, c):
            return B[b0 + c + r*ldb] if tb else B[b0 + r + c*ldb]
        opA = np.array([[getA(r, c) for c in range(k)] for r in range(m)])
        opB = np.array([[getB(r, c) for c in range(n)] for r in range(k)])
        Cm = opA @ opB
        for r in range(m):
            for c in range(n):
                C[c0 + r + c*ldc] = Cm[r, c]

def head_gemms(ta, tb, m, n, k, A, ao, lda, a_b, a_h, Bm, bo, ldb, b_b, b_h, C, co, ldc, c_b, c_h, Bsz, H):
    """kernels/nn_attention_cuda.cu's attention_gemm: one product per (item b, head h), operands at
    offset + b * x_b + h * x_h; strided-batched over the larger of B and H, one call per index of the other."""
    if H <= Bsz:
        for h in range(H):
            gemm(ta, tb, m, n, k, A, ao + h*a_h, lda, a_b, Bm, bo + h*b_h, ldb, b_b, C, co + h*c_h, ldc, c_b, Bsz)
    else:
        for b in range(Bsz):
            gemm(ta, tb, m, n, k, A, ao + b*a_b, lda, a_h, Bm, bo + b*b_b, ldb, b_h, C, co + b*c_b, ldc, c_h, H)

def run(B, Nq, Nk, H, D, null_kv, causal, masked):
    HD, off = H*D, (1 if null_kv else 0)
    K = Nk + off
    q = rng.standard_normal(B*Nq*HD); k = rng.standard_normal(B*Nk*HD); v = rng.standard_normal(B*Nk*HD)
    nk = rng.standard_normal(HD); nv = rng.standard_normal(HD); dout = rng.standard_normal(B*Nq*HD)
    mask = (rng.random((B, Nk)) > 0.3).astype(np.uint8) if masked else np.ones((B, Nk), np.uint8)
    if masked: mask[0, :] = 0
    shift = Nk - Nq
    def hidden(b, i, j): return mask[b, j] == 0 or (causal and j > i + shift)
    # reference
    Q = q.reshape(B, Nq, H, D); Kt = k.reshape(B, Nk, H, D); V = v.reshape(B, Nk, H, D); dO = dout.reshape(B, Nq, H, D)
    ref_out = np.zeros((B, Nq, H, D)); ref_dq = np.zeros_like(ref_out); ref_dk = np.zeros((B, Nk, H, D)); ref_dv = np.zeros_like(ref_dk)
    ref_dnk = np.zeros((H, D)); ref_dnv = np.zeros((H, D)); ref_P = np.zeros((B, H, Nq, K))
    for b in range(B):
        for h in range(H):
            keys = np.concatenate([nk.reshape(H, D)[h:h+1], Kt[b, :, h]]) if null_kv else Kt[b, :, h]
            vals = np.concatenate([nv.reshape(H, D)[h:h+1], V[b, :, h]]) if null_kv else V[b, :, h]
            for i in range(Nq):
                s = keys @ Q[b, i, h]
                hid = np.array([False]*off + [hidden(b, i, j) for j in range(Nk)])
                s = np.where(hid, -np.finfo(np.float32).max, s)
                p = np.exp(s - s.max()); p /= p.sum()
                ref_P[b, h, i] = p
                ref_out[b, i, h] = p @ vals
                dp = vals @ dO[b, i, h]
                ds = p * (dp - (p*dp).sum()); ds = np.where(hid, 0, ds)
                ref_dq[b, i, h] = ds @ keys
                dkeys = np.outer(ds, Q[b, i, h]); dvals = np.outer(p, dO[b, i, h])
                ref_dk[b, :, h] += dkeys[off:]; ref_dv[b, :, h] += dvals[off:]
                if null_kv: ref_dnk[h] += dkeys[0]; ref_dnv[h] += dvals[0]
    # replay of the CUDA orchestration
    probs = np.zeros(B*H*Nq*K)
    head_gemms(True, False, Nk, Nq, D, k, 0, HD, Nk*HD, D, q, 0, HD, Nq*HD, D, probs, off, K, H*Nq*K, Nq*K, B, H)
    P = probs.reshape(B, H, Nq, K)
    if null_kv:
        for b in range(B):
            for h in range(H):
                for i in range(Nq): P[b, h, i, 0] = Q[b, i, h] @ nk.reshape(H, D)[h]
    for b in range(B):
        for h in range(H):
            for i in range(Nq):
                hid = np.array([False]*off + [hidden(b, i, j) for j in range(Nk)])
                if hid.all(): P[b, h, i] = 1.0 / K; continue
                mx = P[b, h, i][~hid].max(); e = np.where(hid, 0, np.exp(P[b, h, i] - mx)); P[b, h, i] = e / e.sum()
    out = np.zeros(B*Nq*HD)
    head_gemms(False, False, D, Nq, Nk, v, 0, HD, Nk*HD, D, probs, off, K, H*Nq*K, Nq*K, out, 0, HD, Nq*HD, D, B, H)
    O = out.reshape(B, Nq, H, D)
    if null_kv: O += P[:, :, :, 0].transpose(0, 2, 1)[..., None] * nv.reshape(H, D)[None, None]
    ds = np.zeros(B*H*Nq*K)
    head_gemms(True, False, Nk, Nq, D, v, 0, HD, Nk*HD, D, dout, 0, HD, Nq*HD, D, ds, off, K, H*Nq*K, Nq*K, B, H)
    S = ds.reshape(B, H, Nq, K)
    if null_kv:
        for b in range(B):
            for h in range(H):
                for i in range(Nq): S[b, h, i, 0] = dO[b, i, h] @ nv.reshape(H, D)[h]
    for b in range(B):
        for h in range(H):
            for i in range(Nq):
                hid = np.array([False]*off + [hidden(b, i, j) for j in range(Nk)])
                pdp = (P[b, h, i] * S[b, h, i]).sum(); S[b, h, i] = np.where(hid, 0, P[b, h, i] * (S[b, h, i] - pdp))
    dq = np.zeros(B*Nq*HD); dk = np.zeros(B*Nk*HD); dv = np.zeros(B*Nk*HD)
    head_gemms(False, False, D, Nq, Nk, k, 0, HD, Nk*HD, D, ds, off, K, H*Nq*K, Nq*K, dq, 0, HD, Nq*HD, D, B, H)
    head_gemms(False, True, D, Nk, Nq, q, 0, HD, Nq*HD, D, ds, off, K, H*Nq*K, Nq*K, dk, 0, HD, Nk*HD, D, B, H)
    head_gemms(False, True, D, Nk, Nq, dout, 0, HD, Nq*HD, D, probs, off, K, H*Nq*K, Nq*K, dv, 0, HD, Nk*HD, D, B, H)
    dQ = dq.reshape(B, Nq, H, D)
    if null_kv: dQ += S[:, :, :, 0].transpose(0, 2, 1)[..., None] * nk.reshape(H, D)[None, None]
    errs = [np.abs(P - ref_P).max(), np.abs(O - ref_out).max(), np.abs(dQ - ref_dq).max(),
            np.abs(dk.reshape(B, Nk, H, D) - ref_dk).max(), np.abs(dv.reshape(B, Nk, H, D) - ref_dv).max()]
    print(B, Nq, Nk, H, D, null_kv, causal, masked, ["%.1e" % e for e in errs])
    assert max(errs) < 1e-9

run(2, 3, 5, 2, 4, True, False, True)
run(2, 4, 4, 3, 2, False, True, False)
run(1, 3, 6, 2, 3, False, True, True)
run(3, 2, 7, 2, 5, True, False, False)
run(1, 1, 6, 3, 2, True, False, False)   # decoding: one item, one query, heads batched (H > B)
run(2, 3, 5, 4, 2, True, True, True)     # H > B: batched over heads, one call per item
print("ok")

# linear (kernels/nn_backend_cuda.cu): y = x W^T, dx = dy W, dW = dy^T x
N, I, O = 5, 3, 4
x = rng.standard_normal(N*I); W = rng.standard_normal(O*I); dy = rng.standard_normal(N*O)
y = np.zeros(N*O); gemm(True, False, O, N, I, W, 0, I, 0, x, 0, I, 0, y, 0, O, 0, 1)
dx = np.zeros(N*I); gemm(False, False, I, N, O, W, 0, I, 0, dy, 0, O, 0, dx, 0, I, 0, 1)
dW = np.zeros(O*I); gemm(False, True, I, O, N, x, 0, I, 0, dy, 0, O, 0, dW, 0, I, 0, 1)
X, Wm, DY = x.reshape(N, I), W.reshape(O, I), dy.reshape(N, O)
print("linear", np.abs(y.reshape(N, O) - X @ Wm.T).max(), np.abs(dx.reshape(N, I) - DY @ Wm).max(), np.abs(dW.reshape(O, I) - DY.T @ X).max())
