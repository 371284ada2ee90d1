#!/usr/bin/env python3
"""Golden files for T5 and XLM-RoBERTa folders that hold tokenizer.json alone (tests/test_sentencepiece_json.cpp).

Transformers 5 saves these tokenizers as tokenizer.json + tokenizer_config.json, without the sentencepiece model
(spiece.model, sentencepiece.bpe.model) that RetroKit read before. Run by hand, never by CI:

  pip install transformers tokenizers sentencepiece protobuf
  python3 tests/reference/make_tokenizer_json_golden.py   # writes tests/reference/golden/tokenizer_json/

Reads the committed tiny models' sentencepiece files (golden/t5_tiny/v1_0/spiece.model,
golden/xlmr_tiny/sentencepiece.bpe.model) and writes, each folder what transformers' save_pretrained writes:
  t5/         T5Tokenizer(spiece.model, extra_ids=0) saved: the vocabulary the tiny model's embeddings hold
  t5_extra/   the same with T5's default 100 <extra_id_*> tokens (control pieces after the vocabulary)
  t5_legacy/  t5's tokenizer.json in the form transformers 4's converter wrote (normalizer Precompiled then
              Replace(" {2,}", " "), pre_tokenizer Metaspace alone, prepend_scheme "always")
  xlmr/       XLMRobertaTokenizer(sentencepiece.bpe.model) saved: fairseq's ids in the vocabulary itself
  broken/     t5_tiny's spiece.model with its precompiled character map damaged in three ways that make
              libsentencepiece read past the map on the first text it normalises (replacement offsets past the
              strings, a root offset past the trie, a leaf past the trie): RetroKit must refuse each one
  ids.json    "special_texts" and their ids as transformers 5 gives them, the special spellings split out:
              "t5" (extra_ids 0), "t5_extra" (its tokenizer.json), "spiece_default" (a folder with spiece.model
              alone: T5Tokenizer's default 100 extra ids numbered after the pieces);
              the texts; per folder the ids of the tokenizers library on that tokenizer.json (with the
              special tokens it adds) and of sentencepiece on the original model file (wrapped as transformers'
              slow tokenizers wrap them), and the texts where the two differ (RetroKit follows sentencepiece)
"""
import json
import os
import shutil
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")

TEXTS = [
    "Retrieval-enhanced transformers look up neighbours in a large text database.",
    "The café served a naïve Ångström crème brûlée.",
    "  leading and   repeated   spaces, then a tab\tand a newline\nhere  ",
    "中文字符 are unknown to this tiny vocabulary: ✓ ☃",
    "ＦＵＬＬＷＩＤＴＨ letters and the ligature ﬁ are NFKC-normalised",
    "short",
    "",
    " ",
    "Numbers 3.14159 and 1,000,000; symbols @#$%^&*()[]{}<>~`|",
    "tabs\tand\nnewlines\r\nand\xa0nbsp\u3000ideographic\u2028linesep",
    "control\x00chars\x07here\x1b[0m and\u200bzero\u200dwidth\ufeffbom\ufffdreplacement",
    "emoji 😀 🎉 👍🏽 ❤️ family 👨\u200d👩\u200d👧",
    "İstanbul ǅemal ﬁne ℌ Ⅻ ２０２４ ＡＢＣ",
    "Le café du coin sert une crème brûlée; Das Mädchen läuft; Собака бежит; 中文字符 😀 ✓ ♞",
    "trailing space ",
    "\u0085next line and\u00a0no-break",
    "a\u0301 combining e\u0301 accents",
]

SPECIAL_TEXTS = [
    "a </s> b",
    "</s>",
    "x</s>y and <pad><unk></s>",
    "<extra_id_0> and <extra_id_99>, <extra_id_5>tail",
    "<extra_id_100> and <extra_id_01> are not special",
    "<s>struck through</s> in HTML",
    "  </s>  spaced  ",
    "</s",
    "<extra_id_7",
]


def hf_ids(tokenizer_json, texts):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_json)
    return [tok.encode(t).ids for t in texts]


def write_broken(model_file, out):
    """spiece.model copies whose character map (sentencepiece normalizer.cc: uint32 trie size, darts-clone units,
    NUL-terminated strings) sends sentencepiece's unchecked trie walk out of bounds."""
    import struct
    from sentencepiece import sentencepiece_model_pb2 as pb
    os.makedirs(out)
    base = pb.ModelProto()
    with open(model_file, "rb") as f:
        base.ParseFromString(f.read())
    blob = base.normalizer_spec.precompiled_charsmap
    (trie_bytes,) = struct.unpack_from("<I", blob, 0)
    units = list(struct.unpack_from(f"<{trie_bytes // 4}I", blob, 4))
    strings = blob[4 + trie_bytes:]

    def save(name, new_units, new_trie_bytes=None):
        m = pb.ModelProto()
        m.CopyFrom(base)
        n = trie_bytes if new_trie_bytes is None else new_trie_bytes
        m.normalizer_spec.precompiled_charsmap = struct.pack("<I", n) + struct.pack(f"<{len(new_units)}I", *new_units) + strings
        with open(os.path.join(out, name), "wb") as f:
            f.write(m.SerializeToString())

    # value units (bit 31 set: no byte matches their label) pointing past the strings
    save("value_past_end.model", [u if not u >> 31 else (1 << 31) | (len(strings) + 1000) for u in units])
    # the root's offset (bits 10..30) far past the array
    save("root_past_end.model", [(units[0] & 0x3FF) | (0x1FFFFF << 10)] + units[1:])
    # the size field saying the trie is two units long: the root's children lie past it
    save("trie_size_small.model", units, 8)


