// A sentencepiece model rebuilt from a Hugging Face tokenizer.json whose model is Unigram. Transformers 5 saves T5's
// and XLM-RoBERTa's tokenizers as tokenizer.json alone (no spiece.model, no sentencepiece.bpe.model): the file holds
// what sentencepiece needs — each piece and its score, the unknown piece, the normaliser's precompiled character map
// (sentencepiece's own bytes, base64) and the whitespace options — so the model is rebuilt as sentencepiece's
// ModelProto (its protobuf bytes, written here field by field) and loaded by libsentencepiece as the .model file
// would be. The same pieces and normaliser tokenise as the original .model does (tests/test_sentencepiece_json.cpp
// holds the two to the same ids).
//
// What is read, and refused in one line naming the file where it is something else:
//   model           {"type": "Unigram", "vocab": [[piece, score], ...], "unk_id": N, "byte_fallback": B}
//   normalizer      null; Precompiled (its charsmap); or a Sequence of Precompiled and Replace(" {2,}" -> " ")
//                   (transformers 4's converter: sentencepiece's remove_extra_whitespaces) and Strip
//   pre_tokenizer   Metaspace ("▁"; prepend_scheme always / first, or never, or the older add_prefix_space), alone
//                   or after WhitespaceSplit (transformers 5's form: whitespace runs folded, as sentencepiece does)
//   post_processor  the wrapping the caller's layout expects (T5: $A </s>; fairseq: <s> $A </s>)
//   added_tokens    which pieces are control tokens (special) or user-defined ones (matched in the text)
#pragma once
#include <string>

namespace retro {

// How tokenizer.json's ids relate to the sentencepiece model's.
enum class SentencepieceLayout {
    same_ids,   // T5: id k is piece k (spiece.model's order; T5's <extra_id_*> appended as control pieces)
    fairseq,    // XLM-R: <s> <pad> </s> <unk> first, piece k (k >= 3) at k + 1, <mask> last (fairseq's shift): the
                // rebuilt model is the original sentencepiece.bpe.model's layout (<unk> 0, <s> 1, </s> 2)
};

// The serialized ModelProto of tokenizer.json at `path` (for SentencePieceProcessor::LoadFromSerializedProto).
// UserError naming the file for anything above it cannot represent.
std::string sentencepiece_model_from_tokenizer_json(const std::string& path, SentencepieceLayout layout);

// Whether `path` is a tokenizer.json whose model is Unigram (false for a missing or malformed file: the loader names
// those problems).
bool tokenizer_json_is_unigram(const std::string& path);

}  // namespace retro
