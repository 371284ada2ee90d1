#!/usr/bin/env python3
"""Peer for `retro-bench embed`: Hugging Face transformers (torch, CPU) embedding the same texts
with the same model, threads, batch and max_length, the way sentence-transformers does it: fast
tokenizer, AutoModel (BertModel, MPNetModel, XLMRobertaModel, ...), mean pooling over the attention mask, L2 normalisation. Batches are cut in
the given order (a plain transformers loop), or with --sort-by-length longest first as
sentence-transformers' encode does, which pads less. Prints one JSON line with the fields
retro-bench embed prints for RetroKit.

  pip install torch transformers
  python3 tests/peers/hf_embed.py --model DIR --texts texts.jsonl --threads 2 --batch 64

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
    ap.add_argument("--model", required=True, help="folder with config.json, model.safetensors, vocab.txt")
    ap.add_argument("--texts", required=True, help="one JSON string per line")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--save", help="write the embeddings here as .npy (for a cross-check)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (fp32, TF32 off, as retro-bench's cuBLAS)")
    ap.add_argument("--sort-by-length", action="store_true",
                    help="batch the texts longest first, as sentence-transformers' encode does (less padding); "
                         "the embeddings are returned in the input order")
    args = ap.parse_args()

    import numpy as np
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    with open(args.texts, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    tok = transformers.AutoTokenizer.from_pretrained(args.model)   # the fast tokenizer, as deployed
    try:   # BERT, MPNet, RoBERTa, XLM-R: no pooler; DistilBERT has none to leave out
        model = transformers.AutoModel.from_pretrained(args.model, add_pooling_layer=False)
    except TypeError:
        model = transformers.AutoModel.from_pretrained(args.model)
    model = model.eval().to(args.device)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    # sentence-transformers sorts by -len(text) (characters) before batching and restores the order
    # afterwards; the sort is part of the timed work there, so it is here.
    def batch_order():
        if not args.sort_by_length:
            return list(range(len(texts)))
        return sorted(range(len(texts)), key=lambda i: -len(texts[i]))

    def tokenize(order=None):
        order = batch_order() if order is None else order
        ordered = [texts[i] for i in order]
        return [tok(ordered[i:i + args.batch], padding=True, truncation=True, max_length=args.max_length,
                    return_tensors="pt") for i in range(0, len(ordered), args.batch)]

    def embed():
        out = []
        order = batch_order()
        for enc in tokenize(order):
            enc = {k: v.to(args.device) for k, v in enc.items()}
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, p=2, dim=1))
        result = torch.cat(out).cpu()
        sync()
        if args.sort_by_length:
            restored = torch.empty_like(result)
            restored[torch.tensor(order)] = result
            result = restored
        return result

    def median_seconds(fn):   # (wall, CPU of all threads), medians after a warm-up
        return peer_timing.median_seconds(fn, args.repeats)

    tok_s, _ = median_seconds(tokenize)
    emb = embed()
    secs, cpu_secs = median_seconds(embed)
    if args.save:
        np.save(args.save, emb.numpy().astype("float32"))
    lengths = [len(x) for x in tok(texts, truncation=True, max_length=args.max_length)["input_ids"]]
    peer_timing.print_text_result(f"transformers {transformers.__version__} torch {torch.__version__}"
                + (" (length-sorted)" if args.sort_by_length else ""),
                                  args, texts, lengths, secs, cpu_secs, tok_s)


if __name__ == "__main__":
    sys.exit(main())