def main():
    import sentencepiece as spm
    import tokenizers
    import transformers

    out = os.path.join(GOLDEN, "tokenizer_json")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    t5_model = os.path.join(GOLDEN, "t5_tiny", "v1_0", "spiece.model")
    xlmr_model = os.path.join(GOLDEN, "xlmr_tiny", "sentencepiece.bpe.model")
    tmp = tempfile.mkdtemp(prefix="tokjson")

    def save(tokenizer, name):
        d = os.path.join(out, name)
        tokenizer.save_pretrained(d)
        kept = sorted(os.listdir(d))
        assert "tokenizer.json" in kept and not any(f.endswith(".model") for f in kept), kept
        return d

    os.makedirs(os.path.join(tmp, "t5"))
    shutil.copy(t5_model, os.path.join(tmp, "t5", "spiece.model"))
    save(transformers.T5Tokenizer.from_pretrained(os.path.join(tmp, "t5"), extra_ids=0), "t5")
    save(transformers.T5Tokenizer.from_pretrained(os.path.join(tmp, "t5")), "t5_extra")
    os.makedirs(os.path.join(tmp, "xlmr"))
    shutil.copy(xlmr_model, os.path.join(tmp, "xlmr", "sentencepiece.bpe.model"))
    save(transformers.XLMRobertaTokenizer.from_pretrained(os.path.join(tmp, "xlmr")), "xlmr")

    # transformers 4's form of the same T5 tokenizer.json
    legacy = os.path.join(out, "t5_legacy")
    os.makedirs(legacy)
    with open(os.path.join(out, "t5", "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    precompiled = j["normalizer"]
    assert precompiled["type"] == "Precompiled", precompiled
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        precompiled, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    with open(os.path.join(legacy, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=2)
    shutil.copy(os.path.join(out, "t5", "tokenizer_config.json"), legacy)

    t5_sp = spm.SentencePieceProcessor(model_file=t5_model)
    xlmr_sp = spm.SentencePieceProcessor(model_file=xlmr_model)

    def t5_wrap(t):
        return t5_sp.encode(t) + [t5_sp.eos_id()]

    def xlmr_wrap(t):   # XLMRobertaTokenizer (slow): fairseq's shift, <s> ... </s>
        return [0] + [3 if p == 0 else p + 1 for p in xlmr_sp.encode(t)] + [2]

    golden = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
              "sentencepiece": spm.__version__, "texts": TEXTS, "folders": {}}
    for name, wrap in (("t5", t5_wrap), ("t5_extra", t5_wrap), ("t5_legacy", t5_wrap), ("xlmr", xlmr_wrap)):
        hf = hf_ids(os.path.join(out, name, "tokenizer.json"), TEXTS)
        sp = [wrap(t) for t in TEXTS]
        differ = [i for i in range(len(TEXTS)) if hf[i] != sp[i]]
        for i in differ:
            print(f"{name}: the tokenizers library and sentencepiece differ on {TEXTS[i]!r}:\n  hf {hf[i]}\n  sp {sp[i]}")
        golden["folders"][name] = {"tokenizers_ids": hf, "sentencepiece_ids": sp, "differ": differ}

    spiece_default = transformers.T5Tokenizer.from_pretrained(os.path.join(tmp, "t5"))
    golden["special_texts"] = SPECIAL_TEXTS
    golden["special_ids"] = {
        "t5": hf_ids(os.path.join(out, "t5", "tokenizer.json"), SPECIAL_TEXTS),
        "t5_extra": hf_ids(os.path.join(out, "t5_extra", "tokenizer.json"), SPECIAL_TEXTS),
        "spiece_default": [spiece_default(t)["input_ids"] for t in SPECIAL_TEXTS],
    }
    for name, ids in golden["special_ids"].items():
        for t, i in zip(SPECIAL_TEXTS, ids):
            print(f"special {name}: {t!r} -> {i}")

    write_broken(t5_model, os.path.join(out, "broken"))

    with open(os.path.join(out, "ids.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=True)
    shutil.rmtree(tmp)
    total = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(out) for x in fs)
    print(f"wrote {out}: {total} bytes")


if __name__ == "__main__":
    main()
