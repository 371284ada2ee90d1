"""Pin the Triton autotuning of a peer's kernels (issue 19: fla's autotuning overran the GPU checks' call).

Triton's `@triton.autotune` compiles and times every config of a kernel on first use: fla's chunk kernels list up to
48 configs each, minutes per run on a fresh machine. `install()` (call it before importing fla) wraps
`triton.autotune` so that a kernel named in the pins file keeps only its pinned config (no search: same speed as
the tuned run where the pin came from the same GPU kind), and every other kernel tunes as usual. `record()` writes
the configs the autotuners chose in this run, with the versions, to a pins file for the next run:
    first run:  fla_retention.py --record-configs fla_configs.json          (full autotuning, slow)
    later runs: fla_retention.py --pin-configs tests/peers/fla_configs.json (pinned: no search)
A pin that matches none of a kernel's configs (another fla version) is ignored, and that kernel tunes.
"""
import json

_tuners = []   # (kernel name, autotuner) for record()
_pinned = {}
_applied = []
_original = []   # triton's own autotune, wrapped once


def _name(fn):
    inner = getattr(fn, "fn", fn)   # a JITFunction (or heuristics wrapper) keeps the Python function in .fn
    while hasattr(inner, "fn"):
        inner = inner.fn
    return f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', getattr(inner, '__name__', '?'))}"


def _as_dict(c):
    return {"kwargs": dict(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages}


def _matches(c, pin):
    return _as_dict(c) == pin


def install(pin_file=None):
    """Wraps triton.autotune; returns the number of pins read. Call before the peer's kernels are imported."""
    import triton

    if pin_file:
        with open(pin_file) as f:
            _pinned.update(json.load(f).get("kernels", {}))
    if not _original:
        _original.append(triton.autotune)
    original = _original[0]

    def autotune(configs, key, *args, **kwargs):
        def decorate(fn):
            name = _name(fn)
            chosen = configs
            if name in _pinned:
                kept = [c for c in configs if _matches(c, _pinned[name])]
                if kept:
                    chosen = kept
                    _applied.append(name)
            tuner = original(chosen, key, *args, **kwargs)(fn)
            _tuners.append((name, tuner))
            return tuner

        return decorate

    triton.autotune = autotune
    return len(_pinned)


def applied():
    """Names of the kernels whose configs were pinned."""
    return list(_applied)


def record(path, versions):
    """Writes each autotuned kernel's chosen config (the first key's, where it tuned for several) to path."""
    kernels = {}
    for name, tuner in _tuners:
        cache = getattr(tuner, "cache", {}) or {}
        if cache:
            kernels[name] = _as_dict(next(iter(cache.values())))
    with open(path, "w") as f:
        json.dump({"versions": versions, "kernels": kernels}, f, indent=1, sort_keys=True)
        f.write("\n")
    return len(kernels)
