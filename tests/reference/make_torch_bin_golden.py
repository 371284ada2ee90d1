#!/usr/bin/env python3
"""Golden files for lib/core/torch_checkpoint.h (pytorch_model.bin read without Python).

Run by hand (torch >= 2.1; made with torch 2.15):  python tests/reference/make_torch_bin_golden.py
Writes tests/reference/golden/torch_bin/:
  reference.safetensors   every tensor of the state dict below, contiguous: what each .bin must read back as
  zip_p2.bin              torch.save default (zip archive, pickle protocol 2)
  zip_p4.bin              pickle_protocol=4 (FRAME, SHORT_BINUNICODE, MEMOIZE opcodes)
  legacy.bin              _use_new_zipfile_serialization=False (the format before PyTorch 1.6)
  nested.bin              {"model": state_dict, "epoch": 3}: the state_dict under "model" read
  research.bin            {"model": ..., "optimizer": ..., "args": argparse.Namespace, "epoch": 3}: "model" read
  no_tensors.bin          {"args": argparse.Namespace, "epoch": 3}: refused (no tensor anywhere it looks)
  research2.bin           a tensor at the top beside "state_dict", a dict subclass, a defaultdict, a deque: "state_dict"
  legacy_mixed.bin        legacy: a complex tensor beside "model" (its record stepped over): "model" read
  legacy_module.bin       legacy: torch.save(nn.Linear(2, 2)), a whole module: refused
  expanded.bin            a stride-0 view (an expanded tensor): refused
  evil.bin                a pickle naming os.system: its tensor read, the object left out, nothing run
  nocrc.bin               {"w": ...} saved with compute_crc32 = False (records without CRC-32): read
  extra_state.bin         a state_dict with a non-tensor `_extra_state` entry: the tensors read, the entry left out
  shared_view.bin         one transposed view under two names: copied once
  neg_view.bin, complex.bin   a lazily negated view, a complex tensor beside a plain one: left out, naming why
  py2_legacy.bin          hand-written: a legacy file as Python 2 pickled it (str keys as SHORT_BINSTRING,
                          OrderedDict([[k, v], ...])): read
  wrap.bin                hand-written: a stride-0 f64 view of 2^61 + 7 elements (its bytes wrap 64 bits): refused
  bert_tiny_bin/          golden/bert_tiny's weights as pytorch_model.bin (zip) — its embeddings are the golden's
  bert_tiny_bin_sharded/  the same weights as two legacy-format shards + pytorch_model.bin.index.json
  labse_dense_bin/        golden/st_dense/labse's Dense weights as pytorch_model.bin (older sentence-transformers)
  retro_tiny_state_dict.pt  golden/retro_tiny's RETRO-pytorch weights as torch.save(model.state_dict()) writes them
  retro_tiny_checkpoint.pt  the same under "model" beside argparse arguments and a step, as research code saves them
"""
import argparse
import collections
import json
import os
import shutil
import struct
import zipfile

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden", "torch_bin")


def state_dict():
    g = torch.Generator().manual_seed(43)
    base = torch.randn(5, 7, generator=g)
    sd = {
        "dense.weight": torch.randn(4, 6, generator=g),
        "dense.bias": torch.randn(4, generator=g),
        "half": torch.randn(3, 5, generator=g).half(),
        "bf16": torch.randn(2, 3, 4, generator=g).bfloat16(),
        "double": torch.randn(3, generator=g).double(),
        "position_ids": torch.arange(9).unsqueeze(0),
        "mask": torch.tensor([True, False, True]),
        "int8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "uint8": torch.tensor([0, 200, 255], dtype=torch.uint8),
        "int32": torch.tensor([-(2**31), 7], dtype=torch.int32),
        "uint16": torch.tensor([0, 65535, 12345], dtype=torch.uint16),   # _rebuild_tensor_v3 (untyped storage)
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "transposed": base.t(),                 # strides (1, 7): copied out row-major
        "rows_2_4": base[2:4],                  # storage offset 14, shares base's storage
        "column_3": base[:, 3],                 # offset 3, stride 7
        "base": base,
        "param": torch.nn.Parameter(torch.randn(2, 2, generator=g)),   # _rebuild_parameter
    }
    sd["tied"] = sd["dense.weight"]             # two names, one storage
    return sd


