// Implementation of clip_bpe.h.
#include "text/clip_bpe.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <queue>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "text/wordpiece.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

// Unicode White_Space (what the tokenizers regex \s matches).
bool is_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

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
    using clip_unicode::is_letter;
    using clip_unicode::is_number;
    std::vector<std::u32string> pieces;
    std::size_t i = 0;
    const std::size_t n = s.size();
    while (i < n) {
        const char32_t c = s[i];
        if (c == U'\'' && i + 1 < n) {
            std::size_t len = 0;
            for (const char32_t* con : {U"'s", U"'t", U"'re", U"'ve", U"'m", U"'ll", U"'d"}) {
                std::u32string_view v(con);
                if (s.compare(i, v.size(), v.data(), v.size()) == 0) {
                    len = v.size();
                    break;
                }
            }
            if (len) {
                pieces.emplace_back(s.substr(i, len));
                i += len;
                continue;
            }
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

ClipBpeTokenizer::ClipBpeTokenizer(const std::string& dir) : dir_(dir) {
    // GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to 256 + n.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_char_[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
    }
    const std::string vocab_path = (fs::path(dir) / "vocab.json").string(), merges_path = (fs::path(dir) / "merges.txt").string();
    for (const auto& p : {vocab_path, merges_path}) {
        if (!fs::exists(p)) user_error_in(p, "missing (CLIP's BPE tokenizer needs vocab.json and merges.txt)", "copy the checkpoint's tokenizer files into the folder");
        refuse_lfs_pointer_file(p);
    }
    nlohmann::json v;
    try {
        std::ifstream in(vocab_path);
        v = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        user_error_in(vocab_path, std::string("is not valid JSON: ") + e.what(), "restore the checkpoint's vocab.json");
    }
    if (!v.is_object() || v.empty()) user_error_in(vocab_path, "is not an object of token -> id", "restore the checkpoint's vocab.json");
    for (const auto& [tok, id] : v.items()) {
        if (!id.is_number_integer() || id.get<int>() < 0) user_error_in(vocab_path, "maps '" + tok + "' to something other than an id");
        vocab_[unicode::utf8_to_u32(tok)] = id.get<int>();
        vocab_size_ = std::max(vocab_size_, id.get<int>() + 1);
    }
    auto special = [&](const char32_t* name) {
        auto it = vocab_.find(name);
        if (it == vocab_.end()) user_error_in(vocab_path, "has no " + unicode::u32_to_utf8(name) + " token", "restore the checkpoint's vocab.json");
        return it->second;
    };
    bos_ = special(U"<|startoftext|>");
    eos_ = special(U"<|endoftext|>");
    unk_ = eos_;   // CLIPTokenizer's unk_token is <|endoftext|>
    std::ifstream in(merges_path);
    std::string line;
    int rank = 0, line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
        const std::size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
            user_error_in(merges_path, cat("line ", line_no, " is not two symbols separated by one space"), "restore the checkpoint's merges.txt");
        ranks_.emplace(unicode::utf8_to_u32(line), rank++);
    }
}

// The merges of one word, lowest rank first and leftmost on ties, as tokenizers' Word::merge_all: the symbols as a
// linked list, the candidate pairs in a heap by (rank, left symbol's position). A candidate is stale when its left
// symbol merged away or either side changed since it was pushed (its pair no longer has that rank): skipped. The same
// merges, in the same order, as scanning every pair for the lowest rank each round (the test's oracle), at
// O(n log n) instead of O(n^2) for a word of n characters (a long run of letters in a query).
void ClipBpeTokenizer::bpe(const std::u32string& word, std::vector<int>& ids) const {
    struct Symbol {
        std::u32string text;
        int prev, next;   // -1 at the ends
        bool alive = true;
    };
    const int n = static_cast<int>(word.size());
    std::vector<Symbol> sym;
    sym.reserve(word.size());
    for (int i = 0; i < n; ++i) sym.push_back({std::u32string(1, word[i]), i - 1, i + 1 < n ? i + 1 : -1});
    if (sym.empty()) return;
    sym.back().text += U"</w>";
    const auto rank_of = [&](int left, int right) {
        const auto it = ranks_.find(sym[left].text + U" " + sym[right].text);
        return it == ranks_.end() ? -1 : it->second;
    };
    using Candidate = std::pair<int, int>;   // (rank, left position): the smallest on top
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    const auto push = [&](int left) {
        if (left < 0 || sym[left].next < 0) return;
        const int r = rank_of(left, sym[left].next);
        if (r >= 0) heap.emplace(r, left);
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
        const auto [r, left] = heap.top();
        heap.pop();
        if (!sym[left].alive || sym[left].next < 0 || rank_of(left, sym[left].next) != r) continue;   // stale
        const int right = sym[left].next;
        sym[left].text += sym[right].text;
        sym[right].alive = false;
        sym[left].next = sym[right].next;
        if (sym[right].next >= 0) sym[sym[right].next].prev = left;
        push(sym[left].prev);
        push(left);
    }
    for (int i = 0; i >= 0; i = sym[i].next) {
        const auto it = vocab_.find(sym[i].text);
        ids.push_back(it == vocab_.end() ? unk_ : it->second);
    }
}

std::vector<int> ClipBpeTokenizer::encode(const std::string& text, int max_length) const {
    RETRO_CHECK(max_length >= 2, "max_length ", max_length);
    std::vector<int> ids{bos_};
    for (const std::u32string& piece : split_pieces(normalise(text))) {
        std::u32string mapped;
        for (unsigned char b : unicode::u32_to_utf8(piece)) mapped.push_back(byte_char_[b]);
        bpe(mapped, ids);
        if (ids.size() >= static_cast<std::size_t>(max_length - 1)) break;
    }
    if (ids.size() > static_cast<std::size_t>(max_length - 1)) ids.resize(max_length - 1);
    ids.push_back(eos_);
    return ids;
}

}  // namespace retro
