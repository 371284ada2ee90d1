// Implementation of bert_tokenizer.h.
#include "embed/bert_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/lfs_pointer.h"
#include "core/manifest.h"
#include "text/sentencepiece_json.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

constexpr const char* kXlmrSpiece = "sentencepiece.bpe.model";

// a JSON file's string field, "" where the file, the field or the JSON is not there (the readers name the problems)
std::string json_string_field(const fs::path& path, const char* key) {
    try {
        if (!fs::exists(path)) return {};
        const nlohmann::json j = json_read_file(path.string());
        return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
    } catch (const std::exception&) {
        return {};
    }
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// WordPiece's special tokens before the files name any: MPNet's <s> ... </s>, else BERT's [CLS] ... [SEP]
SpecialTokens wordpiece_family(const std::string& dir) {
    return bert_folder_model_type(dir) == "mpnet" ? SpecialTokens::mpnet() : SpecialTokens();
}

// " specials=CLS SEP UNK PAD split: T1 T2 ..." where DIR's special tokens differ from `reference`'s, then " ids: T=ID ..."
// of the tokens whose ids the files gave (the vocabulary lacking them); "" where neither
std::string specials_note(const std::string& dir, const SpecialTokens& defaults, const SpecialTokens& reference,
                          const std::vector<std::pair<std::string, int>>& file_ids) {
    const SpecialTokens s = SpecialTokens::from_dir(dir, defaults);
    std::string note;
    if (s.cls != reference.cls || s.sep != reference.sep || s.unk != reference.unk || s.pad != reference.pad ||
        s.split_set() != reference.split_set()) {
        note = " specials=" + s.cls + " " + s.sep + " " + s.unk + " " + s.pad + " split:";
        for (const std::string& t : s.split_set()) note += " " + t;
    }
    if (!file_ids.empty()) note += " ids:";
    for (const auto& [t, id] : file_ids) note += " " + t + "=" + std::to_string(id);
    return note;
}

BertTextTokenizer::Variant make_tokenizer(const std::string& dir, int lower_case);

}  // namespace

std::string bert_folder_model_type(const std::string& dir) {
    const std::string t = json_string_field(fs::path(dir) / "config.json", "model_type");
    return t.empty() ? "bert" : t;
}

BertTokenizerKind bert_tokenizer_kind(const std::string& dir) {
    const std::string cls = json_string_field(fs::path(dir) / "tokenizer_config.json", "tokenizer_class");
    if (starts_with(cls, "XLMRobertaTokenizer")) return BertTokenizerKind::XLMR_SENTENCEPIECE;
    if (starts_with(cls, "RobertaTokenizer")) return BertTokenizerKind::ROBERTA_BPE;
    for (const char* wordpiece : {"BertTokenizer", "DistilBertTokenizer", "ElectraTokenizer", "MPNetTokenizer"})
        if (starts_with(cls, wordpiece)) return BertTokenizerKind::WORDPIECE;
    // another tokenizer (HerBERT's, CamemBERT's, a Japanese BERT's MeCab one) would be guessed from the files below
    // and tokenise wrongly without a word; the generic fast classes name no algorithm: the files decide
    if (!cls.empty() && cls != "PreTrainedTokenizerFast" && cls != "TokenizersBackend" && cls != "PreTrainedTokenizer")
        user_error_in((fs::path(dir) / "tokenizer_config.json").string(),
                      "names the tokenizer_class " + cls + ", which the bert embedder does not have",
                      "use a checkpoint tokenised by WordPiece (BERT, DistilBERT, ELECTRA, MPNet), XLM-R's sentencepiece or RoBERTa's BPE");
    const std::string type = bert_folder_model_type(dir);
    if (type == "xlm-roberta") return BertTokenizerKind::XLMR_SENTENCEPIECE;
    if (type == "roberta" || type == "modernbert") return BertTokenizerKind::ROBERTA_BPE;   // ModernBERT: a byte-level BPE
    if (fs::exists(fs::path(dir) / "vocab.txt")) return BertTokenizerKind::WORDPIECE;
    if (fs::exists(fs::path(dir) / kXlmrSpiece)) return BertTokenizerKind::XLMR_SENTENCEPIECE;
    if (tokenizer_json_is_unigram((fs::path(dir) / "tokenizer.json").string())) return BertTokenizerKind::XLMR_SENTENCEPIECE;
    if (fs::exists(fs::path(dir) / "vocab.json") && fs::exists(fs::path(dir) / "merges.txt")) return BertTokenizerKind::ROBERTA_BPE;
    return BertTokenizerKind::WORDPIECE;
}

