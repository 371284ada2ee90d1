#!/usr/bin/env python3
"""Golden files for tests/test_model_golden.cpp: RETRO-pytorch 0.3.9 at a tiny config, fixed seed.

Run by hand (never by CI); only the small outputs in golden/retro_tiny/ are committed:
    python3 -m venv /tmp/rpvenv
    /tmp/rpvenv/bin/pip install torch einops safetensors retro-pytorch==0.3.9 "pyarrow<16"
    /tmp/rpvenv/bin/python tests/reference/make_retro_golden.py
(retro-pytorch pulls autofaiss; with numpy < 2 pinned by it, pyarrow must be < 16 for `import retro_pytorch`.)

Writes into tests/reference/golden/retro_tiny/:
  config.json          the model config (RetroKit's JSON = RP's constructor arguments + num_neighbours)
  weights.safetensors  model.state_dict() after torch.manual_seed(SEED) init (names = RP's state_dict)
  seq.npy              (B, n+1) int64: inputs seq[:, :-1], labels seq[:, 1:] (pad 0 = ignored label)
  retrieved.npy        (B, n/cs, k, 2cs) int64 neighbour + continuation ids; pad 0 masked. Holds a -1
                       neighbour (all pad) and a missing continuation (second half pad), as retro-chunk makes.
  logits.npy           (B, n, V) float32: model(seq[:, :-1], retrieved)
  grads.safetensors    d loss / d param for every parameter, loss = model(seq, retrieved, return_loss=True)
  expected.json        loss, the AdamW setup, and the losses of 5 AdamW steps (+ the loss after the 5th step)
"""
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

import retro_pytorch
from retro_pytorch import RETRO

SEED = 1234
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden", "retro_tiny")
CONFIG_PATH = os.path.join(HERE, "..", "..", "examples", "configs", "tiny.json")

# AdamW exactly as RP's get_optimizer builds it (decay on tensors with >= 2 dims only), with a larger lr
# so that 5 steps move the loss visibly.
ADAMW = dict(lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
STEPS = 5
B, N = 2, 16   # batch, input length (4 chunks of 4) = max_seq_len


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    with open(CONFIG_PATH) as f:
        cfg = json.load(f)
    cfg.pop("comment", None)
    k = cfg["num_neighbours"]
    # RP 0.3.9's RETRO.__init__ does not pass `heads` to its Encoder/Decoder: they always use 8 heads.
    assert cfg["heads"] == 8, "RETRO-pytorch 0.3.9 always builds 8 heads; a golden config must say heads = 8"
    rp_args = {key: (tuple(v) if isinstance(v, list) else v) for key, v in cfg.items() if key != "num_neighbours"}
    model = RETRO(**rp_args)
    model.train()   # RP asserts training mode when a loss is asked for; dropout is 0

    cs, V = cfg["chunk_size"], cfg["num_tokens"]
    l, r = N // cs, 2 * cs
    g = torch.Generator().manual_seed(SEED + 1)
    seq = torch.randint(1, V, (B, N + 1), generator=g)
    seq[1, N - 4:] = 0                      # item 1: document ended, labels after it are pad (ignored)
    retrieved = torch.randint(1, V, (B, l, k, r), generator=g)
    retrieved[0, 0, 1, :] = 0               # a -1 neighbour: all pad, masked
    retrieved[0, 2, 0, cs:] = 0             # a neighbour without continuation (document end)
    retrieved[1, 3, :, :] = 0               # a chunk with no neighbour at all (null k/v only)

    os.makedirs(OUT, exist_ok=True)
    sd = {name: t.detach().clone().contiguous() for name, t in model.state_dict().items()}
    save_file(sd, os.path.join(OUT, "weights.safetensors"), metadata={"format": "pt"})
    np.save(os.path.join(OUT, "seq.npy"), seq.numpy().astype(np.int64))
    np.save(os.path.join(OUT, "retrieved.npy"), retrieved.numpy().astype(np.int64))
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")

    with torch.no_grad():
        logits = model(seq[:, :-1], retrieved)
    np.save(os.path.join(OUT, "logits.npy"), logits.numpy().astype(np.float32))

    loss = model(seq, retrieved, return_loss=True)
    loss.backward()
    grads = {name: p.grad.detach().clone().contiguous() for name, p in model.named_parameters()}
    save_file(grads, os.path.join(OUT, "grads.safetensors"), metadata={"format": "pt"})
    model.zero_grad()

    params = list(model.parameters())
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], **ADAMW)
    losses = []
    for _ in range(STEPS):
        step_loss = model(seq, retrieved, return_loss=True)
        step_loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(step_loss.item())
    final_loss = model(seq, retrieved, return_loss=True).item()

    expected = {
        "loss": loss.item(),
        "adamw": {"lr": ADAMW["lr"], "beta1": ADAMW["betas"][0], "beta2": ADAMW["betas"][1], "eps": ADAMW["eps"],
                  "weight_decay": ADAMW["weight_decay"], "no_decay": "tensors with fewer than 2 dims"},
        "adamw_losses": losses,
        "loss_after_last_step": final_loss,
        "seed": SEED,
        "torch": torch.__version__,
        "retro_pytorch": getattr(retro_pytorch, "__version__", "0.3.9"),
        "python": sys.version.split()[0],
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")
    print(json.dumps(expected, indent=2))


if __name__ == "__main__":
    main()
