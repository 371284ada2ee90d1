#!/usr/bin/env python3
"""Peer for `retro-bench embed --embedder clip`: Hugging Face transformers (torch, CPU) embedding the
same image files with the same CLIPModel folder, threads and batch: per batch PIL's
Image.open(path).convert("RGB"), CLIPImageProcessorPil (the preprocessing RetroKit's clip embedder
matches, from the folder's preprocessor_config.json), CLIPModel.get_image_features (vision tower +
visual projection) and L2 normalisation, all inside the timed run, as RetroKit's decode +
preprocess + vision tower + projection + normalise. Prints one JSON line with the fields
retro-bench embed prints for RetroKit.

  pip install torch transformers pillow
  python3 tests/peers/clip_embed.py --model DIR --files files.jsonl --threads 2 --batch 64

files.jsonl: one JSON string (an image path) per line; retro-bench embed --embedder clip --peer
writes it. --images DIR instead takes the *.jpg/*.jpeg/*.png files below DIR in the order
retro-bench uses (sorted relative paths).

--texts texts.jsonl (one JSON string a line; `retro-bench embed --embedder clip-text --peer` writes it) times the
text path instead: per batch the folder's fast CLIPTokenizer (padding, truncation at --max-length),
CLIPModel.get_text_features (text tower + text projection) and L2 normalisation, as RetroKit's BPE + text
tower + projection + normalise; the JSON then has retro-bench embed's text fields (chunks, tokens_per_chunk, ...).
"""
import argparse
import json
import os
import platform
import sys

import peer_timing   # tests/peers/peer_timing.py (the script's folder is on sys.path)


def image_files(root):
    rel = []
    for d, _, names in os.walk(root, followlinks=True):
        for n in names:
            if os.path.splitext(n)[1].lower() in (".jpg", ".jpeg", ".png"):
                rel.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    return [os.path.join(root, r) for r in sorted(rel, key=lambda r: r.encode())]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a CLIPModel folder (config.json, model.safetensors, preprocessor_config.json)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--files", help="one JSON string (an image path) per line")
    src.add_argument("--images", help="a folder of JPEG / PNG files")
    src.add_argument("--texts", help="one JSON string (a text) per line: time the text tower")
    ap.add_argument("--max-length", type=int, default=77, help="--texts: tokens a text at most, specials included")
    ap.add_argument("--device", default="cpu", choices=["cpu"], help="cpu only (as RetroKit's clip embedder)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--save", help="write the embeddings here as .npy (for a cross-check)")
    args = ap.parse_args()

    import numpy as np
    import torch
    import transformers
    from PIL import Image
    from transformers import CLIPModel
    try:   # transformers 5
        from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil as Processor
    except ImportError:   # transformers 4: CLIPImageProcessor is the PIL one
        from transformers import CLIPImageProcessor as Processor

    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    if args.texts:
        return embed_texts(args)
    if args.files:
        with open(args.files, encoding="utf-8") as f:
            paths = [json.loads(line) for line in f if line.strip()]
    else:
        paths = image_files(args.images)
    if not paths:
        sys.exit("no images")
    proc = Processor.from_pretrained(args.model)
    model = CLIPModel.from_pretrained(args.model).eval()

    def features(pixel_values):
        out = model.get_image_features(pixel_values=pixel_values)
        return out if torch.is_tensor(out) else out.pooler_output   # transformers 5 returns the output object

    def preprocess(batch):
        images = [Image.open(p).convert("RGB") for p in batch]
        return proc(images=images, return_tensors="pt")["pixel_values"]

    def preprocess_all():
        for i in range(0, len(paths), args.batch):
            preprocess(paths[i:i + args.batch])

    def embed():
        out = []
        for i in range(0, len(paths), args.batch):
            out.append(torch.nn.functional.normalize(features(preprocess(paths[i:i + args.batch])), p=2, dim=1))
        return torch.cat(out)

    def median_seconds(fn):   # (wall, CPU of all threads), medians after a warm-up
        return peer_timing.median_seconds(fn, args.repeats)

    pre_s, _ = median_seconds(preprocess_all)
    secs, cpu_secs = median_seconds(embed)
    if args.save:
        np.save(args.save, embed().numpy().astype("float32"))
    sizes = []
    for p in paths:
        with Image.open(p) as im:
            sizes.append(im.size)
    print(json.dumps({
        "impl": f"transformers {transformers.__version__} torch {torch.__version__} (CLIPImageProcessorPil)",
        "model": os.path.abspath(args.model),
        "images": len(paths),
        "mean_width": sum(w for w, _ in sizes) / len(sizes),
        "mean_height": sum(h for _, h in sizes) / len(sizes),
        "image_size": model.config.vision_config.image_size,
        "batch": args.batch,
        "threads": args.threads,
        "device": "cpu",
        "seconds": secs,
        "cpu_seconds": cpu_secs,
        "preprocess_seconds": pre_s,
        "images_per_s": len(paths) / secs,
        "images_per_cpu_s": len(paths) / cpu_secs,
        "python": platform.python_version(),
    }))


def embed_texts(args):
    import numpy as np
    import torch
    import transformers
    from transformers import AutoTokenizer, CLIPModel

    with open(args.texts, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    if not texts:
        sys.exit("no texts")
    tok = AutoTokenizer.from_pretrained(args.model)   # the fast CLIPTokenizer, as deployed
    model = CLIPModel.from_pretrained(args.model).eval()

    def tokenize():
        return [tok(texts[i:i + args.batch], padding=True, truncation=True, max_length=args.max_length,
                    return_tensors="pt") for i in range(0, len(texts), args.batch)]

    def features(enc):
        out = model.get_text_features(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
        return out if torch.is_tensor(out) else out.pooler_output   # transformers 5 returns the output object

    def embed():
        return torch.cat([torch.nn.functional.normalize(features(enc), p=2, dim=1) for enc in tokenize()])

    tok_s, _ = peer_timing.median_seconds(tokenize, args.repeats)
    secs, cpu_secs = peer_timing.median_seconds(embed, args.repeats)
    if args.save:
        np.save(args.save, embed().numpy().astype("float32"))
    lengths = [len(x) for x in tok(texts, truncation=True, max_length=args.max_length)["input_ids"]]
    peer_timing.print_text_result(f"transformers {transformers.__version__} torch {torch.__version__}",
                                  args, texts, lengths, secs, cpu_secs, tok_s)


if __name__ == "__main__":
    sys.exit(main())
