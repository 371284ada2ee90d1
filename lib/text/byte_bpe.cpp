// Implementation of byte_bpe.h.
#include "text/byte_bpe.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <queue>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/manifest.h"
#include "text/wordpiece.h"

namespace retro {

ByteLevelBpe::ByteLevelBpe(std::u32string end_of_word, std::string vocab_path)
    : end_of_word_(std::move(end_of_word)), vocab_path_(std::move(vocab_path)) {
    // GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to 256 + n.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_char_[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
    }
}

void ByteLevelBpe::read_vocab(const nlohmann::json& v, const std::string& path) {
    if (!v.is_object() || v.empty()) user_error_in(path, "has no object of token -> id", "restore the checkpoint's tokenizer files");
    for (const auto& [tok, id] : v.items()) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= (1 << 30))
            user_error_in(path, "maps '" + tok + "' to something other than an id");
        vocab_[unicode::utf8_to_u32(tok)] = id.get<int>();
        vocab_size_ = std::max(vocab_size_, id.get<int>() + 1);
    }
}

void ByteLevelBpe::add_merge(const std::string& left, const std::string& right) {
    const int rank = static_cast<int>(ranks_.size());
    ranks_.emplace(unicode::utf8_to_u32(left + " " + right), rank);   // a repeated pair keeps its first (lowest) rank
}

ByteLevelBpe::ByteLevelBpe(const std::string& vocab_path, const std::string& merges_path, const std::string& owner,
                           std::u32string end_of_word)
    : ByteLevelBpe(std::move(end_of_word), vocab_path) {
    for (const auto& p : {vocab_path, merges_path}) {
        if (!std::filesystem::exists(p))
            user_error_in(p, "missing (" + owner + " needs vocab.json and merges.txt)", "copy the checkpoint's tokenizer files into the folder");
        refuse_lfs_pointer_file(p);
    }
    read_vocab(json_read_file(vocab_path), vocab_path);
    std::ifstream in(merges_path);
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
        const std::size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
            user_error_in(merges_path, cat("line ", line_no, " is not two symbols separated by one space"), "restore the checkpoint's merges.txt");
        add_merge(line.substr(0, sp), line.substr(sp + 1));
    }
}

ByteLevelBpe ByteLevelBpe::from_tokenizer_json(const std::string& path, const std::string& owner, std::u32string end_of_word) {
    if (!std::filesystem::exists(path)) user_error_in(path, "missing (" + owner + " needs it)", "copy the checkpoint's tokenizer files into the folder");
    refuse_lfs_pointer_file(path);
    const nlohmann::json j = json_read_file(path);
    const nlohmann::json* model = j.is_object() && j.contains("model") && j["model"].is_object() ? &j["model"] : nullptr;
    if (!model || model->value("type", std::string()) != "BPE")
        user_error_in(path, "is not a BPE tokenizer (model.type " + (model ? model->value("type", std::string("absent")) : "absent") + ")",
                      "give the checkpoint's tokenizer.json, or its vocab.json and merges.txt");
    ByteLevelBpe bpe(std::move(end_of_word), path);
    bpe.read_vocab(model->contains("vocab") ? (*model)["vocab"] : nlohmann::json(), path);
    if (!model->contains("merges") || !(*model)["merges"].is_array())
        user_error_in(path, "has no model.merges list", "restore the checkpoint's tokenizer.json");
    for (const auto& m : (*model)["merges"]) {
        if (m.is_string()) {   // "left right" (tokenizers before 0.20)
            const std::string line = m.get<std::string>();
            const std::size_t sp = line.find(' ');
            if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
                user_error_in(path, "has the merge " + m.dump() + ", not two symbols separated by one space", "restore the checkpoint's tokenizer.json");
            bpe.add_merge(line.substr(0, sp), line.substr(sp + 1));
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string() &&
                   m[0].get<std::string>().find(' ') == std::string::npos && m[1].get<std::string>().find(' ') == std::string::npos &&
                   !m[0].get<std::string>().empty() && !m[1].get<std::string>().empty()) {
            bpe.add_merge(m[0].get<std::string>(), m[1].get<std::string>());   // (a space inside would be ambiguous)
        } else {
            user_error_in(path, "has the merge " + m.dump().substr(0, 80) + ", not a pair of symbols", "restore the checkpoint's tokenizer.json");
        }
    }
    return bpe;
}

std::size_t regex_contraction_length(const std::u32string& s, std::size_t i) {
    if (i >= s.size() || s[i] != U'\'') return 0;
    for (const char32_t* con : {U"'s", U"'t", U"'re", U"'ve", U"'m", U"'ll", U"'d"}) {
        const std::u32string_view v(con);
        if (s.compare(i, v.size(), v.data(), v.size()) == 0) return v.size();
    }
    return 0;
}

int ByteLevelBpe::token_id(const std::u32string& token) const {
    const auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
}

void ByteLevelBpe::encode_piece(std::u32string_view piece, int unk, std::vector<int>& ids) const {
    std::u32string mapped;
    for (unsigned char b : unicode::u32_to_utf8(piece)) mapped.push_back(byte_char_[b]);
    merge(mapped, unk, ids);
}

// The merges of one word, lowest rank first and leftmost on ties, as tokenizers' Word::merge_all: the symbols as a
// linked list, the candidate pairs in a heap by (rank, left symbol's position). A candidate is stale when its left
// symbol merged away or either side changed since it was pushed (its pair no longer has that rank): skipped. The same
// merges, in the same order, as scanning every pair for the lowest rank each round (test_clip.cpp's oracle), at
// O(n log n) instead of O(n^2) for a word of n characters (a long run of letters in a query).
void ByteLevelBpe::merge(const std::u32string& word, int unk, std::vector<int>& ids) const {
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
    sym.back().text += end_of_word_;
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
        if (it != vocab_.end()) ids.push_back(it->second);
        else if (unk >= 0) ids.push_back(unk);   // none: dropped, as the tokenizers library drops it without unk_token
    }
}

}  // namespace retro
