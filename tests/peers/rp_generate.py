#!/usr/bin/env python3
"""Peer for `retro-bench generate`: RETRO-pytorch 0.3.9's TrainingWrapper.generate loop on torch CPU, or on the GPU
with --device cuda (retro-bench generate --device cuda).

Like RP's generate (RETRO.md C.2), every new token re-runs the whole model on the whole sequence, and the
encoder on every finished chunk's neighbours; the logits of the last position go through RP's default
top_k(thres = 0.9) filter and Gumbel sampling. Neighbours come from a fixed random array (as on RetroKit's
side of the bench: the BERT embedding and faiss search of RP's fetch_knn_chunks_fn are not timed).

    python3 tests/peers/rp_generate.py --config C.json --weights W.safetensors --prompt-len 512 --steps 8 --threads 2

Prints one JSON line: ms_per_token (median over the timed steps, after one warm-up step), tokens_per_s,
the lengths covered. Needs: pip install torch "pyarrow<16" retro-pytorch==0.3.9 safetensors
"""
import argparse
import json
import os
import sys
import statistics
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rp_index_stand_ins import import_failure_site, install_index_stand_ins   # noqa: E402 (after the path)

try:
    import torch
    from safetensors.torch import load_file
except Exception as e:   # printed as a skip so that retro-bench keeps its own rows
    print(json.dumps({"skipped": f"cannot import torch + safetensors: {type(e).__name__}: {e} (at {import_failure_site(e)})"}))
    sys.exit(3)


def rp_model(config_path, weights_path):
    install_index_stand_ins()
    from retro_pytorch import RETRO

    with open(config_path) as f:
        cfg = json.load(f)
    cfg.pop("comment", None)
    k = cfg.pop("num_neighbours")
    args = {key: (tuple(v) if isinstance(v, list) else v) for key, v in cfg.items()}
    model = RETRO(**args)
    state = load_file(weights_path)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or [u for u in unexpected if not u.endswith("inv_freq")]:
        raise SystemExit(f"weights do not fit the config: missing {missing}, unexpected {unexpected}")
    model.eval()
    return model, cfg, k


def top_k_filter(logits, thres=0.9):
    # RP's top_k: keep max(int((1 - thres) * V), 1) largest logits
    keep = max(int((1 - thres) * logits.shape[-1]), 1)
    values, index = torch.topk(logits, keep)
    out = torch.full_like(logits, float("-inf"))
    out.scatter_(1, index, values)
    return out


def gumbel_argmax(logits, temperature=1.0):
    u = torch.zeros_like(logits).uniform_(0, 1)
    g = -torch.log((-torch.log(u.clamp(min=1e-20))).clamp(min=1e-20))
    return (logits / temperature + g).argmax(dim=-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--prompt-len", type=int, required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-retrieval", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    a = ap.parse_args()

    torch.set_num_threads(max(a.threads, 1))
    torch.manual_seed(a.seed)
    try:
        model, cfg, k = rp_model(a.config, a.weights)
    except ImportError as e:
        print(json.dumps({"skipped": f"cannot import retro_pytorch: {type(e).__name__}: {e} (at {import_failure_site(e)})"}))
        return 3
    if a.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch sees no CUDA device"}))
        return 3
    model = model.to(a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    cs, V = cfg["chunk_size"], cfg["num_tokens"]
    total = a.prompt_len + a.steps + 1
    if total > cfg["max_seq_len"]:
        raise SystemExit(f"prompt + steps = {total} exceeds max_seq_len {cfg['max_seq_len']}")
    g = torch.Generator().manual_seed(a.seed)
    out = torch.randint(4, V, (1, a.prompt_len), generator=g)
    out[0, 0] = 2
    neighbours = torch.randint(4, V, (1, total // cs + 1, k, 2 * cs), generator=g).to(a.device)
    out = out.to(a.device)

    times = []
    with torch.no_grad():
        for step in range(a.steps + 1):   # step 0 warms up
            t0 = time.perf_counter()
            n = out.shape[1]
            chunks = n // cs
            retrieved = neighbours[:, :chunks] if (chunks > 0 and not a.no_retrieval) else None
            logits = model(out, retrieved=retrieved)[:, -1]
            sampled = gumbel_argmax(top_k_filter(logits))
            out = torch.cat((out, sampled[:, None]), dim=1)
            sync()
            if step > 0:
                times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    print(json.dumps({"peer": "retro-pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
                      "prompt_len": a.prompt_len, "steps": a.steps, "ms_per_token": ms, "tokens_per_s": 1e3 / ms}))


if __name__ == "__main__":
    sys.exit(main())
