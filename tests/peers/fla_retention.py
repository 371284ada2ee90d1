#!/usr/bin/env python3
"""fla peer of `retro-bench retention` (run by hand on a GPU machine, never by CI).

Runs the same shapes through flash-linear-attention's Triton kernels (chunk_retention, parallel_retention,
fused_recurrent_retention) and fla's naive_retention (PyTorch), and prints JSON in retro-bench's schema
(docs/retention.md). Usage:
    pip install flash-linear-attention   # RETENTION.md pins fla bc3b101dcb71 (0.5.2)
    python tests/peers/fla_retention.py --T 1024,2048,4096,8192,16384 --dtype bf16 --json fla.json
Defaults are fla's benchmark shapes: B=8, H=32, K=V=128. fp32 runs with TRITON_F32_DEFAULT=ieee as fla's tests do.
Triton's autotuning of fla's kernels takes minutes on a fresh machine: --record-configs FILE writes the configs this
run chose, --pin-configs FILE (tests/peers/fla_configs.json once recorded on an H100/H200) reuses them without a
search (tests/peers/triton_pinning.py); the JSON says which kernels ran pinned.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="naive,parallel,recurrent,chunkwise")
    ap.add_argument("--T", default="1024,2048,4096,8192,16384")
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--H", type=int, default=32)
    ap.add_argument("--K", type=int, default=128)
    ap.add_argument("--V", type=int, default=128)
    ap.add_argument("--dtype", default="bf16", help="bf16, fp16 or fp32 (comma-separated)")
    ap.add_argument("--chunk-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--naive-max-T", type=int, default=4096, help="naive materialises B×H×T×T; skip above this")
    ap.add_argument("--json", default="")
    ap.add_argument("--pin-configs", default="", help="pinned Triton configs (JSON from --record-configs); a missing file: tune")
    ap.add_argument("--record-configs", default="", help="write the Triton configs this run chose here")
    a = ap.parse_args()
    if "fp32" in a.dtype:
        os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")   # before triton compiles anything
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import triton_pinning   # wraps triton.autotune before fla's kernels are defined

    pins = triton_pinning.install(a.pin_configs if a.pin_configs and os.path.exists(a.pin_configs) else None)
    import torch
    from fla.ops.retention import chunk_retention, fused_recurrent_retention, parallel_retention
    from fla.ops.retention.naive import naive_retention

    dev = "cuda"
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

    def median_ms(fn, repeats):
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        return times[len(times) // 2]

    def sgemm_gflops(n=8192):
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        x = torch.randn(n, n, device=dev)
        ms = median_ms(lambda: x @ x, 5)
        torch.backends.cuda.matmul.allow_tf32 = old
        return 2 * n ** 3 / (ms * 1e6)

    def chunkwise_flops(B, T, H, K, V, C):   # same formula as retro-bench (docs/retention.md)
        f = 0.0
        for t0 in range(0, T, C):
            L = min(C, T - t0)
            f += 2 * L * L * (K + V) + 4 * L * K * V
        return f * B * H

    def forward(mode, q, k, v, C):
        if mode == "naive":   # fla's naive takes [B,H,T,D]
            return naive_retention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
        if mode == "parallel":
            return parallel_retention(q, k, v)[0]
        if mode == "recurrent":
            return fused_recurrent_retention(q, k, v)[0]
        return chunk_retention(q, k, v, chunk_size=C)[0]

    sgemm = sgemm_gflops()
    modes = a.modes.split(",")
    Ts = [int(t) for t in a.T.split(",")]
    rows, decode, crossover = [], [], []
    for dname in a.dtype.split(","):
        dt = dtypes[dname]
        for T in Ts:
            shape = (a.B, T, a.H)
            for mode in modes:
                if mode == "naive" and T > a.naive_max_T:
                    print(f"naive {dname} T={T}: skipped (T > --naive-max-T)", file=sys.stderr)
                    continue
                print(f"{mode} {dname} T={T}", file=sys.stderr)
                torch.manual_seed(0)
                q = torch.randn(*shape, a.K, device=dev, dtype=dt, requires_grad=True)
                k = torch.randn(*shape, a.K, device=dev, dtype=dt, requires_grad=True)
                v = torch.randn(*shape, a.V, device=dev, dtype=dt, requires_grad=True)
                do = torch.randn(*shape, a.V, device=dev, dtype=dt)
                buffer_bytes = (4 * q.numel() + 4 * v.numel()) * q.element_size()
                with torch.no_grad():
                    fwd_ms = median_ms(lambda: forward(mode, q, k, v, a.chunk_size), a.repeats)
                    out = forward(mode, q, k, v, a.chunk_size)
                    nonfinite = int((~torch.isfinite(out.float())).sum().item())

                def fb():
                    q.grad = k.grad = v.grad = None
                    forward(mode, q, k, v, a.chunk_size).backward(do)

                fwdbwd_ms = median_ms(fb, a.repeats)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                fb()
                torch.cuda.synchronize()
                peak_extra = torch.cuda.max_memory_allocated() - base
                row = {"mode": mode, "device": "cuda", "dtype": dname, "B": a.B, "T": T, "H": a.H, "K": a.K, "V": a.V,
                       "chunk_size": a.chunk_size if mode == "chunkwise" else None, "fwd_ms": fwd_ms,
                       "fwdbwd_ms": fwdbwd_ms, "buffer_bytes": buffer_bytes, "peak_extra_bytes": peak_extra,
                       "nonfinite": nonfinite, "finite": nonfinite == 0, "gflops": None, "sgemm_ratio": None}
                if mode == "chunkwise":
                    row["gflops"] = chunkwise_flops(a.B, T, a.H, a.K, a.V, a.chunk_size) / (fwd_ms * 1e6)
                    row["sgemm_ratio"] = row["gflops"] / sgemm
                rows.append(row)
                print("row: " + json.dumps(row), file=sys.stderr, flush=True)   # partial results survive a timeout
                del q, k, v, do
            if "recurrent" in modes:   # one decode step after a prefix of T
                q1 = torch.randn(a.B, 1, a.H, a.K, device=dev, dtype=dt)
                k1, v1 = torch.randn_like(q1), torch.randn(a.B, 1, a.H, a.V, device=dev, dtype=dt)
                h = torch.randn(a.B, a.H, a.K, a.V, device=dev, dtype=torch.float32)
                with torch.no_grad():
                    rec = median_ms(lambda: fused_recurrent_retention(q1, k1, v1, initial_state=h, output_final_state=True), a.repeats)

                    def chain(n=64):   # a decode loop: each step's state feeds the next (retro-bench's chained column)
                        state = h
                        for _ in range(n):
                            state = fused_recurrent_retention(q1, k1, v1, initial_state=state, output_final_state=True)[1]
                    chained = median_ms(chain, a.repeats) / 64
                    kp = torch.randn(a.B, T, a.H, a.K, device=dev, dtype=dt)
                    vp = torch.randn(a.B, T, a.H, a.V, device=dev, dtype=dt)
                    qp = torch.cat([kp[:, :-1], q1], 1)
                    par = median_ms(lambda: parallel_retention(qp, kp, vp)[0][:, -1:], a.repeats)
                decode.append({"T": T, "dtype": dname, "recurrent_step_ms": rec, "recurrent_step_chained_ms": chained,
                               "parallel_prefix_ms": par})
        cross = None
        par = {r["T"]: r["fwd_ms"] for r in rows if r["dtype"] == dname and r["mode"] == "parallel"}
        for r in rows:
            if r["dtype"] == dname and r["mode"] == "chunkwise" and r["T"] in par and r["fwd_ms"] < par[r["T"]]:
                cross = r["T"]
                break
        crossover.append({"dtype": dname, "T": cross, "B": a.B, "H": a.H, "K": a.K, "V": a.V})

    try:
        import fla
        fla_version = getattr(fla, "__version__", "unknown")
    except Exception:
        fla_version = "unknown"
    try:
        commit = subprocess.check_output(["git", "rev-parse", "--short=12", "HEAD"], text=True).strip()
    except Exception:
        commit = "unknown"
    import triton
    versions = {"fla": fla_version, "triton": triton.__version__, "torch": torch.__version__,
                "device": torch.cuda.get_device_name()}
    if a.record_configs:
        triton_pinning.record(a.record_configs, versions)
    out = {"tool": "fla peer (tests/peers/fla_retention.py)", "version": f"fla {fla_version}", "commit": commit,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command": " ".join(sys.argv), "device": "cuda: " + torch.cuda.get_device_name(), "threads": None,
           "sgemm_gflops": sgemm, "chunk_size": a.chunk_size, "repeats": a.repeats, "rows": rows,
           "decode": decode, "crossover": crossover, "versions": versions,
           "triton_configs": {"pins_read": pins, "pinned_kernels": triton_pinning.applied()}}
    text = json.dumps(out, indent=2, default=lambda x: None if isinstance(x, float) and math.isnan(x) else x)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
