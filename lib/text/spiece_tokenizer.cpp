// Implementation of spiece_tokenizer.h over libsentencepiece.
#include "text/spiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "core/error.h"
#include "text/sentencepiece_load.h"

namespace retro {

SpieceTokenizer::SpieceTokenizer(const std::string& model_path)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    sentencepiece_load(*sp_, model_path, SentencepieceLayout::same_ids, "the model's sentencepiece tokenizer",
                       std::filesystem::path(model_path).extension() == ".json" ? "tokenizer.json" : "spiece.model");
    if (sp_->eos_id() < 0)
        user_error_in(model_path, "has no eos piece (</s>)", "give the sentencepiece model the checkpoint was trained with");
}

SpieceTokenizer::~SpieceTokenizer() = default;
SpieceTokenizer::SpieceTokenizer(SpieceTokenizer&&) noexcept = default;
SpieceTokenizer& SpieceTokenizer::operator=(SpieceTokenizer&&) noexcept = default;

void SpieceTokenizer::encode_segment(std::string_view segment, std::vector<int>& ids) const {
    if (segment.empty()) return;
    std::vector<int> pieces;
    auto status = sp_->Encode(absl::string_view(segment.data(), segment.size()), &pieces);
    if (!status.ok()) throw InternalError("sentencepiece encode failed: " + status.ToString());
    ids.insert(ids.end(), pieces.begin(), pieces.end());
}

std::vector<int> SpieceTokenizer::encode(std::string_view text, int max_length) const {
    RETRO_CHECK(max_length >= 2, "max_length ", max_length, " leaves no room for a piece and eos");
    std::vector<int> ids;
    if (specials_.empty()) {
        encode_segment(text, ids);
    } else {
        for (const SpecialSplit& part : split_special_tokens(text, special_spellings_, special_strip_)) {
            if (part.special >= 0) ids.push_back(specials_[static_cast<std::size_t>(part.special)].second);
            else encode_segment(part.text, ids);
        }
    }
    if (static_cast<int>(ids.size()) > max_length - 1) ids.resize(max_length - 1);
    ids.push_back(sp_->eos_id());
    return ids;
}

int SpieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int SpieceTokenizer::eos_id() const { return sp_->eos_id(); }
int SpieceTokenizer::pad_id() const { return sp_->pad_id(); }
int SpieceTokenizer::unk_id() const { return sp_->unk_id(); }

int SpieceTokenizer::piece_id(const std::string& piece) const {
    const int id = sp_->PieceToId(absl::string_view(piece.data(), piece.size()));
    return id >= 0 && id < sp_->GetPieceSize() && sp_->IdToPiece(id) == piece ? id : -1;
}

void SpieceTokenizer::set_special_tokens(const std::vector<std::pair<std::string, int>>& tokens,
                                         const std::vector<SpecialTokens::Strip>& strip) {
    RETRO_CHECK(strip.empty() || strip.size() == tokens.size(), "one strip setting per special token");
    specials_ = tokens;
    special_spellings_.clear();
    for (const auto& t : tokens) special_spellings_.push_back(t.first);
    special_strip_ = strip;
}

}  // namespace retro
