// Implementation of bm25_params.h.
#include "index/bm25_params.h"

#include <cmath>

#include "core/error.h"
#include "text/tokenizer.h"

namespace retro {

void bm25_params_check(const Bm25Params& p) {
    // written as !(ok) so that NaN is refused too. k1 and k3 above a million weigh a term by its count alone as
    // closely as floats tell, and near 1e308 the weights overflow to inf (every score null, every distance inf)
    constexpr double kMax = 1e6;
    if (!(p.k1 >= 0 && p.k1 <= kMax)) user_error_in("--bm25-k1", cat(p.k1, " is not a number from 0 to 1,000,000"), "1.2 is usual");
    if (p.k2 != 0) user_error_in("--bm25-k2", "must be 0 (the query-length term is not used)");
    if (!(p.k3 >= 0 && p.k3 <= kMax)) user_error_in("--bm25-k3", cat(p.k3, " is not a number from 0 to 1,000,000"));
    if (!(p.b >= 0 && p.b <= 1)) user_error_in("--bm25-b", "must be between 0 and 1");
    if (!(p.min_normlen >= 0 && std::isfinite(p.min_normlen)))
        user_error_in("--bm25-min-normlen", cat(p.min_normlen, " is not a number >= 0"));
}

nlohmann::json bm25_params_to_json(const Bm25Params& p) {
    return {{"weight", "Xapian::BM25Weight"}, {"k1", p.k1}, {"k2", p.k2}, {"k3", p.k3}, {"b", p.b},
            {"min_normlen", p.min_normlen}};
}

Bm25Params bm25_params_from_json(const nlohmann::json& j, const std::string& manifest_path) {
    Bm25Params p;
    if (!j.is_object()) user_error_in(manifest_path, "records no bm25 parameters", "rebuild the index with retro-index --kind bm25");
    for (auto [name, field] : {std::pair{"k1", &p.k1}, {"k2", &p.k2}, {"k3", &p.k3}, {"b", &p.b}, {"min_normlen", &p.min_normlen}}) {
        if (!j.contains(name) || !j[name].is_number())
            user_error_in(manifest_path, std::string("records no bm25 parameter ") + name, "rebuild the index with retro-index --kind bm25");
        *field = j[name].get<double>();
    }
    if (j.value("weight", "") != "Xapian::BM25Weight")
        user_error_in(manifest_path, "records a bm25 weight other than Xapian::BM25Weight");
    try {
        bm25_params_check(p);
    } catch (const UserError& e) {
        user_error_in(manifest_path, std::string("records bad bm25 parameters (") + e.what() + ")");
    }
    return p;
}

bool bm25_indexes(std::int32_t token) { return token != TOKEN_PAD && token != TOKEN_BOS && token != TOKEN_EOS; }

std::string bm25_term(std::int32_t token) { return "t" + std::to_string(token); }

}  // namespace retro
