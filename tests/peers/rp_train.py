#!/usr/bin/env python3
"""Peer for `retro-bench train`: training steps of RETRO-pytorch 0.3.9 on torch CPU (fp32), or on the GPU
(--device cuda; fp32 eager, or --autocast bf16: torch.autocast with bfloat16, the usual mixed-precision run)
at the same config, batch, sequence length and thread count as RetroKit, on random tokens and neighbours
of the same shapes. One step = zero_grad + forward with loss + backward + AdamW step (RP's
get_optimizer: lr 3e-4, weight decay 0.1 on tensors with >= 2 dims). Prints one JSON line: the
median step time of --steps timed steps after --warmup untimed ones, and tokens/s = batch*seq_len
over it. When torch or retro_pytorch cannot be imported it prints {"skipped": reason} and exits 3.

  pip install torch --index-url https://download.pytorch.org/whl/cpu
  pip install "pyarrow<16" retro-pytorch==0.3.9
  python3 tests/peers/rp_train.py --config examples/configs/demo.json --batch 8 --seq-len 256 --threads 1

Config mapping as tests/reference/make_retro_golden.py: every field but num_neighbours (and
"comment") is a RETRO(...) keyword argument, lists become tuples; heads must be 8 (RP 0.3.9 ignores it).
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="RetroKit model config (JSON)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=0, help="input tokens per sequence (0 = max_seq_len)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5, help="timed steps (median reported)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--no-retrieval", action="store_true", help="decoder only (RP's forward without retrieved)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--autocast", default="none", choices=["none", "bf16"],
                    help="bf16: forward under torch.autocast(dtype=bfloat16), fp32 master weights")
    args = ap.parse_args()

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from rp_index_stand_ins import import_failure_site, install_index_stand_ins
    install_index_stand_ins()
    try:
        import torch
        import torch.nn.functional as F
        from importlib.metadata import version
        from retro_pytorch import RETRO
        from retro_pytorch.optimizer import get_optimizer
    except Exception as e:   # ImportError, or a broken dependency (pyarrow >= 16 with numpy < 2)
        print(json.dumps({"skipped": f"cannot import torch + retro_pytorch: {type(e).__name__}: {e} (at {import_failure_site(e)})"}))
        return 3

    rp_version = version("retro-pytorch")
    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch sees no CUDA device"}))
        return 3
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.config) as f:
        cfg = json.load(f)
    cfg.pop("comment", None)
    k = cfg.pop("num_neighbours", 2)
    if cfg.get("heads", 8) != 8:
        print(json.dumps({"skipped": "RETRO-pytorch 0.3.9 always builds 8 heads; the config says "
                                     f"{cfg['heads']}, so the models would differ"}))
        return 3
    rp_args = {key: (tuple(v) if isinstance(v, list) else v) for key, v in cfg.items()}
    model = RETRO(**rp_args).to(args.device)
    model.train()
    opt = get_optimizer(model.parameters(), lr=3e-4, wd=0.1)

    V, cs, pad = cfg["num_tokens"], cfg["chunk_size"], cfg.get("pad_id", 0)
    n = args.seq_len or cfg["max_seq_len"]
    l, r = n // cs, 2 * cs
    retrieval = not args.no_retrieval and l > 0 and bool(cfg.get("dec_cross_attn_layers"))
    g = torch.Generator().manual_seed(args.seed)
    seq = torch.randint(1, V, (args.batch, n + 1), generator=g).to(args.device)
    retrieved = torch.randint(1, V, (args.batch, l, k, r), generator=g).to(args.device) if retrieval else None
    autocast = torch.autocast(device_type=args.device, dtype=torch.bfloat16, enabled=args.autocast == "bf16")

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast:
            if retrieval:
                loss = model(seq, retrieved, return_loss=True)
            else:   # RP's forward ignores return_loss without retrieved: the same loss by hand
                logits = model(seq[:, :-1])
                loss = F.cross_entropy(logits.transpose(1, 2).float(), seq[:, 1:], ignore_index=pad)
        loss.backward()
        opt.step()
        return loss.item()   # waits for the step's kernels on a GPU (the copy follows them on the stream)

    losses = []
    for _ in range(args.warmup):
        losses.append(step())
    wall, cpu = [], []
    for _ in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        losses.append(step())
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    secs, cpu_secs = statistics.median(wall), statistics.median(cpu)
    tokens = args.batch * n
    print(json.dumps({
        "impl": f"RETRO-pytorch {rp_version} torch {torch.__version__}"
                + ("" if args.device == "cpu" else f" {args.device} " + ("bf16 autocast" if args.autocast == "bf16" else "fp32")),
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor(),
        "threads": args.threads,
        "batch": args.batch,
        "seq_len": n,
        "retrieval": retrieval,
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": args.steps,
        "step_seconds": secs,
        "step_seconds_all": wall,
        "cpu_seconds": cpu_secs,
        "tokens_per_s": tokens / secs,
        "tokens_per_cpu_s": tokens / cpu_secs,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "python": platform.python_version(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