class Config(dict):
    """A dict subclass, as EasyDict-style config classes are."""


# Pickle opcodes written out by hand, for files torch 2 no longer writes or never writes.
def _str(x, short=False):
    b = x.encode()
    return (b"U" + bytes([len(b)]) if short else b"X" + struct.pack("<I", len(b))) + b


def _int(n):
    if 0 <= n < 256:
        return b"K" + bytes([n])
    b = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(b)]) + b


def _global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _tuple(*items):
    return b"(" + b"".join(items) + b"t"


def _tensor(storage_type, key, numel, shape, stride, short, legacy):
    pid = [_str("storage", short), _global("torch", storage_type), _str(key, short), _str("cpu", short), _int(numel)]
    if legacy:
        pid.append(b"N")   # view_metadata
    hooks = _global("collections", "OrderedDict") + (b"]\x85R" if short else b")R")   # Python 2: OrderedDict([])
    return (_global("torch._utils", "_rebuild_tensor_v2") +
            _tuple(_tuple(*pid) + b"Q", _int(0), _tuple(*map(_int, shape)), _tuple(*map(_int, stride)), b"\x89", hooks) + b"R")


def write_handmade():
    magic = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + b"."
    # Python 2's OrderedDict.__reduce__: OrderedDict([[k, v], ...]); its str keys: SHORT_BINSTRING
    pairs = [(_str("a.weight", True), _tensor("FloatStorage", "0", 3, (3,), (1,), True, True)),
             (_str("a.bias", True), _tensor("FloatStorage", "1", 2, (2,), (1,), True, True))]
    obj = b"\x80\x02" + _global("collections", "OrderedDict") + b"(](" + b"".join(b"](" + k + v + b"e" for k, v in pairs) + b"etR."
    with open(os.path.join(OUT, "py2_legacy.bin"), "wb") as f:
        f.write(magic + b"\x80\x02M\xe9\x03." + b"\x80\x02}(" + _str("little_endian", True) + b"\x88u.")
        f.write(obj + b"\x80\x02](" + _str("0", True) + _str("1", True) + b"e.")
        for n in (3, 2):
            f.write(struct.pack("<q", n) + struct.pack("<%df" % n, *[1.5 * k for k in range(n)]))
    # shape (9, m) with strides 0: 9 * m * 8 bytes = 2^64 + 56 (a size_t product would say 56)
    m = (2 ** 61 + 7) // 9
    pkl = b"\x80\x02}(" + _str("w") + _tensor("DoubleStorage", "0", 8, (9, m), (0, 0), False, False) + b"u."
    with zipfile.ZipFile(os.path.join(OUT, "wrap.bin"), "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", struct.pack("<8d", *range(8)))


