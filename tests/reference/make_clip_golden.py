#!/usr/bin/env python3
"""Golden outputs for the `clip` embedder (tests/test_clip.cpp), run by hand, never by CI.

  pip install torch transformers pillow safetensors numpy
  python3 tests/reference/make_clip_golden.py        # writes tests/reference/golden/clip_tiny/
  (the \\p{L} / \\p{N} tables: tests/reference/make_regex_unicode.py)

Writes (all small, < 600 KB together):
  tiny/            a random CLIPModel (vision: hidden 32, 2 layers, 4 heads, image 32, patch 8;
                   text: hidden 32, 2 layers, 4 heads; projection 24; quick_gelu; random layer norms),
                   F32, with vocab.json + merges.txt (a byte-level BPE of 512 byte symbols and 120
                   merges learned here on CORPUS, then <|startoftext|>, <|endoftext|>) and a
                   preprocessor_config.json (shortest edge 32, crop 32, CLIP's mean and std)
  gelu/            the same shapes, hidden_act "gelu", text eos_token_id 2 (the pre-#24773 argmax
                   pooling), saved as F16, preprocessor shortest edge 40, crop 32
  images/          PNG (RGB, grey, RGBA, palette, interlaced) and JPEG (4:2:0, 4:4:4, grey) files of
                   odd sizes, generated here
  golden.json      texts and CLIPTokenizer ids (max_length 77 and 12); per image PIL's decode
                   check sums; text -> image rankings of the tiny model
  decoded_<i>.npy  PIL's Image.open().convert("RGB") of each JPEG (u8), to hold libjpeg to it
  crop_<cfg>_<i>.npy   the u8 pixels after resize + centre crop (CLIPImageProcessorPil's resize/crop)
  pixels_<cfg>.npy     CLIPImageProcessorPil pixel_values of every image [n, 3, 32, 32] (f32)
  resize_<i>.npy   PIL Image.resize of image 0 to other sizes and filters (u8)
  <model>_text.npy, <model>_image.npy   the L2-normalised projected embeddings (transformers)
Set RETRO_CLIP_REAL_DIR to a real CLIPModel folder (e.g. a downloaded openai/clip-vit-base-patch32 with
model.safetensors) to also write golden/clip_real/ (texts, ids and embeddings of TEXTS and of the
generated images; never weights); tests/test_clip.cpp compares against it when the variable is set.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden", "clip_tiny")

CORPUS = """a photo of a cat sitting on a red chair
a dog running in the green park with a ball
the quick brown fox jumps over the lazy dog
a diagram of retrieval enhanced transformers and their neighbours
blue sky over the mountains, with snow and clouds
it's a small world; don't worry, we'll see what they've got
numbers like 3.14159 and 2026 appear in captions too
a red square, a green circle and a blue triangle on white
striped patterns and gradients of colour in an image""".split("\n")

TEXTS = [
    "a photo of a cat",
    "A Red Square on a WHITE background!",
    "  leading,   repeated\tspaces\nand newlines  ",
    "it's what they've said: don't, won't, we'll",
    "numbers 3.14159 and 2026 and ²",
    "café naïve crème brûlée",
    "中文 and emoji ✓ ☃ 😀",
    "",
    "a diagram of retrieval enhanced transformers " * 12,
    "symbols @#$%^&*()[]{}<>~`| and İstanbul",
]

QUERIES = ["a red square", "a blue gradient", "green stripes", "a photo of a cat"]

# (name, width, height, kind)
IMAGES = [
    ("red_square.png", 45, 31, "RGB"),
    ("blue_gradient.jpg", 17, 60, "JPEG420"),
    ("green_stripes.png", 101, 37, "P"),
    ("noise.jpg", 33, 33, "JPEG444"),
    ("grey_rings.png", 50, 71, "L"),
    ("alpha_disc.png", 29, 40, "RGBA"),
    ("grey_photo.jpg", 64, 23, "JPEGL"),
    ("tiny.png", 7, 5, "RGBI"),
]

RESIZES = [((13, 7), "BICUBIC"), ((50, 61), "BICUBIC"), ((31, 31), "BILINEAR"), ((9, 40), "LANCZOS"), ((22, 17), "BOX"), ((60, 12), "HAMMING")]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def learn_bpe(n_merges):
    b2u = bytes_to_unicode()
    words = {}
    for line in CORPUS:
        for w in re.findall(r"[a-z]+|[0-9]|[^\sa-z0-9]+", line.lower()):
            syms = tuple(b2u[b] for b in w.encode())
            syms = syms[:-1] + (syms[-1] + "</w>",)
            words[syms] = words.get(syms, 0) + 1
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        new = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        words = new
    vocab = {}
    for c in bytes_to_unicode().values():
        vocab[c] = len(vocab)
    for c in bytes_to_unicode().values():
        vocab[c + "</w>"] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab, merges


def make_images(d):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    paths = []
    for name, w, h, kind in IMAGES:
        y, x = np.mgrid[0:h, 0:w].astype(np.float64)
        if name.startswith("red"):
            a = np.full((h, w, 3), 245.0)
            a[h // 5: h - h // 5, w // 4: w - w // 4] = (220, 20, 30)
        elif name.startswith("blue"):
            a = np.stack([x / w * 40, y / h * 120, 120 + y / h * 135], -1)
        elif name.startswith("green"):
            a = np.stack([20 + 0 * x, np.where((x // 6) % 2 == 0, 200, 60), 40 + 0 * x], -1)
        elif name.startswith("grey_rings"):
            r = np.hypot(x - w / 2, y - h / 2)
            a = np.repeat((128 + 120 * np.sin(r / 3))[..., None], 3, -1)
        elif name.startswith("alpha"):
            r = np.hypot(x - w / 2, y - h / 2)
            a = np.stack([200 * (r < w / 3), 100 + x * 3, 255 - y * 4], -1)
        else:
            a = rng.integers(0, 256, (h, w, 3)).astype(np.float64)
            a = (a + np.stack([x * 4, y * 3, x + y], -1)) % 256
        a = np.clip(a, 0, 255).astype(np.uint8)
        p = os.path.join(d, name)
        if kind == "RGB":
            Image.fromarray(a, "RGB").save(p)
        elif kind == "RGBI":
            Image.fromarray(a, "RGB").save(p, interlace=1)
        elif kind == "P":
            Image.fromarray(a, "RGB").convert("P", palette=Image.ADAPTIVE, colors=16).save(p)
        elif kind == "L":
            Image.fromarray(a[..., 0], "L").save(p)
        elif kind == "RGBA":
            alpha = (np.arange(w)[None, :] * 9 % 256).repeat(h, 0).astype(np.uint8)
            Image.fromarray(np.dstack([a, alpha]), "RGBA").save(p)
        elif kind == "JPEG420":
            Image.fromarray(a, "RGB").save(p, quality=85, subsampling=2)
        elif kind == "JPEG444":
            Image.fromarray(a, "RGB").save(p, quality=95, subsampling=0)
        elif kind == "JPEGL":
            Image.fromarray(a[..., 1], "L").save(p, quality=90)
        paths.append(p)
    return paths


def random_clip(vocab_size, bos, eos, act, eos_token_id, seed):
    import torch
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(seed)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=77, hidden_act=act, bos_token_id=bos,
                         eos_token_id=eos_token_id, pad_token_id=eos),
        vision_config=dict(hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8, hidden_act=act),
        projection_dim=24)
    model = CLIPModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "layrnorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
    return model


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--emit-unicode-tables":
        sys.exit("the tables moved: python3 tests/reference/make_regex_unicode.py lib/text/regex_unicode.cpp")
        return
    import numpy as np
    import torch
    from PIL import Image
    from transformers import CLIPTokenizer
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    os.makedirs(os.path.join(OUT, "images"), exist_ok=True)
    golden = {"texts": TEXTS, "queries": QUERIES}
    vocab, merges = learn_bpe(120)
    bos, eos = vocab["<|startoftext|>"], vocab["<|endoftext|>"]
    paths = make_images(os.path.join(OUT, "images"))
    golden["images"] = [os.path.basename(p) for p in paths]

    procs = {
        "tiny": CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        "gelu": CLIPImageProcessorPil(size={"shortest_edge": 40}, crop_size={"height": 32, "width": 32}),
    }
    pil_images = [Image.open(p).convert("RGB") for p in paths]
    for i, (p, im) in enumerate(zip(paths, pil_images)):
        if p.endswith(".jpg"):
            np.save(os.path.join(OUT, f"decoded_{i}.npy"), np.asarray(im, dtype=np.uint8))
    for cfg_name, proc in procs.items():
        pv = proc(images=pil_images, return_tensors="np")["pixel_values"].astype(np.float32)
        np.save(os.path.join(OUT, f"pixels_{cfg_name}.npy"), pv)
        # the u8 pixels after resize + crop, from the processor's own steps
        for i, im in enumerate(pil_images):
            w, h = im.size
            s = proc.size["shortest_edge"]
            nw, nh = (s, int(s * h / w)) if w <= h else (int(s * w / h), s)
            r = np.asarray(im.resize((nw, nh), resample=Image.BICUBIC))
            top, left = (nh - 32) // 2, (nw - 32) // 2
            np.save(os.path.join(OUT, f"crop_{cfg_name}_{i}.npy"), np.ascontiguousarray(r[top:top + 32, left:left + 32]))
    golden["resizes"] = []
    for i, (size, flt) in enumerate(RESIZES):
        r = np.asarray(pil_images[0].resize(size, resample=getattr(Image, flt)), dtype=np.uint8)
        np.save(os.path.join(OUT, f"resize_{i}.npy"), r)
        golden["resizes"].append({"width": size[0], "height": size[1], "filter": flt, "file": f"resize_{i}.npy"})

    from safetensors.torch import save_file
    golden["models"] = {}
    for name, act, eos_cfg, seed, dtype in (("tiny", "quick_gelu", eos, 1, torch.float32), ("gelu", "gelu", 2, 2, torch.float16)):
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "vocab.json"), "w") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(d, "merges.txt"), "w") as f:
            f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
        model = random_clip(len(vocab), bos, eos, act, eos_cfg, seed)
        if dtype != torch.float32:   # store in f16 and compute from the rounded weights
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(p.to(dtype).float())
        model.config.save_pretrained(d)
        save_file({k: v.to(dtype).contiguous() for k, v in model.state_dict().items() if "position_ids" not in k},
                  os.path.join(d, "model.safetensors"))
        procs[name].save_pretrained(d)
        for junk in ("tokenizer_config.json", "special_tokens_map.json"):
            if os.path.exists(os.path.join(d, junk)):
                os.remove(os.path.join(d, junk))
        tok = CLIPTokenizer.from_pretrained(d)
        if name == "tiny":
            golden["ids"] = {str(m): [tok(t, max_length=m, truncation=True)["input_ids"] for t in TEXTS] for m in (77, 12)}
        with torch.no_grad():
            enc = tok(TEXTS, padding=True, max_length=77, truncation=True, return_tensors="pt")
            t = model.text_projection(model.text_model(**enc).pooler_output)
            t = torch.nn.functional.normalize(t, dim=-1)
            pv = torch.from_numpy(np.load(os.path.join(OUT, f"pixels_{name}.npy")))
            v = model.visual_projection(model.vision_model(pixel_values=pv).pooler_output)
            v = torch.nn.functional.normalize(v, dim=-1)
        np.save(os.path.join(OUT, f"{name}_text.npy"), t.numpy().astype(np.float32))
        np.save(os.path.join(OUT, f"{name}_image.npy"), v.numpy().astype(np.float32))
        if name == "tiny":
            with torch.no_grad():
                q = tok(QUERIES, padding=True, return_tensors="pt")
                qe = torch.nn.functional.normalize(model.text_projection(model.text_model(**q).pooler_output), dim=-1)
            scores = (qe @ v.T).numpy()
            golden["rankings"] = []
            for qi, s in enumerate(scores):
                order = np.argsort(-s)
                gaps = -np.diff(s[order])
                golden["rankings"].append({"query": QUERIES[qi], "order": [int(o) for o in order],
                                           "scores": [float(s[o]) for o in order], "min_gap": float(gaps.min())})
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
    real = os.environ.get("RETRO_CLIP_REAL_DIR")
    if real:
        from transformers import CLIPModel
        out = os.path.join(HERE, "golden", "clip_real")
        os.makedirs(out, exist_ok=True)
        model = CLIPModel.from_pretrained(real).eval()
        tok = CLIPTokenizer.from_pretrained(real)
        proc = CLIPImageProcessorPil.from_pretrained(real)
        texts = [t for t in TEXTS if t]
        with torch.no_grad():
            enc = tok(texts, padding=True, max_length=77, truncation=True, return_tensors="pt")
            t = torch.nn.functional.normalize(model.text_projection(model.text_model(**enc).pooler_output), dim=-1)
            pv = torch.from_numpy(proc(images=pil_images, return_tensors="np")["pixel_values"])
            v = torch.nn.functional.normalize(model.visual_projection(model.vision_model(pixel_values=pv).pooler_output), dim=-1)
        np.save(os.path.join(out, "text.npy"), t.numpy().astype(np.float32))
        np.save(os.path.join(out, "image.npy"), v.numpy().astype(np.float32))
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump({"texts": texts, "ids": [tok(x, max_length=77, truncation=True)["input_ids"] for x in texts]}, f, ensure_ascii=False)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(OUT) for f in fs)
    print(f"wrote {OUT}: {total} bytes")


if __name__ == "__main__":
    main()
