// Implementation of embedder_from_json (embedder.h): dispatch on the recorded name.
#include "embed/embedder.h"

#include "core/error.h"
#include "embed/bert_embedder.h"
#include "embed/bow_embedder.h"

namespace retro {

std::unique_ptr<Embedder> embedder_from_json(const nlohmann::json& j, const std::string& index_dir,
                                             const Tokenizer* tokenizer, const std::string& device) {
    std::string name = j.is_object() ? j.value("name", "") : "";
    if (name == "bow") return bow_embedder_from_json(j, index_dir);
    if (name == "bert") {
        if (!tokenizer) user_error_in(index_dir, "the bert embedder needs the database's tokenizer");
        return make_bert_embedder_from_json(j, tokenizer, device);
    }
    user_error_in(index_dir + "/manifest.json", "unknown embedder '" + name + "'", "rebuild the index with retro-index");
}

}  // namespace retro