void bert_tokenizer_require_files(const std::string& dir) {
    const auto require = [&](const char* name, const std::string& fix) {
        if (!fs::exists(fs::path(dir) / name))
            user_error_in((fs::path(dir) / name).string(), "missing (a bert model folder needs it)", fix);
    };
    switch (bert_tokenizer_kind(dir)) {
        case BertTokenizerKind::WORDPIECE:
            if (WordPiece::vocabulary_file(dir).empty())
                user_error_in((fs::path(dir) / "vocab.txt").string(), "missing (a bert model folder needs it)",
                              "copy the checkpoint's vocab.txt (or the tokenizer.json of its BertTokenizer) into the folder");
            return;
        case BertTokenizerKind::XLMR_SENTENCEPIECE:
            if (!fs::exists(fs::path(dir) / kXlmrSpiece) && fs::exists(fs::path(dir) / "tokenizer.json"))
                return;   // transformers 5's save: the Unigram model inside tokenizer.json (text/sentencepiece_json.h)
            require(kXlmrSpiece, "copy the checkpoint's sentencepiece.bpe.model (or its tokenizer.json) into the folder");
            return;
        case BertTokenizerKind::ROBERTA_BPE:
            if (fs::exists(fs::path(dir) / "tokenizer.json") && !fs::exists(fs::path(dir) / "vocab.json") &&
                !fs::exists(fs::path(dir) / "merges.txt"))
                return;   // transformers 5's save: the BPE model inside tokenizer.json
            require("vocab.json", "copy the checkpoint's vocab.json and merges.txt (or its tokenizer.json) into the folder");
            require("merges.txt", "copy the checkpoint's vocab.json and merges.txt (or its tokenizer.json) into the folder");
            return;
    }
}

std::string bert_tokenizer_file(const std::string& dir) {
    const auto present = [&](const char* name) {
        return fs::exists(fs::path(dir) / name) ? (fs::path(dir) / name).string() : std::string();
    };
    switch (bert_tokenizer_kind(dir)) {
        case BertTokenizerKind::XLMR_SENTENCEPIECE:
            return present(kXlmrSpiece).empty() ? present("tokenizer.json") : present(kXlmrSpiece);
        case BertTokenizerKind::ROBERTA_BPE:
            if (present("vocab.json").empty() && present("merges.txt").empty()) return present("tokenizer.json");
            return present("merges.txt").empty() ? std::string() : present("vocab.json");
        case BertTokenizerKind::WORDPIECE: break;
    }
    return WordPiece::vocabulary_file(dir);   // vocab.txt, or tokenizer.json
}

std::string bert_tokenizer_fingerprint(const std::string& dir) {
    return bert_tokenizer_fingerprint(dir, BertTextTokenizer(dir, -1));   // what the files resolve to
}

