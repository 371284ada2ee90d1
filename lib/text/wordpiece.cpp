// Implementation of wordpiece.h, following transformers' tokenization_bert.py (BertTokenizer,
// BasicTokenizer, WordpieceTokenizer) and PreTrainedTokenizer.tokenize step by step.
#include "text/wordpiece.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/manifest.h"

namespace retro {

namespace unicode {

std::u32string utf8_to_u32(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    std::size_t i = 0;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    while (i < s.size()) {
        unsigned c = p[i];
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) {
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        char32_t cp = n == 1 ? c : c & (0x7F >> n);
        bool ok = true;
        for (int k = 1; k < n; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) ok = false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        static const char32_t min_for[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (!ok || cp < min_for[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        out.push_back(cp);
        i += n;
    }
    return out;
}

std::string u32_to_utf8(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) {
        if (c < 0x80) {
            out += static_cast<char>(c);
        } else if (c < 0x800) {
            out += static_cast<char>(0xC0 | (c >> 6));
            out += static_cast<char>(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            out += static_cast<char>(0xE0 | (c >> 12));
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (c & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (c >> 18));
            out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (c & 0x3F));
        }
    }
    return out;
}

namespace {
// Hangul syllables decompose and compose algorithmically (Unicode 3.12).
constexpr char32_t HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7;
constexpr int HANGUL_VCOUNT = 21, HANGUL_TCOUNT = 28, HANGUL_NCOUNT = 588, HANGUL_SCOUNT = 11172;

void decompose_full(char32_t c, std::u32string& out) {
    if (c >= HANGUL_S && c < HANGUL_S + HANGUL_SCOUNT) {
        int s = static_cast<int>(c - HANGUL_S);
        out += HANGUL_L + s / HANGUL_NCOUNT;
        out += HANGUL_V + (s % HANGUL_NCOUNT) / HANGUL_TCOUNT;
        if (s % HANGUL_TCOUNT) out += HANGUL_T + s % HANGUL_TCOUNT;
        return;
    }
    char32_t parts[2];
    int n = decompose_one(c, parts);
    if (n == 0) {
        out += c;
        return;
    }
    for (int k = 0; k < n; ++k) decompose_full(parts[k], out);
}

char32_t compose_any(char32_t a, char32_t b) {
    if (a >= HANGUL_L && a < HANGUL_L + 19 && b >= HANGUL_V && b < HANGUL_V + HANGUL_VCOUNT)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VCOUNT + (b - HANGUL_V)) * HANGUL_TCOUNT;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SCOUNT && (a - HANGUL_S) % HANGUL_TCOUNT == 0 && b > HANGUL_T &&
        b < HANGUL_T + HANGUL_TCOUNT)
        return a + (b - HANGUL_T);
    return compose_pair(a, b);
}
}  // namespace

std::u32string nfd(std::u32string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (char32_t c : s) decompose_full(c, out);
    // Canonical ordering: stable sort of each run of non-starters by combining class.
    std::size_t i = 0;
    while (i < out.size()) {
        if (combining_class(out[i]) == 0) {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j < out.size() && combining_class(out[j]) != 0) ++j;
        std::stable_sort(out.begin() + i, out.begin() + j,
                         [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
        i = j;
    }
    return out;
}

std::u32string nfc(std::u32string_view s) {
    bool ascii = std::all_of(s.begin(), s.end(), [](char32_t c) { return c < 0x80; });
    if (ascii) return std::u32string(s);
    std::u32string d = nfd(s);
    if (d.empty()) return d;
    // Canonical composition (Unicode 3.11 / UAX #15 sample code).
    std::size_t starter = 0, out = 1;
    int last_class = combining_class(d[0]);
    if (last_class != 0) last_class = 256;   // no starter yet: nothing composes with d[0]
    for (std::size_t i = 1; i < d.size(); ++i) {
        char32_t c = d[i];
        int cls = combining_class(c);
        char32_t comp = last_class == 256 ? 0 : compose_any(d[starter], c);
        if (comp != 0 && (last_class < cls || last_class == 0)) {
            d[starter] = comp;
            continue;
        }
        if (cls == 0) starter = out;
        last_class = cls;
        d[out++] = c;
    }
    d.resize(out);
    return d;
}

std::u32string lower(std::u32string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        char32_t c = s[i];
        if (c == 0x130) {   // LATIN CAPITAL LETTER I WITH DOT ABOVE: SpecialCasing gives i + U+0307
            out += U'i';
            out += char32_t(0x307);
        } else if (c == 0x3A3) {   // CPython handle_capital_sigma
            std::size_t j = i;
            while (j > 0 && is_case_ignorable(s[j - 1])) --j;
            bool final_sigma = j > 0 && is_cased(s[j - 1]);
            if (final_sigma) {
                std::size_t k = i + 1;
                while (k < s.size() && is_case_ignorable(s[k])) ++k;
                final_sigma = k == s.size() || !is_cased(s[k]);
            }
            out += final_sigma ? char32_t(0x3C2) : char32_t(0x3C3);
        } else {
            out += lower_simple(c);
        }
    }
    return out;
}

bool is_chinese_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace unicode

namespace {

using unicode::CharClass;

bool is_split_space(char32_t c) {   // Python str.split() whitespace that survives _clean_text
    CharClass k = unicode::char_class(c);
    return k == CharClass::SPACE || k == CharClass::LINESEP;
}

std::u32string strip_accents(const std::u32string& s) {
    std::u32string out;
    for (char32_t c : unicode::nfd(s))
        if (unicode::char_class(c) != CharClass::MARK) out += c;
    return out;
}

void split_whitespace(const std::u32string& s, std::vector<std::u32string>& out) {
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && is_split_space(s[i])) ++i;
        std::size_t j = i;
        while (j < s.size() && !is_split_space(s[j])) ++j;
        if (j > i) out.emplace_back(s.substr(i, j - i));
        i = j;
    }
}

}  // namespace

WordPiece::WordPiece(const std::string& vocab_path, const WordPieceOptions& opts, const SpecialTokens& specials)
    : opts_(opts), specials_def_(specials) {
    std::ifstream in(vocab_path, std::ios::binary);
    if (!in) user_error_in(vocab_path, "cannot read the WordPiece vocabulary", "give a model folder with vocab.txt");
    refuse_lfs_pointer_file(vocab_path);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        tokens_.push_back(line);
    }
    index_tokens(vocab_path);
}

