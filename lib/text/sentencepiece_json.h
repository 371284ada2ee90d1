// A sentencepiece model rebuilt from a Hugging Face tokenizer.json whose model is Unigram. Transformers 5 saves T5's
// and XLM-RoBERTa's tokenizers as tokenizer.json alone (no spiece.model, no sentencepiece.bpe.model): the file holds
// what sentencepiece needs — each piece and its score, the unknown piece, the normaliser's precompiled character map
// (sentencepiece's own bytes, base64) and the whitespace options — so the model is rebuilt as sentencepiece's
// ModelProto (its protobuf bytes, written here field by field) and loaded by libsentencepiece as the .model file
// would be. The same pieces and normaliser tokenise as the original .model does (tests/test_sentencepiece_json.cpp
// holds the two to the same ids).
//
// What is read — transformers 5's T5Tokenizer and XLMRobertaTokenizer keep only the vocabulary, the character map
// and the added tokens of the file, and build the rest themselves, so the rebuild does the same:
//   model           {"type": "Unigram", "vocab": [[piece, score], ...], "unk_id": N} (byte_fallback is not followed:
//                   both classes turn it off)
//   normalizer      its Precompiled character map, alone or inside a Sequence (other rules are not kept)
//   pre_tokenizer   not read: white-space runs folded and a prefix space always (WhitespaceSplit + Metaspace "always";
//                   XLM-R "never" where tokenizer_config.json's add_prefix_space is false)
//   post_processor  not read: T5 appends tokenizer_config.json's eos_token (default </s>), XLM-R wraps <s> ... </s>
//   added_tokens    special ones become control pieces; the others stay normal pieces (the callers split every
//                   added token out of the raw text first, as transformers does)
// What it cannot represent (not a Unigram model, no unknown piece, a score outside float, XLM-R without fairseq's
// four tokens first) is refused in one line naming the file.
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
