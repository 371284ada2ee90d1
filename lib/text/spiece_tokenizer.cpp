// Implementation of spiece_tokenizer.h over libsentencepiece.
#include "text/spiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "core/error.h"
#include "text/sentencepiece_json.h"

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

std::vector<int> SpieceTokenizer::encode(std::string_view text, int max_length) const {
    RETRO_CHECK(max_length >= 2, "max_length ", max_length, " leaves no room for a piece and eos");
    std::vector<int> ids;
    auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
    if (!status.ok()) throw InternalError("sentencepiece encode failed: " + status.ToString());
    if (static_cast<int>(ids.size()) > max_length - 1) ids.resize(max_length - 1);
    ids.push_back(sp_->eos_id());
    return ids;
}

int SpieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int SpieceTokenizer::eos_id() const { return sp_->eos_id(); }
int SpieceTokenizer::pad_id() const { return sp_->pad_id(); }

}  // namespace retro