def main():
    os.makedirs(OUT, exist_ok=True)
    sd = state_dict()
    ref = {k: v.detach().contiguous().clone() for k, v in sd.items()}
    save_file(ref, os.path.join(OUT, "reference.safetensors"))
    torch.save(sd, os.path.join(OUT, "zip_p2.bin"))
    torch.save(sd, os.path.join(OUT, "zip_p4.bin"), pickle_protocol=4)
    legacy = {k: v for k, v in sd.items() if k != "uint16"}   # the legacy writer predates uint16
    torch.save(legacy, os.path.join(OUT, "legacy.bin"), _use_new_zipfile_serialization=False)
    torch.save({"model": {"w": torch.ones(2)}, "epoch": 3}, os.path.join(OUT, "nested.bin"))
    torch.save({"w": torch.ones(1, 3).expand(1000, 3)}, os.path.join(OUT, "expanded.bin"))

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    torch.save({"w": torch.ones(2), "x": Evil()}, os.path.join(OUT, "evil.bin"))

    from torch.utils.serialization import config
    config.save.compute_crc32 = False
    torch.save({"w": torch.arange(6.0).reshape(2, 3)}, os.path.join(OUT, "nocrc.bin"))
    config.save.compute_crc32 = True
    torch.save({"w": torch.ones(2), "_extra_state": {"a": 1}}, os.path.join(OUT, "extra_state.bin"))
    view = torch.arange(12.0).reshape(3, 4).t()
    torch.save({"a": view, "b": view}, os.path.join(OUT, "shared_view.bin"))
    torch.save({"n": torch._neg_view(torch.ones(3)), "w": torch.ones(2)}, os.path.join(OUT, "neg_view.bin"))
    torch.save({"c": torch.ones(2, dtype=torch.cfloat), "w": torch.ones(2)}, os.path.join(OUT, "complex.bin"))
    # research code's checkpoints: the state_dict beside the optimizer's, the argparse arguments and counters
    net = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(net.parameters())
    net(torch.ones(1, 3)).sum().backward()
    opt.step()
    torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "args": argparse.Namespace(lr=0.1, name="x"),
                "epoch": 3}, os.path.join(OUT, "research.bin"))
    torch.save({"args": argparse.Namespace(lr=0.1), "epoch": 3}, os.path.join(OUT, "no_tensors.bin"))
    # a tensor at the top beside the state_dict (pytorch/examples' best_acc1), dict and list subclasses
    torch.save({"epoch": 3, "best_acc1": torch.tensor(0.5), "state_dict": {"a.w": torch.ones(2)},
                "args": Config(lr=1), "meter": collections.defaultdict(list, {"loss": [1.0]}),
                "window": collections.deque([1, 2], maxlen=5)}, os.path.join(OUT, "research2.bin"))
    # legacy: a complex tensor beside the state_dict (its record stepped over), a whole module
    torch.save({"model": {"w": torch.arange(3.0)}, "c": torch.ones(2, dtype=torch.cfloat)},
               os.path.join(OUT, "legacy_mixed.bin"), _use_new_zipfile_serialization=False)
    torch.save(torch.nn.Linear(2, 2), os.path.join(OUT, "legacy_module.bin"), _use_new_zipfile_serialization=False)
    write_handmade()

    # bert_tiny as pytorch_model.bin, whole (zip) and in two legacy shards with transformers' index
    bert = os.path.join(HERE, "golden", "bert_tiny")
    weights = load_file(os.path.join(bert, "model.safetensors"))
    one = os.path.join(OUT, "bert_tiny_bin")
    two = os.path.join(OUT, "bert_tiny_bin_sharded")
    for d in (one, two):
        os.makedirs(d, exist_ok=True)
        for f in ("config.json", "vocab.txt", "tokenizer_config.json"):
            shutil.copy(os.path.join(bert, f), d)
    torch.save(weights, os.path.join(one, "pytorch_model.bin"))
    names = sorted(weights)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for i, part in enumerate(halves):
        fname = f"pytorch_model-{i + 1:05d}-of-00002.bin"
        torch.save({k: weights[k] for k in part}, os.path.join(two, fname), _use_new_zipfile_serialization=False)
        weight_map.update({k: fname for k in part})
    total = sum(v.numel() * v.element_size() for v in weights.values())
    with open(os.path.join(two, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    # LaBSE's Dense module as older sentence-transformers saved it: 2_Dense/pytorch_model.bin
    dense = os.path.join(OUT, "labse_dense_bin")
    os.makedirs(dense, exist_ok=True)
    torch.save(load_file(os.path.join(HERE, "golden", "st_dense", "labse", "2_Dense", "model.safetensors")),
               os.path.join(dense, "pytorch_model.bin"))
    # a RETRO-pytorch state_dict as torch.save writes it (golden/retro_tiny's weights are RP 0.3.9's
    # model.state_dict() at examples/configs/tiny.json): retro-train --init-from reads it
    retro = load_file(os.path.join(HERE, "golden", "retro_tiny", "weights.safetensors"))
    torch.save(retro, os.path.join(OUT, "retro_tiny_state_dict.pt"))
    torch.save({"model": retro, "args": argparse.Namespace(max_seq_len=16, chunk_size=4), "step": 100},
               os.path.join(OUT, "retro_tiny_checkpoint.pt"))
    print("wrote", OUT, "with torch", torch.__version__)


if __name__ == "__main__":
    main()
