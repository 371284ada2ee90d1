#!/usr/bin/env python3
"""Writes a RetroKit chunk database and neighbours folder as RETRO-pytorch's data files, for training or evaluating
with RP's own RETRODataset on RetroKit's tokens (docs/retro-pytorch.md). Needs numpy only; not part of the build.

    python scripts/retrokit_to_rp_memmaps.py DB KNN OUT_PREFIX [--k K]

writes OUT_PREFIX.chunks.dat, .chunks.knn.dat, .seq.dat and .doc_ids.dat: raw int32 memmaps as RP's
text_folder_to_chunks_ and chunks_to_precalculated_knn_ write them, and prints the RETRODataset(...) call that reads
them. RP's chunk rows hold cs + 1 ids (the row, then the first id of the next row of the same document, else pad 0);
its files have seq_len / cs spare rows at the end (zeros, neighbours -1), as RETRODataset's shapes expect. The ids
are RetroKit's sentencepiece ids: pad 0, eos 3 (RP's own pipeline uses bert-base-cased's 0 and 102). The neighbours
are copied as they are: RetroKit's training and eval also read a neighbour inside a held-out document as none, which
RP's RETRODataset does not (docs/retro-pytorch.md). Bad input: one line naming the file, exit 2; each file is
written beside its place and renamed in when whole.
"""
import argparse
import json
import os
import sys

import numpy as np


def refuse(where, problem):
    print(f"retrokit_to_rp_memmaps: {where}: {problem}", file=sys.stderr)
    sys.exit(2)


def write_whole(path, array):
    """array as raw bytes at path, through a temporary renamed in: no partial file left looking complete."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        array.tofile(tmp)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        refuse(path, e.strerror or str(e))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db", help="retro-chunk's folder (chunks.npy, doc_ids.npy, seq_starts.npy, manifest.json)")
    ap.add_argument("knn", help="retro-knn's folder (neighbours.npy)")
    ap.add_argument("out_prefix", help="where the .dat files go (OUT_PREFIX.chunks.dat, ...)")
    ap.add_argument("--k", type=int, default=None, help="neighbours per chunk to keep (default: all in neighbours.npy)")
    a = ap.parse_args()
    def load(folder, name, **kw):
        path = os.path.join(folder, name)
        try:
            return np.load(path, **kw)
        except (OSError, ValueError) as e:
            refuse(path, str(e))

    manifest = os.path.join(a.db, "manifest.json")
    try:
        with open(manifest) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        refuse(manifest, str(e))
    params = m.get("parameters") if isinstance(m, dict) else None
    if not isinstance(params, dict) or m.get("tool") != "retro-chunk":
        refuse(manifest, "is not a retro-chunk database's manifest")
    chunks = load(a.db, "chunks.npy", mmap_mode="r")
    doc_ids = load(a.db, "doc_ids.npy")
    seq_starts = load(a.db, "seq_starts.npy")
    neighbours = load(a.knn, "neighbours.npy", mmap_mode="r")
    if chunks.ndim != 2 or doc_ids.shape != (chunks.shape[0],):
        refuse(a.db, "chunks.npy is not (chunks, chunk_size), or doc_ids.npy is not one id a chunk")
    n, cs = chunks.shape
    seq_len = params.get("seq_len", 0)
    if not isinstance(seq_len, int) or seq_len <= 0 or seq_len % cs:
        refuse(manifest, f"has no seq_len that is a multiple of the chunk size {cs}")
    if neighbours.ndim != 2 or neighbours.shape[0] != n:
        refuse(os.path.join(a.knn, "neighbours.npy"), f"has shape {neighbours.shape}, the database has {n} chunks")
    k = neighbours.shape[1] if a.k is None else a.k
    if not 0 < k <= neighbours.shape[1]:
        refuse("--k", f"is {k}; neighbours.npy holds {neighbours.shape[1]} a chunk")
    spare = seq_len // cs

    same_doc_next = np.zeros(n, bool)
    same_doc_next[:-1] = doc_ids[1:] == doc_ids[:-1]
    rp_chunks = np.zeros((n + spare, cs + 1), np.int32)
    rp_chunks[:n, :cs] = chunks
    rp_chunks[:n - 1, cs] = np.where(same_doc_next[:-1], chunks[1:, 0], 0)
    rp_knn = np.full((n + spare, k), -1, np.int32)
    rp_knn[:n] = neighbours[:, :k]

    paths = {name: f"{a.out_prefix}.{name}.dat" for name in ("chunks", "chunks.knn", "seq", "doc_ids")}
    write_whole(paths["chunks"], rp_chunks)
    write_whole(paths["chunks.knn"], rp_knn)
    write_whole(paths["seq"], seq_starts.astype(np.int32))
    write_whole(paths["doc_ids"], doc_ids.astype(np.int32))
    print(f"wrote {', '.join(paths.values())}: {n} chunks of {cs}, {len(seq_starts)} sequences of {seq_len}, k {k}")
    print(f"RETRODataset(num_chunks={n}, chunk_size={cs}, seq_len={seq_len}, num_sequences={len(seq_starts)}, "
          f"num_neighbors={k}, chunk_memmap_path='{paths['chunks']}', chunk_nn_memmap_path='{paths['chunks.knn']}', "
          f"seq_memmap_path='{paths['seq']}', eos_id=3, pad_id=0)")


if __name__ == "__main__":
    main()
