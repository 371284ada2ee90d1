#!/usr/bin/env python3
"""Writes a randomly initialised CLIPModel of openai/clip-vit-base-patch32's vision shape (hidden 768, 12 layers,
12 heads, MLP 3072, patch 32 on 224 x 224 images, quick_gelu, projection 512) as a folder RetroKit's clip embedder
loads (config.json, model.safetensors in F32, preprocessor_config.json: shortest edge 224, crop 224, bicubic, CLIP's
mean and std, as the real checkpoint's), for timing `retro-bench embed --embedder clip` beside transformers
(tests/peers/clip_embed.py) where the real weights cannot be fetched. Speed does not depend on the weights' values.
The text tower has the checkpoint's shape too (hidden 512, 12 layers, 8 heads, MLP 2048, 77 positions: `retro-bench embed
--embedder clip-text` times it) over the tiny golden tokenizer (tests/reference/golden/clip_tiny/tiny/vocab.json +
merges.txt: a 634-token vocabulary, so both sides see the same ids; only the embedding table is smaller).
Usage: python tests/peers/make_clip_shape.py --out /tmp/clip-b32-shape [--layers 12 --hidden 768 --patch 32]
       [--text-layers 12 --text-hidden 512 --text-heads 8 --text-intermediate 2048]
"""
import argparse
import json
import os
import shutil


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=3072)
    ap.add_argument("--patch", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--projection", type=int, default=512)
    ap.add_argument("--text-hidden", type=int, default=512)
    ap.add_argument("--text-layers", type=int, default=12)
    ap.add_argument("--text-heads", type=int, default=8)
    ap.add_argument("--text-intermediate", type=int, default=2048)
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference",
                                                         "golden", "clip_tiny", "tiny"),
                    help="folder holding vocab.json and merges.txt")
    a = ap.parse_args()
    import torch
    from safetensors.torch import save_file
    from transformers import CLIPConfig, CLIPModel
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    with open(os.path.join(a.tokenizer, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    bos, eos = vocab["<|startoftext|>"], vocab["<|endoftext|>"]
    torch.manual_seed(0)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=a.text_hidden, intermediate_size=a.text_intermediate,
                         num_hidden_layers=a.text_layers, num_attention_heads=a.text_heads, max_position_embeddings=77,
                         hidden_act="quick_gelu",
                         bos_token_id=bos, eos_token_id=eos, pad_token_id=eos),
        vision_config=dict(hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                           num_attention_heads=a.heads, image_size=a.image_size, patch_size=a.patch,
                           hidden_act="quick_gelu"),
        projection_dim=a.projection)
    model = CLIPModel(cfg).eval()
    os.makedirs(a.out, exist_ok=True)
    model.config.save_pretrained(a.out)
    save_file({k: v.float().contiguous() for k, v in model.state_dict().items() if "position_ids" not in k},
              os.path.join(a.out, "model.safetensors"))
    CLIPImageProcessorPil(size={"shortest_edge": a.image_size},
                          crop_size={"height": a.image_size, "width": a.image_size}).save_pretrained(a.out)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(a.tokenizer, name), os.path.join(a.out, name))
    print(a.out)


if __name__ == "__main__":
    main()
