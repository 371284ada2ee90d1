// Implementation of xlmr_tokenizer.h over libsentencepiece.
#include "text/xlmr_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "text/sentencepiece_load.h"
#include "text/special_tokens.h"

namespace retro {

XlmrTokenizer::XlmrTokenizer(const std::string& model_path, const SpecialTokens& files)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    sentencepiece_load(*sp_, model_path, SentencepieceLayout::fairseq, "an XLM-RoBERTa checkpoint's sentencepiece tokenizer",
                       std::filesystem::path(model_path).extension() == ".json" ? "tokenizer.json" : "sentencepiece.bpe.model");
    // fairseq's mapping sends sentencepiece's unknown (id 0) to <unk> and shifts every other piece by one
    if (sp_->unk_id() != 0)
        user_error_in(model_path, "has its unknown piece at id " + std::to_string(sp_->unk_id()) + ", XLM-RoBERTa's is at 0",
                      "give the sentencepiece.bpe.model of an XLM-RoBERTa checkpoint");
    specials_ = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"};
    special_ids_ = {kBos, kPad, kEos, kUnk, mask_id()};
    for (const std::string& t : files.split_set()) {
        if (std::find(specials_.begin(), specials_.end(), t) != specials_.end()) continue;
        const int piece = sp_->PieceToId(absl::string_view(t.data(), t.size()));
        const int id = files.id_of(t, piece > 0 ? piece + 1 : -1);
        if (id < 0) continue;
        if (piece <= 0) file_ids_.emplace_back(t, id);
        specials_.push_back(t);
        special_ids_.push_back(id);
    }
}

XlmrTokenizer::~XlmrTokenizer() = default;
XlmrTokenizer::XlmrTokenizer(XlmrTokenizer&&) noexcept = default;
XlmrTokenizer& XlmrTokenizer::operator=(XlmrTokenizer&&) noexcept = default;

int XlmrTokenizer::mask_id() const { return sp_->GetPieceSize() + 1; }

int XlmrTokenizer::vocab_size() const {
    int n = sp_->GetPieceSize() + 2;
    for (int id : special_ids_) n = std::max(n, id + 1);
    return n;
}

void XlmrTokenizer::encode_segment(std::string_view segment, std::vector<int>& ids) const {
    if (segment.empty()) return;
    std::vector<int> pieces;
    auto status = sp_->Encode(absl::string_view(segment.data(), segment.size()), &pieces);
    if (!status.ok()) throw InternalError("sentencepiece encode failed: " + status.ToString());
    // transformers' _convert_token_to_id: PieceToId(piece) + 1, or <unk> where sentencepiece has none (id 0)
    for (int p : pieces) ids.push_back(p == 0 ? kUnk : p + 1);
}

std::vector<int> XlmrTokenizer::tokenize_ids(std::string_view text) const {
    std::vector<int> ids;
    for (const SpecialSplit& part : split_special_tokens(text, specials_)) {
        if (part.special >= 0) ids.push_back(special_ids_[part.special]);
        else encode_segment(part.text, ids);
    }
    return ids;
}

std::vector<int> XlmrTokenizer::encode(std::string_view text, int max_length) const {
    return wrap_truncated(kBos, tokenize_ids(text), kEos, max_length);
}

}  // namespace retro
