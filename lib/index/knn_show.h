// `retro-knn show`: a chunk's text beside its neighbours' text (and their continuations' first
// tokens), decoded with the database's tokenizer, as text or JSON lines.
#pragma once
#include <cstdint>
#include <string>

namespace retro {

struct KnnShowOptions {
    std::string knn, db, tokenizer;   // tokenizer "" = the db's recorded one
    std::int64_t chunk = 0;
    std::int64_t count = 1;           // chunks from `chunk` on
    bool json = false;
};

void knn_show(const KnnShowOptions& opts);

}  // namespace retro
