// Chunk embedders (ARCHITECTURE.md Decision 5): map a chunk's token ids to a unit vector.
// `bow` (hashed TF-IDF unigrams+bigrams, sparse random projection; no weights), `bert` (a
// local Hugging Face BERT checkpoint: ids -> text -> WordPiece -> encoder -> mean pool -> L2) and
// `t5` (a T5 encoder, plain or GTR / Sentence-T5: ids -> text -> spiece -> encoder -> pool -> Dense -> L2) and
// `clip` (CLIP's text tower for chunks; its vision tower embeds images: clip_embedder.h).
// The embedder's name and settings are recorded in retro-index's manifest and rebuilt from it
// by retro-knn and retro-generate (embedder_from_json).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace retro {

class Tokenizer;

class Embedder {
public:
    virtual ~Embedder() = default;
    virtual std::string name() const = 0;
    virtual int dim() const = 0;
    // Embeds `n` chunks of `chunk_size` token ids (pad = 0 after a document's end) into
    // out[n * dim()], each row L2-normalised (an all-padding chunk gives a zero row).
    virtual void embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const = 0;
    // The settings that rebuild this embedder (written to the index manifest).
    virtual nlohmann::json to_json() const = 0;
};

// The text of one chunk of `chunk_size` token ids: pad, bos and eos dropped, the rest decoded with
// the database's tokenizer (what the text embedders embed). False, and `text` empty, when nothing is left.
bool chunk_text(const Tokenizer& tokenizer, const std::int32_t* ids, int chunk_size, std::string& text);

// Builds an embedder from a manifest's "embedder" object. `tokenizer` is needed by `bert`, `t5` and `clip`
// (chunk ids are decoded to text before WordPiece) and may be null for `bow`.
// `index_dir` resolves files the settings name (e.g. bow's idf.npy). `device` "cuda" runs a bert encoder on the GPU
// (bow, t5 and clip always embed on the CPU).
std::unique_ptr<Embedder> embedder_from_json(const nlohmann::json& j, const std::string& index_dir,
                                             const Tokenizer* tokenizer, const std::string& device = "cpu");

}  // namespace retro
