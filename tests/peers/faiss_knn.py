#!/usr/bin/env python3
"""The faiss-cpu Python package on the vectors retro-bench knn wrote: IndexFlatIP queries/s at
each thread count, as JSON ({"rows": [{"method", "threads", "seconds", "queries_per_s"}]}).

Run by retro-bench knn --peer tests/peers/faiss_knn.py (needs: pip install faiss-cpu numpy).
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
a = p.parse_args()
base = np.load(a.base)
queries = np.load(a.queries)
index = faiss.IndexFlatIP(base.shape[1])
index.add(base)
rows = []
for t in [int(x) for x in a.threads.split(",")]:
    faiss.omp_set_num_threads(t)
    t0 = time.perf_counter()
    index.search(queries, a.k)
    s = time.perf_counter() - t0
    rows.append({"method": "faiss-cpu (pip) IndexFlatIP", "threads": t, "seconds": s,
                 "queries_per_s": queries.shape[0] / s, "faiss_version": faiss.__version__})
json.dump({"rows": rows}, open(a.out, "w"), indent=2)
