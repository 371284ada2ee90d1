#!/usr/bin/env python3
"""Writes the small .npy and .safetensors fixtures that tests/test_core_formats.cpp reads back.

Run by hand (needs numpy and safetensors from PyPI); the outputs in fixtures/ are committed:
    python3 tests/reference/make_core_fixtures.py
Each array's values follow a formula the C++ test recomputes, so the test checks shape, dtype
and every value. Also writes the byte-exact files numpy makes for two arrays that the C++ writer
must reproduce (we_write_*.npy).
"""
import os
import numpy as np
from safetensors.numpy import save_file

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
os.makedirs(out, exist_ok=True)


def values(n, dtype):
    # i*7 - 3*n/2 wrapped into the dtype's range; floats get a fractional part.
    i = np.arange(n, dtype=np.float64)
    if np.dtype(dtype).kind == "f":
        return (i * 0.25 - 3.5).astype(dtype)
    if np.dtype(dtype).kind == "u":
        return (np.arange(n, dtype=np.int64) * 7 % 251).astype(dtype)
    return (np.arange(n, dtype=np.int64) * 7 - n).astype(dtype)


for name, dtype in [("u8", np.uint8), ("u16", np.uint16), ("i32", np.int32), ("i64", np.int64),
                    ("f16", np.float16), ("f32", np.float32), ("f64", np.float64)]:
    a = values(3 * 5, dtype).reshape(3, 5)
    np.save(os.path.join(out, f"{name}_3x5.npy"), a)
# version 2.0 header, a 1-d array, a 0-d array, an empty array
np.lib.format.write_array(open(os.path.join(out, "f32_v2_7.npy"), "wb"), values(7, np.float32), version=(2, 0))
np.save(os.path.join(out, "i64_scalar.npy"), np.array(42, dtype=np.int64))
np.save(os.path.join(out, "f32_0x4.npy"), np.zeros((0, 4), dtype=np.float32))
# what the C++ reader must refuse
np.save(os.path.join(out, "bad_fortran.npy"), np.asfortranarray(values(6, np.float32).reshape(2, 3)))
np.save(os.path.join(out, "bad_bigendian.npy"), values(4, np.dtype(">f4")))
np.save(os.path.join(out, "bad_complex.npy"), np.zeros(3, dtype=np.complex64))
# what the C++ writer must reproduce byte for byte
np.save(os.path.join(out, "we_write_i32_2x3.npy"), values(6, np.int32).reshape(2, 3))
np.save(os.path.join(out, "we_write_f64_5.npy"), values(5, np.float64))

save_file({
    "w.f32": values(12, np.float32).reshape(3, 4),
    "b.f64": values(4, np.float64),
    "ids.i64": values(6, np.int64).reshape(2, 3),
    "h.f16": values(5, np.float16),
    "u.u8": values(8, np.uint8),
    "empty.f32": np.zeros((0, 3), dtype=np.float32),
}, os.path.join(out, "tensors.safetensors"), metadata={"format": "np", "made_by": "make_core_fixtures.py"})
print("wrote fixtures to", out)