WordPiece::WordPiece(std::vector<std::string> tokens, const WordPieceOptions& opts, const SpecialTokens& specials,
                     const std::string& where)
    : opts_(opts), tokens_(std::move(tokens)), specials_def_(specials) {
    index_tokens(where);
}

void WordPiece::index_tokens(const std::string& where) {
    // HF load_vocab: token = line.rstrip("\n"); a repeated token keeps its last id.
    for (std::size_t i = 0; i < tokens_.size(); ++i) ids_[tokens_[i]] = static_cast<int>(i);
    if (tokens_.empty()) user_error_in(where, "the vocabulary is empty", "give the vocab.txt of the checkpoint");
    // added tokens the vocabulary lacks take the ids the tokenizer files give them (the model's embeddings resized)
    for (const auto& [token, id] : specials_def_.added_ids) {
        if (token_id(token) >= 0) continue;
        if (static_cast<std::size_t>(id) >= tokens_.size()) tokens_.resize(static_cast<std::size_t>(id) + 1);
        if (!tokens_[id].empty() && tokens_[id] != token)
            user_error_in(where, cat("holds '", tokens_[id], "' at id ", id, ", where the tokenizer files put the added token '", token, "'"),
                          "keep the vocabulary and the tokenizer files of the same checkpoint");
        tokens_[id] = token;
    }
    auto need = [&](const std::string& tok, const char* role) {
        const int id = specials_def_.id_of(tok, token_id(tok));
        if (id < 0)
            user_error_in(where, "has no " + tok + " token (the tokenizer's " + role + ")",
                          "give the vocabulary of the checkpoint, beside its tokenizer_config.json");
        return id;
    };
    unk_ = need(specials_def_.unk, "unk_token");
    cls_ = need(specials_def_.cls, "cls_token");
    sep_ = need(specials_def_.sep, "sep_token");
    pad_ = std::max(specials_def_.id_of(specials_def_.pad, token_id(specials_def_.pad)), 0);
    for (const std::string& s : specials_def_.split_set())
        if (const int id = specials_def_.id_of(s, token_id(s)); id >= 0) {
            if (token_id(s) < 0) file_ids_.emplace_back(s, id);
            if (specials_def_.normalized.count(s)) {   // matched after normalisation, in its normalised spelling
                normalized_specials_.push_back(unicode::u32_to_utf8(normalize(unicode::utf8_to_u32(s))));
                normalized_ids_.push_back(id);
                continue;
            }
            specials_.push_back(s);
            special_ids_.push_back(id);
            specials_u32_.push_back(unicode::utf8_to_u32(s));
        }
}

