// Implementation of clip_bpe.h.
#include "text/clip_bpe.h"

#include <filesystem>

#include "core/error.h"
#include "text/regex_unicode.h"
#include "text/wordpiece.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

using regex_unicode::is_white_space;
constexpr auto is_space = is_white_space;   // \s of the tokenizers regex


// NFC, white-space runs -> " ", per-character lower case (U+0130 -> "i̇" as Rust's full mapping).
std::u32string normalise(const std::string& text) {
    const std::u32string s = unicode::nfc(unicode::utf8_to_u32(text));
    std::u32string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (is_space(s[i])) {
            while (i + 1 < s.size() && is_space(s[i + 1])) ++i;
            out.push_back(U' ');
        } else if (s[i] == 0x130) {
            out += U"i\u0307";
        } else {
            out.push_back(unicode::lower_simple(s[i]));
        }
    }
    return out;
}

// The pieces of CLIP's pre-tokeniser regex (its alternatives tried in order at each position).
std::vector<std::u32string> split_pieces(const std::u32string& s) {
    using regex_unicode::is_letter;
    using regex_unicode::is_number;
    std::vector<std::u32string> pieces;
    std::size_t i = 0;
    const std::size_t n = s.size();
    while (i < n) {
        const char32_t c = s[i];
        if (const std::size_t len = regex_contraction_length(s, i)) {
            pieces.emplace_back(s.substr(i, len));
            i += len;
            continue;
        }
        if (is_letter(c)) {
            std::size_t j = i;
            while (j < n && is_letter(s[j])) ++j;
            pieces.emplace_back(s.substr(i, j - i));
            i = j;
        } else if (is_number(c)) {
            pieces.emplace_back(1, c);
            ++i;
        } else if (!is_space(c)) {
            std::size_t j = i;
            while (j < n && !is_space(s[j]) && !is_letter(s[j]) && !is_number(s[j])) ++j;
            pieces.emplace_back(s.substr(i, j - i));
            i = j;
        } else {
            ++i;   // white space separates pieces and is dropped
        }
    }
    return pieces;
}

}  // namespace

ClipBpeTokenizer::ClipBpeTokenizer(const std::string& dir)
    : bpe_((fs::path(dir) / "vocab.json").string(), (fs::path(dir) / "merges.txt").string(), "CLIP's BPE tokenizer", U"</w>"),
      dir_(dir) {
    auto special = [&](const char32_t* name) {
        const int id = bpe_.token_id(name);
        if (id < 0) user_error_in(bpe_.vocab_path(), "has no " + unicode::u32_to_utf8(name) + " token", "restore the checkpoint's vocab.json");
        return id;
    };
    bos_ = special(U"<|startoftext|>");
    eos_ = special(U"<|endoftext|>");
    unk_ = eos_;   // CLIPTokenizer's unk_token is <|endoftext|>
}

std::vector<int> ClipBpeTokenizer::encode(const std::string& text, int max_length) const {
    RETRO_CHECK(max_length >= 2, "max_length ", max_length);
    std::vector<int> ids{bos_};
    for (const std::u32string& piece : split_pieces(normalise(text))) {
        bpe_.encode_piece(piece, unk_, ids);
        if (ids.size() >= static_cast<std::size_t>(max_length - 1)) break;
    }
    if (ids.size() > static_cast<std::size_t>(max_length - 1)) ids.resize(max_length - 1);
    ids.push_back(eos_);
    return ids;
}

}  // namespace retro
