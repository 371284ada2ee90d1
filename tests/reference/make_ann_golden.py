#!/usr/bin/env python3
"""Writes the HNSW golden files that tests/test_ann_search.cpp checks RetroKit's HNSW search
against: a small IndexHNSWFlat (inner product) built by the pip faiss-cpu package, its queries,
and faiss-cpu's own search results at two efSearch values and two k.

Why a golden file instead of Debian's FAISS: libfaiss 1.7.3's HNSW::MinimaxHeap::push decrements
the count of valid candidates when it evicts an entry that was already processed, so its walk
stops early; RetroKit follows the corrected walk of current FAISS (docs/index.md).

Run by hand (pip install faiss-cpu numpy); the outputs in golden/ann_hnsw/ are committed:
    python3 tests/reference/make_ann_golden.py
"""
import json
import os

import faiss
import numpy as np

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "ann_hnsw")
os.makedirs(out, exist_ok=True)

n, m, d, clusters = 1500, 100, 16, 20
rng = np.random.default_rng(5)
centres = rng.standard_normal((clusters, d)).astype(np.float32)


def clustered(count):
    x = centres[rng.integers(0, clusters, count)] + 0.6 * rng.standard_normal((count, d)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


xb, xq = clustered(n), clustered(m)
index = faiss.IndexHNSWFlat(d, 16, faiss.METRIC_INNER_PRODUCT)
index.add(xb)
faiss.write_index(index, os.path.join(out, "index.faiss"))
np.save(os.path.join(out, "queries.npy"), xq)
faiss.omp_set_num_threads(1)
runs = []
for ef in (16, 48):
    for k in (1, 10):
        index.hnsw.efSearch = ef
        D, I = index.search(xq, k)
        np.save(os.path.join(out, f"ids_ef{ef}_k{k}.npy"), I.astype(np.int64))
        np.save(os.path.join(out, f"scores_ef{ef}_k{k}.npy"), D.astype(np.float32))
        runs.append({"ef_search": ef, "k": k})
json.dump({"faiss_version": faiss.__version__, "n": n, "queries": m, "dim": d, "M": 16, "runs": runs},
          open(os.path.join(out, "meta.json"), "w"), indent=2)
