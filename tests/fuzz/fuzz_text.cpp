// libFuzzer target: the UTF-8 handling (text/utf8.h, unicode::utf8_to_u32), the special-token splitter and the
// tokenizers that take a user's text as it is (WordPiece for BERT and MPNet, XLM-R's sentencepiece, RoBERTa's and
// CLIP's byte-level BPE) must turn any bytes into ids, never a crash, a hang or an exception (`make fuzz`).
// Vocabularies: the tiny test models under tests/reference/golden.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "text/clip_bpe.h"
#include "text/roberta_bpe.h"
#include "text/spiece_tokenizer.h"
#include "text/regex_unicode.h"
#include "text/special_tokens.h"
#include "text/utf8.h"
#include "text/wordpiece.h"
#include "text/xlmr_tokenizer.h"

namespace {

namespace fs = std::filesystem;

// Beside this source (CMake compiles it by its absolute path), else from the repository root (where make runs).
fs::path golden_dir() {
    const fs::path beside = fs::path(__FILE__).parent_path().parent_path() / "reference" / "golden";
    return fs::exists(beside) ? beside : fs::path("tests") / "reference" / "golden";
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_text: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const retro::WordPiece bert = retro::WordPiece::from_dir((golden_dir() / "bert_tiny").string());
    static const retro::ClipBpeTokenizer clip((golden_dir() / "clip_tiny" / "tiny").string());
    static const retro::WordPiece mpnet =
        retro::WordPiece::from_dir((golden_dir() / "mpnet_tiny").string(), -1, retro::SpecialTokens::mpnet());
    static const retro::XlmrTokenizer xlmr((golden_dir() / "xlmr_tiny" / "sentencepiece.bpe.model").string());
    static const retro::RobertaBpeTokenizer roberta((golden_dir() / "roberta_tiny").string());
    // a generic fast BPE following its tokenizer.json (ModernBERT's form: NFC, ByteLevel, [CLS] $A [SEP] as added tokens)
    static const retro::RobertaBpeTokenizer modernbert((golden_dir() / "modernbert_tiny").string(), true);
    // T5's sentencepiece model rebuilt from transformers 5's tokenizer.json, and XLM-R's
    static const retro::SpieceTokenizer t5_json((golden_dir() / "tokenizer_json" / "t5_extra" / "tokenizer.json").string());
    static const retro::XlmrTokenizer xlmr_json((golden_dir() / "tokenizer_json" / "xlmr" / "tokenizer.json").string());
    const std::string_view raw(reinterpret_cast<const char*>(data), size);

    // sanitizing: valid UTF-8 afterwards, idempotent, and the tokenizers' decoder reads it back unchanged
    std::string text(raw);
    const std::int64_t replaced = retro::utf8_sanitize(text);
    if (replaced < 0 || (replaced == 0 && text != raw)) fail("utf8_sanitize changed a valid text");
    std::string again = text;
    if (retro::utf8_sanitize(again) != 0 || again != text) fail("utf8_sanitize is not idempotent");
    if (retro::unicode::u32_to_utf8(retro::unicode::utf8_to_u32(text)) != text)
        fail("utf8_to_u32 and utf8_sanitize disagree on a valid text");

    // the tokenizers on the raw bytes (a query's text reaches them unsanitized)
    for (const int id : bert.tokenize_ids(raw))
        if (id < 0 || id >= bert.vocab_size()) fail("a WordPiece id outside the vocabulary");
    const std::vector<int> b = bert.encode(raw, 16);
    if (b.size() < 2 || b.size() > 16 || b.front() != bert.cls_id() || b.back() != bert.sep_id()) fail("a bad BERT encoding");
    const std::vector<int> c = clip.encode(std::string(raw), 77);
    if (c.size() < 2 || c.size() > 77 || c.front() != clip.bos_id() || c.back() != clip.eos_id()) fail("a bad CLIP encoding");
    for (const int id : c)
        if (id < 0 || id >= clip.vocab_size()) fail("a CLIP id outside the vocabulary");
    const auto check = [&](const std::vector<int>& ids, int first, int last, int vocab, const char* what) {
        if (ids.size() < 2 || ids.size() > 16 || ids.front() != first || ids.back() != last) fail(what);
        for (const int id : ids)
            if (id < 0 || id >= vocab) fail(what);
    };
    check(mpnet.encode(raw, 16), mpnet.cls_id(), mpnet.sep_id(), mpnet.vocab_size(), "a bad MPNet encoding");
    check(xlmr.encode(raw, 16), retro::XlmrTokenizer::kBos, retro::XlmrTokenizer::kEos, xlmr.vocab_size(), "a bad XLM-R encoding");
    check(roberta.encode(raw, 16), roberta.cls_id(), roberta.sep_id(), roberta.vocab_size(), "a bad RoBERTa encoding");
    check(modernbert.encode(raw, 16), modernbert.cls_id(), modernbert.sep_id(), modernbert.vocab_size(), "a bad ModernBERT encoding");
    check(xlmr_json.encode(raw, 16), retro::XlmrTokenizer::kBos, retro::XlmrTokenizer::kEos, xlmr_json.vocab_size(),
          "a bad XLM-R (tokenizer.json) encoding");
    const std::vector<int> t5 = t5_json.encode(raw, 16);
    if (t5.empty() || t5.size() > 16 || t5.back() != t5_json.eos_id()) fail("a bad T5 (tokenizer.json) encoding");
    for (const int id : t5)
        if (id < 0 || id >= t5_json.vocab_size()) fail("a T5 id outside the vocabulary");

    // the splitter: the pieces, in order, are the text less only the white space an lstrip token took
    static const std::vector<std::string> tokens = {"<s>", "</s>", "<mask>", "<", "[UNK]", "\xE4\xB8\xAD"};
    static const std::vector<retro::SpecialTokens::Strip> strip = {{false, false}, {false, true}, {true, false}, {false, false},
                                                                   {true, true}, {true, false}};
    std::size_t at = 0;
    int last_special = -1;
    for (const retro::SpecialSplit& part : retro::split_special_tokens(raw, tokens, strip)) {
        if (part.text.empty() || part.text.data() < raw.data() + at || part.text.data() + part.text.size() > raw.data() + raw.size())
            fail("a split piece not in order");
        const std::size_t found = static_cast<std::size_t>(part.text.data() - raw.data());
        if (part.special >= 0 && part.text != tokens[part.special]) fail("a split special that is not its token");
        if (found > at) {   // skipped bytes: only white space before an lstrip token or after an rstrip one
            if ((part.special < 0 || !strip[part.special].left) && (last_special < 0 || !strip[last_special].right))
                fail("a split skipped text");
            for (const char32_t c : retro::unicode::utf8_to_u32(raw.substr(at, found - at)))
                if (!retro::regex_unicode::is_white_space(c)) fail("a split skipped more than white space");
        }
        at = found + part.text.size();
        last_special = part.special;
    }
    if (at != raw.size()) {   // only white space after a final rstrip token
        if (last_special < 0 || !strip[last_special].right) fail("a split dropped the end of the text");
        for (const char32_t c : retro::unicode::utf8_to_u32(raw.substr(at)))
            if (!retro::regex_unicode::is_white_space(c)) fail("a split dropped more than white space");
    }
    return 0;
}
