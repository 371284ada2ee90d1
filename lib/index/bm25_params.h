// BM25 (lexical) retrieval, the pieces every BM25 file shares: the parameters of Xapian's
// BM25Weight (recorded in a bm25 index folder's manifest, read back by retro-knn and retro-generate),
// which token ids are indexed (all but pad, bos and eos), how a token id is spelled as a Xapian term
// ("t<id>"), and the name of the database file in the folder. The formula: docs/index.md "BM25
// (lexical) retrieval".
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace retro {

// Xapian::BM25Weight(k1, k2, k3, b, min_normlen); defaults are Xapian's own (k2 = 0: no query-length term).
struct Bm25Params {
    double k1 = 1.0;            // wdf saturation in the chunk
    double k2 = 0.0;            // always 0 here (the formula in docs/index.md has no k2 term)
    double k3 = 1.0;            // wqf saturation in the query chunk
    double b = 0.5;             // length normalisation strength, 0..1
    double min_normlen = 0.5;   // floor of len / average length
};

inline constexpr const char* kBm25DbFile = "bm25.glass";   // single-file Xapian (glass) database

// UserError naming the flag when a parameter is out of range (Xapian would clamp it silently).
void bm25_params_check(const Bm25Params& p);
nlohmann::json bm25_params_to_json(const Bm25Params& p);
// Reads the manifest's "bm25" object; UserError naming `manifest_path` when a field is missing.
Bm25Params bm25_params_from_json(const nlohmann::json& j, const std::string& manifest_path);

// Whether a token id becomes a term: pad (0), bos (2) and eos (3) do not; unk (1) does.
bool bm25_indexes(std::int32_t token);
// The Xapian term of a token id: "t" + decimal id.
std::string bm25_term(std::int32_t token);

}  // namespace retro
