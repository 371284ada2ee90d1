#!/usr/bin/env python3
"""The faiss-cpu Python package (its AVX2/AVX-512 build) on the vectors and index files
retro-bench knn wrote, as JSON rows {"method", "threads", "seconds", "queries_per_s", ...}:

  IndexFlatIP over --base at each thread count (exact search), unless --no-flat;
  with --ann SPEC.json: each index file it names, read with faiss.read_index (the same file
  RetroKit searches), searched at each parameter value (nprobe or efSearch) and thread count,
  with recall@k against --truth (exact neighbour ids, int64 [queries, k]).

Run by retro-bench knn --peer tests/peers/faiss_knn.py (needs: pip install faiss-cpu numpy); one
call is one round of the bench's --rounds.
"""
import argparse
import json
import time

import faiss
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--base", required=True)
p.add_argument("--queries", required=True)
p.add_argument("--k", type=int, default=10)
p.add_argument("--threads", default="1")
p.add_argument("--out", required=True)
p.add_argument("--ann", help="JSON list of {label, file, param, values}")
p.add_argument("--truth", help="exact neighbour ids (.npy) for recall")
p.add_argument("--no-flat", action="store_true", help="skip the IndexFlatIP rows")
a = p.parse_args()
queries = np.load(a.queries)
threads = [int(x) for x in a.threads.split(",")]
rows = []


def recall(ids, truth, k):
    hit = sum(len(set(ids[i]) & set(truth[i])) for i in range(ids.shape[0]))
    return hit / (ids.shape[0] * k)


if not a.no_flat:
    base = np.load(a.base)
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    for t in threads:
        faiss.omp_set_num_threads(t)
        t0 = time.perf_counter()
        index.search(queries, a.k)
        s = time.perf_counter() - t0
        rows.append({"method": "faiss-cpu (pip) IndexFlatIP", "threads": t, "seconds": s,
                     "queries_per_s": queries.shape[0] / s, "faiss_version": faiss.__version__})
    del index, base

if a.ann:
    truth = np.load(a.truth) if a.truth else None
    for spec in json.load(open(a.ann)):
        index = faiss.read_index(spec["file"])
        ps = faiss.ParameterSpace()
        for v in spec["values"]:
            ps.set_index_parameter(index, spec["param"], v)
            for t in threads:
                faiss.omp_set_num_threads(t)
                index.search(queries[:64], a.k)   # warm-up (first touches of the index)
                t0 = time.perf_counter()
                _, ids = index.search(queries, a.k)
                s = time.perf_counter() - t0
                row = {"method": "faiss-cpu (pip) " + spec["label"], "label": spec["label"], "param": spec["param"],
                       "value": v, "threads": t, "seconds": s, "queries_per_s": queries.shape[0] / s,
                       "faiss_version": faiss.__version__}
                if truth is not None:
                    row["recall_at_k"] = recall(ids, truth, a.k)
                rows.append(row)
        del index
json.dump({"rows": rows, "faiss_version": faiss.__version__}, open(a.out, "w"), indent=2)
