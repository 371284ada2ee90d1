#!/usr/bin/env python3
"""Golden outputs of real sentence-embedding checkpoints for the `bert` embedder (tests/test_bert.cpp, "real
checkpoints"), run by hand on a machine that reaches the Hugging Face Hub, never by CI. For each model it writes
tests/reference/golden/real/<org>--<name>/golden.json (the Hub id, the revision, the texts, the prompt, the
tokenizer's ids) and embeddings.npy (sentence-transformers' encode, normalised) — small files; the weights stay in
the local Hugging Face cache, where the C++ test finds them by the Hub id (`--model ORG/NAME` resolution) and skips
visibly when they are not there.

  pip install torch transformers sentence-transformers sentencepiece protobuf
  python3 tests/reference/make_real_encoder_golden.py                      # the default models below
  python3 tests/reference/make_real_encoder_golden.py --model BAAI/bge-small-en-v1.5 --prompt ""
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# One per family the bert embedder reads (docs/embedders.md), small where a choice exists.
DEFAULT_MODELS = [
    ("sentence-transformers/all-MiniLM-L6-v2", None),          # BERT, mean
    ("sentence-transformers/all-mpnet-base-v2", None),         # MPNet
    ("sentence-transformers/all-distilroberta-v1", None),      # RoBERTa (byte-level BPE)
    ("intfloat/multilingual-e5-small", "query: "),             # XLM-R (sentencepiece), a prompt
    ("sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2", None),   # BERT over XLM-R's vocabulary
    ("BAAI/bge-small-en-v1.5", None),                          # BERT, CLS pooling
    ("sentence-transformers/msmarco-distilbert-base-v4", None),   # DistilBERT
    ("nomic-ai/modernbert-embed-base", "search_document: "),   # ModernBERT (rotary, GLU, sliding window; BPE tokenizer.json)
    ("sentence-transformers/LaBSE", None),                     # BERT, CLS pooling, a Dense module with Tanh
    ("sentence-transformers/distiluse-base-multilingual-cased-v2", None),   # DistilBERT, mean pooling, Dense 768 -> 512
]

TEXTS = [
    "Retrieval-enhanced transformers look up neighbours in a large text database.",
    "The café on the corner serves a naïve but honest crème brûlée.",
    "中文字符 and emoji 😀 stay in the text; Собака бежит по улице.",
    "A chunk of sixty-four tokens, decoded back to text and re-tokenised by the model's own tokenizer.",
    "short",
    "Dense retrieval with mean pooling over all real tokens; then L2 normalisation!",
    "don't   stop\n\nbelieving — I'M here  <mask> ok",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", help="a Hub id (repeatable; default: the list above)")
    ap.add_argument("--prompt", help="text before each input (default: the list's, or none for --model)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--out", default=os.path.join(HERE, "golden", "real"))
    args = ap.parse_args()
    import numpy as np
    import sentence_transformers
    import transformers
    from huggingface_hub import snapshot_download
    from sentence_transformers import SentenceTransformer

    models = [(m, args.prompt) for m in args.model] if args.model else DEFAULT_MODELS
    for hub_id, prompt in models:
        folder = snapshot_download(hub_id)   # into the local cache, where the C++ test looks
        model = SentenceTransformer(folder, device="cpu")
        model.max_seq_length = args.max_length
        emb = model.encode(TEXTS, prompt=prompt, normalize_embeddings=True, batch_size=8).astype("float32")
        ids = [model.tokenizer((prompt or "") + t, truncation=True, max_length=args.max_length)["input_ids"] for t in TEXTS]
        out = os.path.join(args.out, hub_id.replace("/", "--"))
        os.makedirs(out, exist_ok=True)
        np.save(os.path.join(out, "embeddings.npy"), emb)
        with open(os.path.join(out, "golden.json"), "w", encoding="utf-8") as f:
            json.dump({"hub_id": hub_id, "revision": os.path.basename(folder), "prompt": prompt or "",
                       "max_length": args.max_length, "texts": TEXTS, "ids": ids,
                       "sentence_transformers": sentence_transformers.__version__,
                       "transformers": transformers.__version__}, f, ensure_ascii=True, indent=None)
        print(f"wrote {out}: {hub_id} @ {os.path.basename(folder)[:12]}, dim {emb.shape[1]}")


if __name__ == "__main__":
    main()
