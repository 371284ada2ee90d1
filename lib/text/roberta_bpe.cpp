// Implementation of roberta_bpe.h.
#include "text/roberta_bpe.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/manifest.h"
#include "text/regex_unicode.h"
#include "text/wordpiece.h"

namespace retro {

namespace fs = std::filesystem;

// The alternatives of GPT-2's regex tried in order at each position, as the tokenizers library's ByteLevel
// pre-tokenizer runs it. White space: a run followed by a non-space character leaves its last character to the next
// piece (\s+(?!\S) backs off one), where a single space joins a letter, number or symbol run (" ?\p{L}+"); a run at
// the end of the text is one piece.
std::vector<std::u32string> gpt2_pieces(const std::u32string& s) {
    using regex_unicode::is_letter;
    using regex_unicode::is_number;
    const auto is_space = regex_unicode::is_white_space;
    const auto is_other = [&](char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); };
    std::vector<std::u32string> pieces;
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        if (const std::size_t len = regex_contraction_length(s, i)) {
            pieces.emplace_back(s.substr(i, len));
            i += len;
            continue;
        }
        const std::size_t start = s[i] == U' ' && i + 1 < n ? i + 1 : i;   // " ?" takes one literal space
        std::size_t j = start;
        if (is_letter(s[start])) {
            while (j < n && is_letter(s[j])) ++j;
        } else if (is_number(s[start])) {
            while (j < n && is_number(s[j])) ++j;
        } else if (is_other(s[start])) {
            while (j < n && is_other(s[j])) ++j;
        }
        if (j > start) {
            pieces.emplace_back(s.substr(i, j - i));
            i = j;
            continue;
        }
        // s[i] is white space: \s+(?!\S), else \s+
        std::size_t k = i;
        while (k < n && is_space(s[k])) ++k;
        if (k < n && k - i >= 2) --k;   // the last one goes with what follows
        pieces.emplace_back(s.substr(i, k - i));
        i = k;
    }
    return pieces;
}

namespace {

// vocab.json and merges.txt, or (transformers 5 saves only that) tokenizer.json's BPE model
ByteLevelBpe roberta_bpe(const std::string& dir) {
    const fs::path vocab = fs::path(dir) / "vocab.json", merges = fs::path(dir) / "merges.txt", tj = fs::path(dir) / "tokenizer.json";
    if (!fs::exists(vocab) && !fs::exists(merges) && fs::exists(tj))
        return ByteLevelBpe::from_tokenizer_json(tj.string(), "RoBERTa's BPE tokenizer", U"");
    return ByteLevelBpe(vocab.string(), merges.string(), "RoBERTa's BPE tokenizer", U"");
}

}  // namespace

RobertaBpeTokenizer::RobertaBpeTokenizer(const std::string& dir, bool follow_tokenizer_json_pipeline) : bpe_(roberta_bpe(dir)) {
    const SpecialTokens named = SpecialTokens::from_dir(dir, SpecialTokens::fairseq());
    for (const std::string& t : named.split_set()) {
        const int id = named.id_of(t, bpe_.token_id(unicode::utf8_to_u32(t)));
        if (id < 0) continue;
        if (bpe_.token_id(unicode::utf8_to_u32(t)) < 0) file_ids_.emplace_back(t, id);
        specials_.push_back(t);
        special_ids_.push_back(id);
        // the files' lstrip / rstrip; where they say none, RobertaTokenizer's AddedToken(mask_token, lstrip=True)
        const auto given = named.strip.find(t);
        special_strip_.push_back(given != named.strip.end() ? given->second : SpecialTokens::Strip{t == named.mask, false});
    }
    const fs::path tj = fs::path(dir) / "tokenizer.json";
    if (follow_tokenizer_json_pipeline) {
        RETRO_CHECK(bpe_.vocab_path() == tj.string(), "a tokenizer.json pipeline needs the BPE model of ", tj.string());
        follow_tokenizer_json(tj.string(), named);   // a generic fast tokenizer (ModernBERT's): the file is the pipeline
        return;
    }
    // a named token's id: the vocabulary's, else the files'
    const auto need = [&](const std::string& token, const char* role) {
        const int id = named.id_of(token, bpe_.token_id(unicode::utf8_to_u32(token)));
        if (id < 0)
            user_error_in(bpe_.vocab_path(), "has no " + token + " token (the tokenizer's " + role + ")",
                          "give the checkpoint's tokenizer files together (vocab.json and merges.txt, or tokenizer.json, with its tokenizer_config.json)");
        return id;
    };
    cls_ = need(named.cls, "cls_token");
    sep_ = need(named.sep, "sep_token");
    unk_ = need(named.unk, "unk_token");
    // add_prefix_space: tokenizer_config.json's, else false — transformers' RobertaTokenizer builds its ByteLevel
    // pre-tokenizer from that argument, whatever tokenizer.json's says
    const fs::path config = fs::path(dir) / "tokenizer_config.json";
    const nlohmann::json c = fs::exists(config) ? json_read_file(config.string()) : nlohmann::json();
    if (c.is_object() && c.contains("add_prefix_space") && c["add_prefix_space"].is_boolean()) add_prefix_space_ = c["add_prefix_space"].get<bool>();
}

