#!/usr/bin/env python3
"""Loads a retro-train run (RUN/config.json + RUN/model.safetensors, or a checkpoint's weights) into RETRO-pytorch's
retro_pytorch.RETRO, strictly, or refuses in one line why that model would not be the same (docs/formats.md,
"RETRO model weights"). Not part of the build or the tests' requirements: it needs torch, safetensors and
retro-pytorch (pip install retro-pytorch safetensors).

    python scripts/retro_pytorch_load.py RUN [--weights FILE] [--save OUT.pt]

As a module: `model, k = load_run("run/")` gives the RETRO model in eval mode and the neighbours per chunk it reads.

config.json is RETRO-pytorch's constructor arguments plus RetroKit's own fields (docs/model.md, "Config"):
`num_neighbours` (k: RP takes the neighbours' count from the tensor it is given) and `comment` are dropped; the
others change what the model computes, so a run that sets them away from RP's behaviour is refused:
`cca_query_positions` other than "rp", `neighbour_alignment` other than "chunk", `neighbour_min_match`,
`tie_embeddings`, `copy_head`. (`cca_zero_init` changes only the first step's weights: the trained model is RP's.)
"""
import argparse
import importlib.util
import json
import os
import sys

# RetroKit fields that RETRO-pytorch's model does not have, and the value at which RP computes the same thing
RETROKIT_ONLY = {
    "cca_query_positions": "rp",
    "neighbour_alignment": "chunk",
    "neighbour_min_match": 0,
    "tie_embeddings": False,
    "copy_head": False,
}
DROPPED = ("num_neighbours", "comment", "cca_zero_init")


class NotRetroPytorch(Exception):
    pass


def rp_arguments(config):
    """RETRO(**args) for a RetroKit config dict, and k; NotRetroPytorch naming the first field RP cannot match."""
    args = dict(config)
    for key, rp_value in RETROKIT_ONLY.items():
        if key in args and args.pop(key) != rp_value:
            raise NotRetroPytorch(f"\"{key}\" is {json.dumps(config[key])}: RETRO-pytorch has no such model "
                                  f"(it computes {json.dumps(rp_value)}; docs/model.md)")
    k = args.pop("num_neighbours", None)
    for key in DROPPED:
        args.pop(key, None)
    return {key: (tuple(v) if isinstance(v, list) else v) for key, v in args.items()}, k


def import_retro():
    # retro_pytorch.retrieval imports faiss / autofaiss at module level, which loading a model never uses
    if importlib.util.find_spec("autofaiss") is None:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "tests", "peers"))
        from rp_index_stand_ins import install_index_stand_ins
        install_index_stand_ins()
    from retro_pytorch import RETRO
    return RETRO


def load_run(run, weights=None):
    from safetensors.torch import load_file

    with open(os.path.join(run, "config.json")) as f:
        config = json.load(f)
    args, k = rp_arguments(config)
    if weights is None:
        weights = os.path.join(run, "model.safetensors")
    elif os.path.isdir(weights):   # a checkpoint folder
        weights = os.path.join(weights, "model.safetensors")
    model = import_retro()(**args)
    model.load_state_dict(load_file(weights), strict=True)   # every tensor, the two rotary buffers included
    model.eval()
    return model, k


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="retro-train's output folder (config.json, model.safetensors)")
    ap.add_argument("--weights", help="other weights: a .safetensors file or a checkpoint folder")
    ap.add_argument("--save", help="also save the model's state_dict with torch.save")
    a = ap.parse_args()
    try:
        model, k = load_run(a.run, a.weights)
    except NotRetroPytorch as e:
        print(f"retro_pytorch_load: error: {os.path.join(a.run, 'config.json')}: {e}", file=sys.stderr)
        sys.exit(2)
    except (OSError, RuntimeError, TypeError, ValueError) as e:   # a missing file, a tensor the model lacks
        what = " ".join(str(e).split())   # torch's message spans lines: one line, cut where it lists tensors
        print(f"retro_pytorch_load: error: {a.weights or a.run}: {what[:300]}{'...' if len(what) > 300 else ''}",
              file=sys.stderr)
        sys.exit(2)
    params = sum(p.numel() for p in model.parameters())
    print(f"{a.run}: loaded into retro_pytorch.RETRO (strict), {params} parameters, {k} neighbours per chunk")
    if a.save:
        import torch
        torch.save(model.state_dict(), a.save)
        print(f"saved {a.save}")


if __name__ == "__main__":
    main()
