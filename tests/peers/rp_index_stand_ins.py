"""retro_pytorch.retrieval imports faiss and autofaiss at module level for building indices, which the peers that
train or sample the model (rp_train.py, rp_generate.py) never call. Where they are not installed (the GPU machine:
no network, wheels carried by hand, docs/gpu.md), install_index_stand_ins() registers stand-in modules that raise
if used, so that the model imports without them. It changes nothing where they are installed."""
import importlib.util
import sys
import types


def install_index_stand_ins():
    for name in ("faiss", "autofaiss"):
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            continue
        stand_in = types.ModuleType(name)

        def unavailable(*args, _name=name, **kwargs):
            raise RuntimeError(f"{_name} is not installed (this peer never builds an index)")

        stand_in.build_index = unavailable
        stand_in.__getattr__ = lambda attr, _f=unavailable: _f
        sys.modules[name] = stand_in
