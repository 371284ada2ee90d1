// Implementation of embedder_from_json (embedder.h): dispatch on the recorded name.
#include "embed/embedder.h"

#include "core/error.h"
#include "embed/bert_embedder.h"
#include "embed/bow_embedder.h"
#include "embed/clip_embedder.h"
#include "embed/t5_embedder.h"
#include "text/tokenizer.h"

namespace retro {

bool chunk_text(const Tokenizer& tokenizer, const std::int32_t* ids, int chunk_size, std::string& text) {
    std::vector<int> kept;
    kept.reserve(chunk_size);
    for (int t = 0; t < chunk_size; ++t)
        if (ids[t] != TOKEN_PAD && ids[t] != TOKEN_BOS && ids[t] != TOKEN_EOS) kept.push_back(ids[t]);
    text.clear();
    if (kept.empty()) return false;
    text = tokenizer.decode(kept);
    return true;
}

std::unique_ptr<Embedder> embedder_from_json(const nlohmann::json& j, const std::string& index_dir,
                                             const Tokenizer* tokenizer, const std::string& device) {
    std::string name = j.is_object() ? j.value("name", "") : "";
    if (name == "bow") return bow_embedder_from_json(j, index_dir);
    if (name == "bert") {
        if (!tokenizer) user_error_in(index_dir, "the bert embedder needs the database's tokenizer");
        return make_bert_embedder_from_json(j, tokenizer, device);
    }
    if (name == "t5") {
        if (!tokenizer) user_error_in(index_dir, "the t5 embedder needs the database's tokenizer");
        return make_t5_embedder_from_json(j, tokenizer);
    }
    if (name == "clip") return make_clip_embedder_from_json(j, tokenizer);   // the tokenizer only decodes chunks of a text index
    user_error_in(index_dir + "/manifest.json", "unknown embedder '" + name + "'", "rebuild the index with retro-index");
}

}  // namespace retro