std::u32string WordPiece::clean_text(std::u32string_view text) const {
    // _clean_text: drop NUL, U+FFFD and control characters; whitespace -> ' '; then CJK characters spaced
    std::u32string clean;
    clean.reserve(text.size());
    for (char32_t c : text) {
        const CharClass k = unicode::char_class(c);
        if (c == 0 || c == 0xFFFD || k == CharClass::CONTROL) continue;
        if (k == CharClass::SPACE) {
            clean += U' ';
        } else if (opts_.tokenize_chinese_chars && unicode::is_chinese_char(c)) {
            clean += U' ';
            clean += c;
            clean += U' ';
        } else {
            clean += c;
        }
    }
    return clean;
}

std::u32string WordPiece::normalize(std::u32string_view text) const {
    const bool lower = opts_.lower_case;
    const bool strip = opts_.strip_accents == 1 || (opts_.strip_accents == -1 && lower);
    std::u32string out = clean_text(text);
    if (strip) out = strip_accents(out);
    if (lower) out = unicode::lower(out);
    return out;
}

std::string WordPiece::vocabulary_file(const std::string& dir) {
    namespace fs = std::filesystem;
    for (const char* name : {"vocab.txt", "tokenizer.json"})
        if (fs::exists(fs::path(dir) / name)) return (fs::path(dir) / name).string();
    return {};
}

namespace {

// The vocabulary of a fast tokenizer's tokenizer.json, and its BertNormalizer's options as defaults.
std::vector<std::string> tokenizer_json_vocabulary(const std::string& path, WordPieceOptions& opts, bool& lower_known) {
    refuse_lfs_pointer_file(path);
    const nlohmann::json j = json_read_file(path);
    const nlohmann::json* model = j.is_object() && j.contains("model") && j["model"].is_object() ? &j["model"] : nullptr;
    if (!model || model->value("type", std::string()) != "WordPiece")
        user_error_in(path, "is not a WordPiece tokenizer (model.type " + (model ? model->value("type", std::string("absent")) : "absent") + ")",
                      "give a BERT checkpoint (its vocab.txt, or the tokenizer.json of a BertTokenizer)");
    if (model->value("continuing_subword_prefix", std::string("##")) != "##")
        user_error_in(path, "continues words with '" + model->value("continuing_subword_prefix", std::string()) + "', not '##'",
                      "give a BERT checkpoint's tokenizer");
    if (!model->contains("vocab") || !(*model)["vocab"].is_object() || (*model)["vocab"].empty())
        user_error_in(path, "has no model.vocab of tokens to ids", "restore the checkpoint's tokenizer.json");
    const nlohmann::json& vocab = (*model)["vocab"];
    std::vector<std::string> tokens(vocab.size());
    std::vector<bool> seen(vocab.size(), false);
    for (const auto& [token, id] : vocab.items()) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= static_cast<std::int64_t>(tokens.size()) ||
            seen[id.get<std::size_t>()])
            user_error_in(path, "model.vocab maps '" + token + "' to " + id.dump() + ", not one of the ids 0.." +
                                    std::to_string(tokens.size() - 1) + " once each", "restore the checkpoint's tokenizer.json");
        tokens[id.get<std::size_t>()] = token;
        seen[id.get<std::size_t>()] = true;
    }
    if (model->contains("max_input_chars_per_word") && (*model)["max_input_chars_per_word"].is_number_integer())
        opts.max_input_chars_per_word = (*model)["max_input_chars_per_word"].get<int>();
    if (j.contains("normalizer") && j["normalizer"].is_object() && j["normalizer"].value("type", std::string()) == "BertNormalizer") {
        const nlohmann::json& n = j["normalizer"];
        if (n.contains("lowercase") && n["lowercase"].is_boolean()) {
            opts.lower_case = n["lowercase"].get<bool>();
            lower_known = true;
        }
        if (n.contains("strip_accents") && n["strip_accents"].is_boolean()) opts.strip_accents = n["strip_accents"].get<bool>() ? 1 : 0;
        if (n.contains("handle_chinese_chars") && n["handle_chinese_chars"].is_boolean())
            opts.tokenize_chinese_chars = n["handle_chinese_chars"].get<bool>();
    }
    return tokens;
}

}  // namespace

