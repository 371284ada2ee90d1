// libFuzzer target: the UTF-8 handling (text/utf8.h, unicode::utf8_to_u32) and the two tokenizers that take a
// user's text as it is (WordPiece for BERT, CLIP's byte-level BPE) must turn any bytes into ids, never a crash, a
// hang or an exception (`make fuzz`). Vocabularies: the tiny test models under tests/reference/golden.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "text/clip_bpe.h"
#include "text/utf8.h"
#include "text/wordpiece.h"

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
    return 0;
}
