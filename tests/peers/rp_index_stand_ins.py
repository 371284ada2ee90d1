"""retro_pytorch.retrieval imports faiss and autofaiss at module level for building indices, which the peers that
train or sample the model (rp_train.py, rp_generate.py) never call. Where they are not installed (the GPU machine:
no network, wheels carried by hand, docs/gpu.md), install_index_stand_ins() registers stand-in modules that raise
if used, so that the model imports without them. It changes nothing where they are installed."""
import importlib.util
import sys
import traceback
import types


def install_index_stand_ins():
    for name in ("faiss", "autofaiss"):
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            continue
        stand_in = types.ModuleType(name)

        def unavailable(*args, _name=name, **kwargs):
            raise RuntimeError(f"{_name} is not installed (this peer never builds an index)")

        def attribute(attr, _f=unavailable, _name=name):
            # dunder names (__file__, __path__, ...) stay missing: torch and inspect probe every module in sys.modules
            # for them and must see a plain AttributeError, not a function
            if attr.startswith("__"):
                raise AttributeError(f"module {_name!r} (stand-in) has no attribute {attr!r}")
            return _f

        stand_in.build_index = unavailable
        stand_in.__getattr__ = attribute
        sys.modules[name] = stand_in


def import_failure_site(error):
    """file:line where an import failed, for the peer's one-line "skipped" reason."""
    frames = traceback.extract_tb(error.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