WordPiece WordPiece::from_dir(const std::string& dir, int lower_case, const SpecialTokens& defaults) {
    namespace fs = std::filesystem;
    const std::string vocab = vocabulary_file(dir);
    if (vocab.empty())
        user_error_in((fs::path(dir) / "vocab.txt").string(),
                      "missing (a BERT model folder needs vocab.txt, or the tokenizer.json of a BertTokenizer)",
                      "copy the checkpoint's vocab.txt (or tokenizer.json) beside config.json");
    const bool from_json = fs::path(vocab).filename() == "tokenizer.json";
    WordPieceOptions opts;
    bool lower_known = false;
    std::vector<std::string> json_tokens;
    if (from_json) json_tokens = tokenizer_json_vocabulary(vocab, opts, lower_known);
    std::string config = (fs::path(dir) / "tokenizer_config.json").string();
    if (fs::exists(config)) {
        nlohmann::json j;
        try {
            std::ifstream in(config);
            j = nlohmann::json::parse(in);
        } catch (const std::exception& e) {
            user_error_in(config, std::string("is not valid JSON: ") + e.what(), "restore the checkpoint's file");
        }
        if (j.contains("do_lower_case") && j["do_lower_case"].is_boolean()) {
            opts.lower_case = j["do_lower_case"].get<bool>();
            lower_known = true;
        }
        if (j.contains("strip_accents") && j["strip_accents"].is_boolean())
            opts.strip_accents = j["strip_accents"].get<bool>() ? 1 : 0;
        if (j.contains("tokenize_chinese_chars") && j["tokenize_chinese_chars"].is_boolean())
            opts.tokenize_chinese_chars = j["tokenize_chinese_chars"].get<bool>();
    }
    if (lower_case >= 0) {   // an explicit choice wins over the file
        opts.lower_case = lower_case == 1;
        lower_known = true;
    }
    const SpecialTokens specials = SpecialTokens::from_dir(dir, defaults);
    WordPiece wp = from_json ? WordPiece(std::move(json_tokens), opts, specials, vocab) : WordPiece(vocab, opts, specials);
    if (!lower_known) {   // an uncased vocab has no upper-case ASCII letters outside its specials
        bool upper = false;
        for (const auto& t : wp.tokens_) {
            if (!t.empty() && t.front() == '[' && t.back() == ']') continue;
            if (std::find(wp.specials_.begin(), wp.specials_.end(), t) != wp.specials_.end()) continue;
            if (std::any_of(t.begin(), t.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) upper = true;
        }
        wp.opts_.lower_case = !upper;
    }
    return wp;
}

int WordPiece::token_id(const std::string& token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
}

// BasicTokenizer.tokenize on one segment without special tokens.
void WordPiece::basic_tokenize(std::u32string_view segment, std::vector<std::u32string>& words) const {
    bool lower = opts_.lower_case;
    bool strip = opts_.strip_accents == 1 || (opts_.strip_accents == -1 && lower);
    const std::u32string clean = clean_text(segment);
    std::vector<std::u32string> tokens;
    split_whitespace(unicode::nfc(clean), tokens);
    for (auto& token : tokens) {
        // A word that spells a special token (after cleaning) is kept whole (never_split).
        if (std::find(specials_u32_.begin(), specials_u32_.end(), token) != specials_u32_.end()) {
            words.push_back(token);
            continue;
        }
        if (lower) token = unicode::lower(token);   // str.lower() per word, final sigma included
        if (strip) token = strip_accents(token);
        // _run_split_on_punc: every punctuation character is a word of its own.
        std::u32string cur;
        for (char32_t c : token) {
            if (unicode::char_class(c) == CharClass::PUNCT) {
                if (!cur.empty()) words.push_back(std::move(cur));
                cur.clear();
                words.emplace_back(1, c);
            } else {
                cur += c;
            }
        }
        if (!cur.empty()) words.push_back(std::move(cur));
    }
    // The final whitespace_tokenize(" ".join(split_tokens)) only drops words that became empty,
    // and a word that holds whitespace after accent stripping would be split again.
    std::vector<std::u32string> resplit;
    bool any_space = std::any_of(words.begin(), words.end(), [](const std::u32string& w) {
        return w.empty() || std::any_of(w.begin(), w.end(), is_split_space);
    });
    if (any_space) {
        for (const auto& w : words) split_whitespace(w, resplit);
        words.swap(resplit);
    }
}

// WordpieceTokenizer.tokenize on one word.
void WordPiece::wordpiece(const std::u32string& word, std::vector<int>& ids) const {
    if (static_cast<int>(word.size()) > opts_.max_input_chars_per_word) {
        ids.push_back(unk_);
        return;
    }
    std::size_t mark = ids.size();
    std::size_t start = 0;
    std::string piece;
    while (start < word.size()) {
        std::size_t end = word.size();
        int found = -1;
        while (start < end) {
            piece = start > 0 ? "##" : "";
            piece += unicode::u32_to_utf8(word.substr(start, end - start));
            found = token_id(piece);
            if (found >= 0) break;
            --end;
        }
        if (found < 0) {
            ids.resize(mark);
            ids.push_back(unk_);
            return;
        }
        ids.push_back(found);
        start = end;
    }
}

std::vector<int> WordPiece::tokenize_ids(std::string_view text) const {
    // Special tokens present in the vocabulary are split out first, case-sensitively (HF's added-tokens trie), and
    // map to their own ids.
    std::vector<int> ids;
    for (const SpecialSplit& part : split_special_tokens(text, specials_)) {
        if (part.special >= 0) {
            ids.push_back(special_ids_[part.special]);
            continue;
        }
        if (normalized_specials_.empty()) {
            encode_plain(part.text, ids);
            continue;
        }
        // tokens added with "normalized": true are matched in the normalised text (HF's second pass of its
        // added-tokens split); the rest of it is tokenised as before (normalising again changes nothing)
        const std::string normal = unicode::u32_to_utf8(normalize(unicode::utf8_to_u32(part.text)));
        for (const SpecialSplit& sub : split_special_tokens(normal, normalized_specials_)) {
            if (sub.special >= 0) ids.push_back(normalized_ids_[sub.special]);
            else encode_plain(sub.text, ids);
        }
    }
    return ids;
}

void WordPiece::encode_plain(std::string_view text, std::vector<int>& ids) const {
    std::vector<std::u32string> words;
    basic_tokenize(unicode::utf8_to_u32(text), words);
    for (const auto& w : words) wordpiece(w, ids);
}

std::vector<std::string> WordPiece::tokenize(std::string_view text) const {
    std::vector<std::string> out;
    for (int id : tokenize_ids(text)) out.push_back(tokens_[id]);
    return out;
}

std::vector<int> WordPiece::encode(std::string_view text, int max_length) const {
    return wrap_truncated(cls_, tokenize_ids(text), sep_, max_length);
}

}  // namespace retro