std::string bert_tokenizer_fingerprint(const std::string& dir, const BertTextTokenizer& tokenizer) {
    const std::string vocab = bert_tokenizer_file(dir);
    refuse_lfs_pointer_file(vocab);
    std::string all = fingerprint_file(vocab);
    const BertTokenizerKind kind = tokenizer.kind();   // added tokens' ids and add_prefix_space are read from it
    if (kind == BertTokenizerKind::XLMR_SENTENCEPIECE) {   // the ids follow the sentencepiece model, and added tokens
        all += " xlm-roberta" + specials_note(dir, SpecialTokens::fairseq(), SpecialTokens::fairseq(), tokenizer.file_ids());
        return fingerprint_bytes(all.data(), all.size());
    }
    if (kind == BertTokenizerKind::ROBERTA_BPE) {
        const std::string merges = (fs::path(dir) / "merges.txt").string();
        if (fs::exists(merges)) {   // else tokenizer.json holds both
            refuse_lfs_pointer_file(merges);
            all += " " + fingerprint_file(merges);
        }
        all += std::string(" roberta-bpe add_prefix_space=") + (tokenizer.add_prefix_space() ? "true" : "false") +
               specials_note(dir, SpecialTokens::fairseq(), SpecialTokens::fairseq(), tokenizer.file_ids());
        return fingerprint_bytes(all.data(), all.size());
    }
    const fs::path config = fs::path(dir) / "tokenizer_config.json";
    const nlohmann::json j = fs::exists(config) ? json_read_file(config.string()) : nlohmann::json::object();
    // the values WordPiece takes (WordPiece::from_dir) of the options it reads besides do_lower_case (an index
    // records lower_case itself): a re-save that writes the defaults out, or changes other fields
    // (model_max_length, name_or_path), leaves the ids and the fingerprint as they were
    const auto flag = [&](const char* key) -> const nlohmann::json* {
        return j.is_object() && j.contains(key) && j[key].is_boolean() ? &j[key] : nullptr;
    };
    const nlohmann::json* strip = flag("strip_accents");
    const nlohmann::json* chinese = flag("tokenize_chinese_chars");
    all += std::string(" strip_accents=") + (strip ? strip->dump() : "unset") +
           " tokenize_chinese_chars=" + (chinese ? chinese->dump() : "true");
    // the special tokens (since 2026-12-02 MPNet's <s> ... </s>, or names the tokenizer files give) where they are not
    // BERT's five: an index of a BERT checkpoint keeps the fingerprint it had
    all += specials_note(dir, wordpiece_family(dir), SpecialTokens(), tokenizer.file_ids());
    return fingerprint_bytes(all.data(), all.size());
}

namespace {

BertTextTokenizer::Variant make_tokenizer(const std::string& dir, int lower_case) {
    switch (bert_tokenizer_kind(dir)) {
        case BertTokenizerKind::XLMR_SENTENCEPIECE:
            return XlmrTokenizer(bert_tokenizer_file(dir).empty() ? (fs::path(dir) / kXlmrSpiece).string() : bert_tokenizer_file(dir),
                                 SpecialTokens::from_dir(dir, SpecialTokens::fairseq()));
        case BertTokenizerKind::ROBERTA_BPE: {
            // transformers loads a tokenizer.json-only folder with a generic class (PreTrainedTokenizerFast,
            // TokenizersBackend: ModernBERT's) as the file says, with RobertaTokenizer (named, or chosen by model_type
            // roberta) by that class's own rules
            const std::string cls = json_string_field(fs::path(dir) / "tokenizer_config.json", "tokenizer_class");
            const bool json_only = !fs::exists(fs::path(dir) / "vocab.json") && !fs::exists(fs::path(dir) / "merges.txt");
            const bool roberta_class = starts_with(cls, "RobertaTokenizer") || (cls.empty() && bert_folder_model_type(dir) == "roberta");
            return RobertaBpeTokenizer(dir, json_only && !roberta_class);
        }
        case BertTokenizerKind::WORDPIECE: break;
    }
    return WordPiece::from_dir(dir, lower_case, wordpiece_family(dir));
}

}  // namespace

BertTextTokenizer::BertTextTokenizer(const std::string& dir, int lower_case) : t_(make_tokenizer(dir, lower_case)) {}

std::vector<int> BertTextTokenizer::encode(std::string_view text, int max_length) const {
    return std::visit([&](const auto& t) { return t.encode(text, max_length); }, t_);
}

std::vector<int> BertTextTokenizer::tokenize_ids(std::string_view text) const {
    return std::visit([&](const auto& t) { return t.tokenize_ids(text); }, t_);
}

int BertTextTokenizer::vocab_size() const {
    return std::visit([](const auto& t) { return t.vocab_size(); }, t_);
}

}  // namespace retro
