// Implementation of special_tokens.h.
#include "text/special_tokens.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/manifest.h"
#include "text/regex_unicode.h"
#include "text/wordpiece.h"

namespace retro {

SpecialTokens SpecialTokens::fairseq() {
    SpecialTokens s;
    s.cls = "<s>";
    s.sep = "</s>";
    s.unk = "<unk>";
    s.pad = "<pad>";
    s.mask = "<mask>";
    s.added = {"<s>", "</s>"};   // bos_token, eos_token
    return s;
}

SpecialTokens SpecialTokens::mpnet() {
    SpecialTokens s = fairseq();
    s.unk = "[UNK]";
    return s;
}

std::vector<std::string> SpecialTokens::split_set() const {
    std::vector<std::string> all = added;
    for (const std::string* t : {&cls, &sep, &unk, &pad, &mask}) all.push_back(*t);
    all.erase(std::remove(all.begin(), all.end(), std::string()), all.end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    return all;
}

namespace {

// A special token as tokenizer files write it: "text", or an AddedToken {"content": "text", ...}; "" otherwise.
std::string special_token_text(const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return {};
}

// strip[token] = an AddedToken object's lstrip / rstrip, where it writes either; normalized: where it says true
void add_strip(SpecialTokens& s, const nlohmann::json& v) {
    if (v.is_object() && v.contains("normalized") && v["normalized"] == true) s.normalized.insert(special_token_text(v));
    if (!v.is_object() || (!v.contains("lstrip") && !v.contains("rstrip"))) return;
    SpecialTokens::Strip& st = s.strip[special_token_text(v)];
    if (v.contains("lstrip") && v["lstrip"].is_boolean()) st.left = v["lstrip"].get<bool>();
    if (v.contains("rstrip") && v["rstrip"].is_boolean()) st.right = v["rstrip"].get<bool>();
}

// added_ids[token] = id, the id as a file writes it (a number, or a decimal key of added_tokens_decoder)
void add_id(SpecialTokens& s, const std::string& token, const nlohmann::json& id, const std::string& path) {
    std::int64_t value = -1;
    const std::string digits = id.is_string() ? id.get<std::string>() : std::string();
    if (id.is_number_integer()) {
        value = id.get<std::int64_t>();
    } else if (!digits.empty() && digits.size() < 11 && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        value = std::stoll(digits);
    }
    if (value < 0 || value >= (std::int64_t(1) << 30))
        user_error_in(path, "gives the added token '" + token + "' the id " + id.dump() + ", not a token id",
                      "restore the checkpoint's tokenizer files");
    s.added_ids[token] = static_cast<int>(value);
}

// The named special tokens and added tokens of one tokenizer file (special_tokens_map.json, tokenizer_config.json).
void read_special_tokens(const nlohmann::json& j, SpecialTokens& s, const std::string& path) {
    if (!j.is_object()) return;
    const std::pair<const char*, std::string*> named[] = {
        {"cls_token", &s.cls}, {"sep_token", &s.sep}, {"unk_token", &s.unk}, {"pad_token", &s.pad}, {"mask_token", &s.mask}};
    for (const auto& [key, field] : named)
        if (j.contains(key) && !special_token_text(j[key]).empty()) {
            *field = special_token_text(j[key]);
            add_strip(s, j[key]);
        }
    for (const char* key : {"bos_token", "eos_token"})
        if (j.contains(key) && !special_token_text(j[key]).empty()) s.added.push_back(special_token_text(j[key]));
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"})   // the latter: transformers 5's name
        if (j.contains(key) && j[key].is_array())
            for (const auto& t : j[key])
                if (!special_token_text(t).empty()) s.added.push_back(special_token_text(t));
    if (j.contains("added_tokens_decoder") && j["added_tokens_decoder"].is_object())
        for (const auto& [id, t] : j["added_tokens_decoder"].items())
            if (!special_token_text(t).empty()) {
                s.added.push_back(special_token_text(t));
                add_id(s, special_token_text(t), id, path);
                add_strip(s, t);
            }
}

}  // namespace

SpecialTokens SpecialTokens::from_dir(const std::string& dir, const SpecialTokens& defaults) {
    namespace fs = std::filesystem;
    SpecialTokens s = defaults;
    for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
        const fs::path p = fs::path(dir) / name;
        if (!fs::exists(p)) continue;
        refuse_lfs_pointer_file(p.string());
        read_special_tokens(json_read_file(p.string()), s, p.string());
    }
    // the slow tokenizers' record of tokens added after training: {"token": id, ...}
    const fs::path added = fs::path(dir) / "added_tokens.json";
    if (fs::exists(added)) {
        refuse_lfs_pointer_file(added.string());
        const nlohmann::json j = json_read_file(added.string());
        if (j.is_object())
            for (const auto& [token, id] : j.items())
                if (!token.empty()) {
                    s.added.push_back(token);
                    add_id(s, token, id, added.string());
                }
    }
    // a fast tokenizer's added tokens (HF splits every one of them out of the text)
    const fs::path tj = fs::path(dir) / "tokenizer.json";
    if (fs::exists(tj)) {
        refuse_lfs_pointer_file(tj.string());
        const nlohmann::json j = json_read_file(tj.string());
        if (j.is_object() && j.contains("added_tokens") && j["added_tokens"].is_array())
            for (const auto& t : j["added_tokens"])
                if (!special_token_text(t).empty()) {
                    s.added.push_back(special_token_text(t));
                    if (t.is_object() && t.contains("id")) add_id(s, special_token_text(t), t["id"], tj.string());
                    add_strip(s, t);
                }
    }
    return s;
}

int SpecialTokens::id_of(const std::string& token, int vocab_id) const {
    if (vocab_id >= 0) return vocab_id;
    const auto it = added_ids.find(token);
    return it == added_ids.end() ? -1 : it->second;
}

std::vector<SpecialSplit> split_special_tokens(std::string_view text, const std::vector<std::string>& tokens,
                                               const std::vector<SpecialTokens::Strip>& strip) {
    std::string starts;   // the first byte of each token: a position that starts none is passed over at once
    for (const std::string& t : tokens)
        if (!t.empty() && starts.find(t[0]) == std::string::npos) starts += t[0];
    // the white space (Rust's char::is_whitespace, as tokenizers' lstrip) ending text[seg, end): its first byte
    const auto strip_back = [&](std::size_t seg_begin, std::size_t end) {
        while (end > seg_begin) {
            std::size_t c = end - 1;
            while (c > seg_begin && (static_cast<unsigned char>(text[c]) & 0xC0) == 0x80) --c;   // back to a lead byte
            const std::u32string cp = unicode::utf8_to_u32(text.substr(c, end - c));
            if (cp.size() != 1 || !regex_unicode::is_white_space(cp[0])) break;
            end = c;
        }
        return end;
    };
    // ... and beginning text[from, ...): the byte after it (rstrip)
    const auto strip_forward = [&](std::size_t from) {
        while (from < text.size()) {
            std::size_t c = from + 1;
            while (c < text.size() && (static_cast<unsigned char>(text[c]) & 0xC0) == 0x80) ++c;   // to the next lead byte
            const std::u32string cp = unicode::utf8_to_u32(text.substr(from, c - from));
            if (cp.size() != 1 || !regex_unicode::is_white_space(cp[0])) break;
            from = c;
        }
        return from;
    };
    std::vector<SpecialSplit> out;
    std::size_t seg = 0, i = 0;
    while (i < text.size()) {
        int matched = -1;
        if (starts.find(text[i]) != std::string::npos)
            for (std::size_t k = 0; k < tokens.size(); ++k)
                if (!tokens[k].empty() && text.compare(i, tokens[k].size(), tokens[k]) == 0 &&
                    (matched < 0 || tokens[k].size() > tokens[matched].size()))
                    matched = static_cast<int>(k);
        if (matched < 0) {
            ++i;
            continue;
        }
        const SpecialTokens::Strip how = static_cast<std::size_t>(matched) < strip.size() ? strip[matched] : SpecialTokens::Strip{};
        std::size_t end = i;   // the plain text before the token, less the white space an lstrip token takes
        if (how.left) end = strip_back(seg, end);
        if (end > seg) out.push_back({text.substr(seg, end - seg), -1});
        out.push_back({text.substr(i, tokens[matched].size()), matched});
        i += tokens[matched].size();
        if (how.right) i = strip_forward(i);
        seg = i;
    }
    if (seg < text.size()) out.push_back({text.substr(seg), -1});
    return out;
}

std::vector<int> wrap_truncated(int first, std::vector<int> pieces, int last, int max_length) {
    RETRO_CHECK(max_length >= 2, "max_length ", max_length, " leaves no room for the two special tokens around a text");
    if (static_cast<int>(pieces.size()) > max_length - 2) pieces.resize(max_length - 2);
    pieces.insert(pieces.begin(), first);
    pieces.push_back(last);
    return pieces;
}

}  // namespace retro
