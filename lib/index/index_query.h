// `retro-index query INDEX "text"`: the k chunks of an index closest to a text, with their scores
// and decoded text. The text becomes the database tokenizer's ids, shaped as one chunk of that
// length; a dense index embeds it with the embedder its manifest records (embedder_from_json:
// bow, bert, t5) and searches index.faiss; a bm25 index scores the ids with BM25 (no document is
// excluded). Printed as text or, with --json, one JSON object.
// With `image` (--image FILE) the query is an image, embedded by CLIP's vision tower: against an
// image index (retro-index --images, image_index.h) or a dense index built with --embedder clip.
// An image index answers text queries too (CLIP's text tower); its hits are image paths.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <vector>

namespace retro {

struct IndexQueryOptions {
    std::string index;               // index folder (retro-index's output, dense or bm25)
    std::string text;                // the query text ("" when `image` is given)
    std::string db;                  // "" = the database the manifest records
    std::string tokenizer;           // "" = the database's
    int k = 5;
    int nprobe = 0, ef_search = 0;   // 0 = as saved
    bool json = false;
    std::string image;               // a query image (JPEG / PNG), "" for a text query (aggregate order: new fields last)
    bool verify = true;              // re-hash index.faiss (and idf.npy) against the manifest before reading them
    // bert: the text put before the query (unset: index_query_prompt's choice)
    std::optional<std::string> prompt;
};

// The prompt a bert index's query is embedded with, as sentence-transformers' encode_query chooses it: --prompt, else
// the model's "query" prompt (config_sentence_transformers.json: e5's "query: ", nomic's "search_query: "), else the
// prompt the index's chunks were embedded with. `embedder` is the index manifest's embedder record.
std::string index_query_prompt(const nlohmann::json& embedder, const IndexQueryOptions& o);

struct IndexQueryHit {
    std::int64_t chunk = -1, doc = -1;
    float score = 0;
    std::string text;                // the chunk's text (chunk indices)
    std::string image;               // the image's path (image indices; chunk is then its row)
};

// The best k chunks, best first (fewer when the index finds fewer). UserError naming the problem
// for a bad folder, an empty query or a query the embedder gives no vector for.
std::vector<IndexQueryHit> index_query_search(const IndexQueryOptions& opts);
// index_query_search, printed on stdout.
void index_query(const IndexQueryOptions& opts);

}  // namespace retro
