#!/usr/bin/env python3
"""Writes a randomly initialised T5 encoder of a given shape (default t5-base's, as in gtr-t5-base and
sentence-t5-base: d_model 768, 12 layers, 12 heads of 64, d_ff 3072, relu; --gated for v1.1's gated-gelu) as a
plain Hugging Face T5 folder (config.json, model.safetensors, spiece.model), for timing `retro-bench embed
--embedder t5` beside sentence-transformers (tests/peers/st_embed.py) where the real weights cannot be fetched.
Speed does not depend on the weights' values; the tokenizer is the t5_tiny golden one
(tests/reference/golden/t5_tiny/v1_0/spiece.model, 200 pieces), so both sides see the same ids (texts split into
more pieces than with T5's 32k vocabulary: compare at the --max-length the bench states).
Usage: python tests/peers/make_t5_shape.py --out /tmp/t5-base-shape [--layers 12 --d-model 768 --gated]
"""
import argparse
import os
import shutil


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--d-kv", type=int, default=64)
    ap.add_argument("--d-ff", type=int, default=3072)
    ap.add_argument("--vocab-size", type=int, default=32128)
    ap.add_argument("--gated", action="store_true", help="gated-gelu feed-forward (T5 v1.1) instead of relu")
    ap.add_argument("--spiece", default=os.path.join(os.path.dirname(__file__), "..", "reference", "golden", "t5_tiny",
                                                     "v1_0", "spiece.model"))
    a = ap.parse_args()
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=a.vocab_size, d_model=a.d_model, d_kv=a.d_kv, d_ff=a.d_ff,
                                num_layers=a.layers, num_decoder_layers=0, num_heads=a.heads,
                                feed_forward_proj="gated-gelu" if a.gated else "relu", is_encoder_decoder=False,
                                use_cache=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    model = transformers.T5EncoderModel(cfg).eval()
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)
    shutil.copy(a.spiece, os.path.join(a.out, "spiece.model"))
    print(a.out)


if __name__ == "__main__":
    main()
