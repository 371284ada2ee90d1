#!/usr/bin/env python3
"""Golden files for ModernBERT checkpoints in the `bert` embedder (tests/test_bert_modernbert.cpp), run by hand.

  pip install torch transformers tokenizers sentence-transformers safetensors numpy
  python3 tests/reference/make_modernbert_golden.py      # writes tests/reference/golden/modernbert_tiny/

No real ModernBERT checkpoint can be fetched where this was written (no Hugging Face Hub), so the tokenizer is built
in the form ModernBERT's is published in, as far as it is known here: a byte-level BPE in tokenizer.json alone
(PreTrainedTokenizerFast), NFC normaliser, ByteLevel pre-tokenizer without a prefix space, "[CLS] $A [SEP]", the
specials [UNK] [CLS] [SEP] [PAD] [MASK] as added tokens. tests/reference/make_real_encoder_golden.py checks a real
checkpoint where the Hub is reachable.

Writes (all small):
  tokenizer.json, tokenizer_config.json   the tokenizer (trained here on the sentences and a little more text)
  model.safetensors, config.json          a random ModernBertModel: hidden 16, 4 layers (global at 0 and 3), 2 heads of
                                          8, intermediate 24 (GLU: Wi 48 x 16), local_attention 16 (|i - j| <= 8 on
                                          the local layers), global / local rope theta 160000 / 10000; LayerNorm
                                          weights perturbed so that none is 1
  bias/                                   the same shape with norm_bias, attention_bias, mlp_bias, gelu_pytorch_tanh
                                          and other rope thetas, its config.json in transformers 4's form
                                          (global_attn_every_n_layers, global_rope_theta, local_rope_theta)
  golden.json                             the sentences, transformers' ids, and per model the max |difference|
                                          between sentence-transformers' mean pooling and this script's
  embeddings.npy, bias/embeddings.npy     mean over the attention mask of last_hidden_state, L2 normalised
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

SENTENCES = [
    "Retrieval-enhanced transformers look up neighbours in a large text database.",
    "The café served a naïve Ångström crème brûlée.",
    "Cafe\u0301 and re\u0301sume\u0301 written with combining accents (NFC joins them)",
    "short",
    "",
    "  leading and   repeated   spaces, then a tab\tand a newline\nhere  ",
    "中文字符 mixed with English 中文 and emoji 😀",
    "a [MASK] inside, [CLS] and [SEP] too, and [mask] in lower case",
    "Numbers 12,345.67 and e-mail foo@bar.com http://x.y/z?q=1&r=2#frag",
    "Long enough for the sliding window: " + "one two three four five six seven eight nine ten " * 6,
]

TRAINING = SENTENCES * 3 + [
    "The quick brown fox jumps over the lazy dog, again and again.",
    "Dense retrieval with mean pooling over all real tokens, then a projection and L2 normalisation.",
    "A chunk of sixty-four tokens is decoded back to text and encoded by the model's own tokenizer.",
] * 3


def build_tokenizer(out):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, min_frequency=1, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TRAINING, trainer)
    tok.add_special_tokens(specials)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                   pad_token="[PAD]", mask_token="[MASK]", model_max_length=8192)
    fast.save_pretrained(out)
    for f in os.listdir(out):
        if f not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(out, f))
    return fast


def mean_pool(torch, model, ids, pad):
    width = max(len(x) for x in ids)
    input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids])
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).float()
    pooled = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype("float32")


def perturb(torch, model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
            else:
                p.mul_(6.0)   # initializer_range 0.02: scaled up so that every part moves the output


def main():
    import numpy as np
    import sentence_transformers
    import tokenizers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.modules import Transformer, Pooling
    except ImportError:
        from sentence_transformers.models import Transformer, Pooling

    out = os.path.join(HERE, "golden", "modernbert_tiny")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    tok = build_tokenizer(out)
    ids = [tok(t, truncation=True, max_length=256)["input_ids"] for t in SENTENCES]
    longest = max(len(x) for x in ids)
    assert longest > 17, f"the longest sentence ({longest} ids) must reach past the local window"
    pad = tok.pad_token_id
    golden = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__, "torch": torch.__version__,
              "sentence_transformers": sentence_transformers.__version__, "sentences": SENTENCES, "max_length": 256,
              "ids": ids, "models": {}}
    variants = {
        "": dict(seed=31, extra={}),
        "bias": dict(seed=32, extra=dict(norm_bias=True, attention_bias=True, mlp_bias=True,
                                         hidden_activation="gelu_pytorch_tanh", global_rope_theta=50000.0,
                                         local_rope_theta=500.0, global_attn_every_n_layers=2)),
    }
    for name, v in variants.items():
        d = os.path.join(out, name) if name else out
        os.makedirs(d, exist_ok=True)
        torch.manual_seed(v["seed"])
        cfg = transformers.ModernBertConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=24, num_hidden_layers=4,
                                            num_attention_heads=2, max_position_embeddings=512, local_attention=16,
                                            pad_token_id=pad, cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
                                            bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id, **v["extra"])
        cfg._attn_implementation = "eager"
        model = transformers.ModernBertModel(cfg).eval()
        perturb(torch, model, v["seed"] + 100)
        model.save_pretrained(d, safe_serialization=True)
        emb = mean_pool(torch, model, ids, pad)
        if name == "bias":   # transformers 4's config form of the same model: it must load to the same outputs
            with open(os.path.join(d, "config.json")) as f:
                c = json.load(f)
            for k in ("layer_types", "rope_parameters"):
                c.pop(k, None)
            c.update(global_rope_theta=50000.0, local_rope_theta=500.0, global_attn_every_n_layers=2)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(c, f, indent=1)
            again = transformers.ModernBertModel.from_pretrained(d, attn_implementation="eager").eval()
            again_emb = mean_pool(torch, again, ids, pad)
            print(f"bias: transformers 4 config form vs the model: max |difference| {np.abs(again_emb - emb).max():.2e}")
            assert np.abs(again_emb - emb).max() < 1e-6
            shutil.copy(os.path.join(out, "tokenizer.json"), d)
            shutil.copy(os.path.join(out, "tokenizer_config.json"), d)
        for f in os.listdir(d):
            if f not in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "bias", "embeddings.npy",
                         "golden.json"):
                p = os.path.join(d, f)
                (shutil.rmtree if os.path.isdir(p) else os.remove)(p)
        np.save(os.path.join(d, "embeddings.npy"), emb)
        # sentence-transformers over the same folder (its default: mean pooling)
        st = SentenceTransformer(modules=[Transformer(d, max_seq_length=256), Pooling(16, pooling_mode="mean")], device="cpu")
        st_emb = st.encode(SENTENCES, normalize_embeddings=True, batch_size=3)
        diff = float(np.abs(st_emb - emb).max())
        print(f"modernbert_tiny{('/' + name) if name else ''}: sentence-transformers vs this script max |difference| {diff:.2e}")
        golden["models"][name or "."] = {"st_max_abs_difference": diff,
                                         "layer_types": getattr(model.config, "layer_types", None)}
    with open(os.path.join(out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=True)
    total = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(out) for x in fs)
    print(f"wrote {out}: vocabulary {len(tok)}, longest sentence {longest} ids, {total} bytes")


if __name__ == "__main__":
    sys.exit(main())
