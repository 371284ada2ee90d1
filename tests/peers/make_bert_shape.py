#!/usr/bin/env python3
"""Writes a randomly initialised BERT of a given shape (default: all-MiniLM-L6-v2's, 384 hidden, 6 layers, 12 heads,
1536 intermediate) as a Hugging Face model folder, for timing `retro-bench embed` where the real weights cannot be
fetched (a lent GPU machine has no network). Speed does not depend on the weights' values; the vocabulary is the
bert_tiny golden one (tests/reference/golden/bert_tiny/vocab.txt), so both encoders see the same WordPiece ids.
Usage: python tests/peers/make_bert_shape.py --out /tmp/bert-minilm-shape [--hidden 384 --layers 6 --heads 12]
"""
import argparse
import json
import os
import shutil


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--vocab", default=os.path.join(os.path.dirname(__file__), "..", "reference", "golden", "bert_tiny", "vocab.txt"))
    a = ap.parse_args()
    import torch
    import transformers

    torch.manual_seed(0)
    with open(a.vocab, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    cfg = transformers.BertConfig(vocab_size=vocab_size, hidden_size=a.hidden, num_hidden_layers=a.layers,
                                  num_attention_heads=a.heads, intermediate_size=a.intermediate,
                                  max_position_embeddings=512, hidden_act="gelu")
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)
    shutil.copy(a.vocab, os.path.join(a.out, "vocab.txt"))
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer", "model_max_length": 512}, f)
    print(a.out)


if __name__ == "__main__":
    main()
