#!/usr/bin/env python3
"""Peer for `retro-bench embed --embedder t5`: sentence-transformers (torch, CPU) embedding the same
texts with the same model folder, threads, batch and max_length: SentenceTransformer(model).encode,
which tokenises with the model's fast tokenizer, sorts the texts longest first, runs the encoder,
pools, applies the Dense layers and normalises, as GTR / Sentence-T5 are used. A plain T5
checkpoint without modules.json gets sentence-transformers' default: the encoder + mean pooling
(RetroKit's t5 embedder does the same). Prints one JSON line with the fields retro-bench embed
prints for RetroKit.

  pip install torch transformers sentence-transformers
  python3 tests/peers/st_embed.py --model DIR --texts texts.jsonl --threads 2 --batch 64

texts.jsonl: one JSON string per line (retro-bench embed --texts-out writes it).
"""
import argparse
import json
import os
import platform
import sys

import peer_timing   # tests/peers/peer_timing.py (the script's folder is on sys.path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a sentence-transformers folder, or a T5 checkpoint folder")
    ap.add_argument("--texts", required=True, help="one JSON string per line")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--save", help="write the embeddings here as .npy (for a cross-check)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--sort-by-length", action="store_true", help="accepted for retro-bench; encode always sorts")
    args = ap.parse_args()

    import numpy as np
    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    with open(args.texts, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    model = SentenceTransformer(args.model, device=args.device)
    model.max_seq_length = args.max_length
    model.eval()

    def embed():
        return model.encode(texts, batch_size=args.batch, convert_to_numpy=True, normalize_embeddings=True,
                            show_progress_bar=False)

    def tokenize():
        for i in range(0, len(texts), args.batch):
            model.tokenize(texts[i:i + args.batch])

    def median_seconds(fn):   # (wall, CPU of all threads), medians after a warm-up
        return peer_timing.median_seconds(fn, args.repeats)

    tok_s, _ = median_seconds(tokenize)
    emb = embed()
    secs, cpu_secs = median_seconds(embed)
    if args.save:
        np.save(args.save, emb.astype("float32"))
    lengths = [int(x.sum()) for x in model.tokenize(texts)["attention_mask"]]
    peer_timing.print_text_result(f"sentence-transformers {sentence_transformers.__version__} torch {torch.__version__} (length-sorted)",
                                  args, texts, lengths, secs, cpu_secs, tok_s)


if __name__ == "__main__":
    sys.exit(main())