void RobertaBpeTokenizer::follow_tokenizer_json(const std::string& path, const SpecialTokens& named) {
    const nlohmann::json j = json_read_file(path);
    const auto type_of = [](const nlohmann::json& x) {
        return x.is_object() && x.contains("type") && x["type"].is_string() ? x["type"].get<std::string>() : std::string();
    };
    const auto refuse = [&](const std::string& what) {
        user_error_in(path, what, "use a checkpoint whose byte-level BPE tokenizer is GPT-2's, RoBERTa's or ModernBERT's form");
    };
    const nlohmann::json norm = j.value("normalizer", nlohmann::json());
    if (type_of(norm) == "NFC") nfc_ = true;
    else if (!norm.is_null()) refuse("has a " + (type_of(norm).empty() ? norm.dump().substr(0, 60) : type_of(norm)) + " normalizer (none or NFC can be followed)");
    const nlohmann::json pre = j.value("pre_tokenizer", nlohmann::json());
    if (type_of(pre) != "ByteLevel" || (pre.contains("use_regex") && pre["use_regex"] == false))
        refuse("has a pre_tokenizer other than ByteLevel with GPT-2's regex: " + pre.dump().substr(0, 80));
    add_prefix_space_ = !pre.contains("add_prefix_space") || pre["add_prefix_space"] != false;   // the library's default: true
    // the wrapping: the post-processor's, as the tokenizers library applies it
    const nlohmann::json post = j.value("post_processor", nlohmann::json());
    const auto id_of = [&](const std::string& name) {
        const int id = named.id_of(name, bpe_.token_id(unicode::utf8_to_u32(name)));
        if (id < 0) refuse("wraps texts in " + name + ", which neither its vocabulary nor its added tokens hold");
        return id;
    };
    // the unknown token: the BPE model's unk_token, else the files' named one; none (-1): a symbol outside the
    // vocabulary is dropped, as the library drops it (a byte-level vocabulary holds every byte)
    const nlohmann::json* model = j.contains("model") ? &j["model"] : nullptr;
    const std::string unk_name = model && model->is_object() && model->contains("unk_token") && (*model)["unk_token"].is_string()
                                     ? (*model)["unk_token"].get<std::string>() : named.unk;
    unk_ = named.id_of(unk_name, bpe_.token_id(unicode::utf8_to_u32(unk_name)));
    const auto pair_name = [&](const char* key) {   // RobertaProcessing's ["name", id]
        return post.contains(key) && post[key].is_array() && !post[key].empty() && post[key][0].is_string()
                   ? post[key][0].get<std::string>() : std::string();
    };
    if (type_of(post) == "RobertaProcessing" && !pair_name("cls").empty() && !pair_name("sep").empty()) {
        cls_ = id_of(pair_name("cls"));
        sep_ = id_of(pair_name("sep"));
        return;
    }
    if (type_of(post) == "TemplateProcessing" && post.contains("single") && post["single"].is_array() && post["single"].size() == 3) {
        const nlohmann::json& t = post["single"];
        const auto special = [](const nlohmann::json& item) {
            return item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object() &&
                           item["SpecialToken"].contains("id") && item["SpecialToken"]["id"].is_string()
                       ? item["SpecialToken"]["id"].get<std::string>() : std::string();
        };
        if (!special(t[0]).empty() && t[1].is_object() && t[1].contains("Sequence") && !special(t[2]).empty()) {
            cls_ = id_of(special(t[0]));
            sep_ = id_of(special(t[2]));
            return;
        }
    }
    refuse("has a post_processor other than FIRST $A LAST (TemplateProcessing or RobertaProcessing): " + post.dump().substr(0, 100));
}

int RobertaBpeTokenizer::vocab_size() const {
    int n = bpe_.vocab_size();
    for (int id : special_ids_) n = std::max(n, id + 1);
    return n;
}

std::vector<int> RobertaBpeTokenizer::tokenize_ids(std::string_view text) const {
    std::vector<int> ids;
    for (const SpecialSplit& part : split_special_tokens(text, specials_, special_strip_)) {
        if (part.special >= 0) {
            ids.push_back(special_ids_[part.special]);
            continue;
        }
        std::u32string s = unicode::utf8_to_u32(part.text);
        if (nfc_) s = unicode::nfc(s);   // the tokenizer.json's normaliser (special tokens are matched before it)
        if (add_prefix_space_ && (s.empty() || s[0] != U' ')) s.insert(s.begin(), U' ');
        for (const std::u32string& piece : gpt2_pieces(s)) bpe_.encode_piece(piece, unk_, ids);
    }
    return ids;
}

std::vector<int> RobertaBpeTokenizer::encode(std::string_view text, int max_length) const {
    return wrap_truncated(cls_, tokenize_ids(text), sep_, max_length);
}

}  // namespace retro
