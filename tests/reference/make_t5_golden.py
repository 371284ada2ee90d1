#!/usr/bin/env python3
"""Golden outputs for the `t5` embedder (tests/test_t5.cpp), run by hand, never by CI.

  pip install torch transformers sentence-transformers safetensors sentencepiece numpy
  python3 tests/reference/make_t5_golden.py          # writes tests/reference/golden/t5_tiny/

Writes, all small (< 350 KB together):
  spiece.model       (in each model folder) a tiny unigram sentencepiece model trained here on CORPUS,
                     with T5's special ids (pad 0, </s> 1, unk 2, no bos) and a small normalisation
                     rule set (full-width A-Z and the fi ligature, NFKC-style; tab, LF, CR -> space) instead of nmt_nfkc,
                     whose compiled table alone is 240 KB; whitespace folding as sentencepiece's default
  v1_0/              a random T5EncoderModel, feed_forward_proj "relu" (DenseReluDense wi/wo),
                     d_model 32, 3 heads of d_kv 12 (inner 36 != d_model), 8 buckets, max distance 20
  v1_1/              the same shape with "gated-gelu" (wi_0, wi_1, gelu_new), 32 buckets, distance 128
  st/                a sentence-transformers folder as GTR / Sentence-T5 ship it: the Transformer
                     (a third random T5 encoder) in the root, 1_Pooling (mean), 2_Dense (32 -> 24,
                     no bias, Identity), 3_Normalize; loaded back with SentenceTransformer() to check
  golden.json        the texts, the ids of transformers' T5Tokenizer (the tokenizers-backed one that
                     AutoTokenizer and sentence-transformers load) for max_length 64 and 16, and
                     the relative-position buckets of transformers' _relative_position_bucket for
                     -300..300 under both bucket settings
  <model>_<max_length>.npy   the embeddings: mean pool over the attention mask, L2 normalised (st: the
                     SentenceTransformer.encode output)
Only config.json, model.safetensors and spiece.model of each encoder are kept (what RetroKit reads).
Set RETRO_T5_REAL_DIR to a real checkpoint folder (e.g. a downloaded sentence-transformers/gtr-t5-base)
to also write golden/t5_real/ (its texts, ids and embeddings; never its weights).
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CORPUS = """Retrieval-enhanced transformers look up neighbours in a large text database.
The quick brown fox jumps over the lazy dog, again and again.
A chunk of sixty-four tokens is decoded back to text and encoded by the model's own tokenizer.
Dense retrieval with mean pooling over all real tokens, then a projection and L2 normalisation.
The café on the corner serves a naïve but honest crème brûlée.
Sentence embeddings from an encoder: GTR and Sentence-T5 are built on T5.
Numbers like 3.14159, 2026 and 1,000,000 appear in text too.
Relative position buckets are shared by every layer of the encoder.
Hello world! How are you today? Fine, thanks.
The weather report said rain in the morning and sun in the afternoon.""".split("\n")

TEXTS = [
    "Retrieval-enhanced transformers look up neighbours in a large text database.",
    "The café serves crème brûlée",
    "  leading and   repeated   spaces, then a tab\tand a newline\nhere  ",
    "中文字符 are unknown to this tiny vocabulary: ✓ ☃",
    "ＦＵＬＬＷＩＤＴＨ letters and the ligature ﬁ are NFKC-normalised",
    "short",
    "",
    "The quick brown fox jumps over the lazy dog. " * 6,
    "Numbers 3.14159 and 1,000,000; symbols @#$%^&*()[]{}<>~`|",
    "Dense retrieval with mean pooling over all real tokens, then a projection and L2 normalisation!",
]

MAX_LENGTHS = [64, 16]


def train_spiece(path_prefix):
    import sentencepiece as spm
    lines = []
    for r in range(30):
        for i, line in enumerate(CORPUS):
            lines.append(line if r % 2 == 0 else line.lower())
    rules = path_prefix + "_rules.tsv"
    with open(rules, "w") as f:   # source code points TAB target code points, hex
        f.write("\n".join(f"{0xFF21 + i:X}\t{0x41 + i:X}" for i in range(26)) + "\nFB01\t66 69\n9\t20\nA\t20\nD\t20")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=path_prefix, vocab_size=200, model_type="unigram",
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=0.995, hard_vocab_limit=False,
        normalization_rule_tsv=rules, seed_sentencepiece_size=10000, num_threads=1)
    return path_prefix + ".model"


def t5_config(transformers, vocab_size, gated, buckets, distance):
    return transformers.T5Config(
        vocab_size=vocab_size, d_model=32, d_kv=12, d_ff=48, num_layers=2, num_decoder_layers=0, num_heads=3,
        relative_attention_num_buckets=buckets, relative_attention_max_distance=distance,
        layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu" if gated else "relu",
        is_encoder_decoder=False, use_cache=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
        initializer_factor=1.0)


def random_encoder(torch, transformers, cfg, seed):
    torch.manual_seed(seed)
    model = transformers.T5EncoderModel(cfg).eval()
    with torch.no_grad():   # visible layer norms and a bias table with spread, so a wrong one shows
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif "relative_attention_bias" in name:
                p.copy_(2.0 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * (0.5 if "shared" in name else 0.25))
    return model


def keep_only(folder, names):
    for entry in os.listdir(folder):
        if entry not in names:
            p = os.path.join(folder, entry)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)


def tokenize(tok, texts, max_length):
    return [tok(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]


def mean_pool_normalise(torch, model, ids):
    width = max(len(x) for x in ids)
    input_ids = torch.tensor([x + [0] * (width - len(x)) for x in ids])
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).to(out.dtype)
    pooled = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype("float32")


def main():
    import numpy as np
    import sentencepiece as spm
    import torch
    import transformers
    from transformers.models.t5.modeling_t5 import T5Attention
    import sentence_transformers as st_lib

    out = os.path.join(HERE, "golden", "t5_tiny")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    tmp = tempfile.mkdtemp(prefix="t5golden")
    os.makedirs(os.path.join(tmp, "tok"))
    spiece = train_spiece(os.path.join(tmp, "tok", "spiece"))
    sp = spm.SentencePieceProcessor(model_file=spiece)
    # converted from spiece.model by transformers, as a checkpoint without tokenizer.json loads
    tok = transformers.T5Tokenizer.from_pretrained(os.path.join(tmp, "tok"), extra_ids=0)
    vocab_size = sp.get_piece_size()

    golden = {"transformers": transformers.__version__, "torch": torch.__version__,
              "sentence_transformers": st_lib.__version__, "sentencepiece": spm.__version__,
              "texts": TEXTS, "ids": {}, "cases": []}
    for max_length in MAX_LENGTHS:
        ids = tokenize(tok, TEXTS, max_length)
        raw = [(sp.encode(t)[:max_length - 1]) + [1] for t in TEXTS]
        for i, (a, b) in enumerate(zip(ids, raw)):
            if a != b:
                print(f"note: transformers' T5Tokenizer and sentencepiece + </s> differ on {TEXTS[i]!r}:\n  hf {a}\n  sp {b}")
        golden["ids"][str(max_length)] = ids

    models = {"v1_0": (False, 8, 20, 11), "v1_1": (True, 32, 128, 12)}
    for tag, (gated, buckets, distance, seed) in models.items():
        cfg = t5_config(transformers, vocab_size, gated, buckets, distance)
        model = random_encoder(torch, transformers, cfg, seed)
        d = os.path.join(out, tag)
        model.save_pretrained(d, safe_serialization=True)
        shutil.copy(spiece, os.path.join(d, "spiece.model"))
        keep_only(d, {"config.json", "model.safetensors", "spiece.model"})
        for max_length in MAX_LENGTHS:
            emb = mean_pool_normalise(torch, model, golden["ids"][str(max_length)])
            np.save(os.path.join(out, f"{tag}_{max_length}.npy"), emb)
            golden["cases"].append({"model": tag, "max_length": max_length, "embeddings": f"{tag}_{max_length}.npy"})

    # The sentence-transformers folder: Transformer (root) -> Pooling(mean) -> Dense(32 -> 24, no bias) -> Normalize.
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.modules import Transformer, Pooling, Dense, Normalize
    except ImportError:
        from sentence_transformers.models import Transformer, Pooling, Dense, Normalize
    enc_dir = os.path.join(tmp, "enc")
    cfg = t5_config(transformers, vocab_size, True, 32, 128)
    random_encoder(torch, transformers, cfg, 13).save_pretrained(enc_dir, safe_serialization=True)
    tok.save_pretrained(enc_dir)
    torch.manual_seed(14)
    dense = Dense(in_features=32, out_features=24, bias=False, activation_function=torch.nn.Identity())
    with torch.no_grad():
        dense.linear.weight.copy_(torch.randn_like(dense.linear.weight) * 0.3)
    st_golden = {}
    for max_length in MAX_LENGTHS:
        transformer = Transformer(enc_dir, max_seq_length=max_length)
        pooling = Pooling(32, pooling_mode="mean")
        st_model = SentenceTransformer(modules=[transformer, pooling, dense, Normalize()], device="cpu").eval()
        emb = st_model.encode(TEXTS, convert_to_numpy=True, batch_size=4)
        st_dir = os.path.join(tmp, f"st{max_length}")
        st_model.save(st_dir)
        again = SentenceTransformer(st_dir, device="cpu").encode(TEXTS, convert_to_numpy=True)
        print(f"st max_length {max_length}: reloaded folder vs in-memory max |diff| {np.abs(again - emb).max():.2e}")
        np.save(os.path.join(out, f"st_{max_length}.npy"), emb.astype("float32"))
        golden["cases"].append({"model": "st", "max_length": max_length, "embeddings": f"st_{max_length}.npy"})
        st_golden[max_length] = st_dir
    st_out = os.path.join(out, "st")
    shutil.copytree(st_golden[MAX_LENGTHS[0]], st_out)
    shutil.copy(spiece, os.path.join(st_out, "spiece.model"))   # GTR / Sentence-T5 ship it beside tokenizer.json
    for root, dirs, files in os.walk(st_out):
        print("  st file:", os.path.relpath(root, st_out), files)
    keep_only(st_out, {"config.json", "model.safetensors", "spiece.model", "modules.json", "sentence_bert_config.json",
                       "1_Pooling", "2_Dense", "3_Normalize"})
    keep_only(os.path.join(st_out, "2_Dense"), {"config.json", "model.safetensors"})
    with open(os.path.join(st_out, "modules.json")) as f:
        golden["st_modules"] = json.load(f)

    golden["buckets"] = []
    rel = torch.arange(-300, 301)
    for buckets, distance in ((8, 20), (32, 128)):
        b = T5Attention._relative_position_bucket(rel, bidirectional=True, num_buckets=buckets, max_distance=distance)
        golden["buckets"].append({"num_buckets": buckets, "max_distance": distance, "from": -300, "buckets": b.tolist()})

    with open(os.path.join(out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=True)
    shutil.rmtree(tmp)
    total = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(out) for x in fs)
    print(f"wrote {out}: {len(TEXTS)} texts, vocabulary {vocab_size}, {total} bytes")
    make_real()


REAL_TEXTS = [
    "Retrieval-enhanced transformers look up neighbours in a large text database.",
    "The café on the corner serves a naïve but honest crème brûlée.",
    "A chunk of sixty-four tokens, decoded back to text and re-tokenised by sentencepiece.",
    "short",
    "Dense retrieval with mean pooling over all real tokens; then L2 normalisation!",
]


def make_real():
    """golden/t5_real/ for a real checkpoint folder named by RETRO_T5_REAL_DIR (outputs only)."""
    src = os.environ.get("RETRO_T5_REAL_DIR")
    if not src:
        print("RETRO_T5_REAL_DIR not set: t5_real golden not written")
        return
    import numpy as np
    import transformers
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(src, device="cpu")
    emb = model.encode(REAL_TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    tok = transformers.AutoTokenizer.from_pretrained(src)
    out = os.path.join(HERE, "golden", "t5_real")
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "embeddings.npy"), emb.astype("float32"))
    ids = tokenize(tok, REAL_TEXTS, 128)
    with open(os.path.join(out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"source": os.path.basename(os.path.normpath(src)), "max_length": 128, "texts": REAL_TEXTS, "ids": ids}, f)
    print(f"wrote {out} from {src}")


if __name__ == "__main__":
    sys.exit(main())
