#include "model/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "core/edit_distance.h"
#include "core/error.h"
#include "model/config_files.h"

namespace retro {

bool RetroConfig::enc_has_cross(std::int64_t l) const {
    return enc_cross_attn_all ||
           std::find(enc_cross_attn_layers.begin(), enc_cross_attn_layers.end(), l) != enc_cross_attn_layers.end();
}
bool RetroConfig::dec_has_cross(std::int64_t l) const {
    return std::find(dec_cross_attn_layers.begin(), dec_cross_attn_layers.end(), l) != dec_cross_attn_layers.end();
}
std::int64_t RetroConfig::first_cca_layer() const {
    for (std::int64_t l = 1; l <= dec_depth; l++)
        if (dec_has_cross(l)) return l;
    return 0;
}

nlohmann::json RetroConfig::to_json() const {
    nlohmann::json j;
    j["num_tokens"] = num_tokens;
    j["max_seq_len"] = max_seq_len;
    j["enc_dim"] = enc_dim;
    j["enc_depth"] = enc_depth;
    j["enc_cross_attn_layers"] = enc_cross_attn_all ? nlohmann::json(nullptr) : nlohmann::json(enc_cross_attn_layers);
    j["dec_dim"] = dec_dim;
    j["dec_depth"] = dec_depth;
    j["dec_cross_attn_layers"] = dec_cross_attn_layers;
    j["heads"] = heads;
    j["dim_head"] = dim_head;
    j["chunk_size"] = chunk_size;
    j["pad_id"] = pad_id;
    j["num_neighbours"] = num_neighbours;
    if (cca_query_positions != "rp") j["cca_query_positions"] = cca_query_positions;
    if (neighbour_alignment != "chunk") j["neighbour_alignment"] = neighbour_alignment;
    if (neighbour_min_match != 0) j["neighbour_min_match"] = neighbour_min_match;
    if (tie_embeddings) j["tie_embeddings"] = true;
    if (cca_zero_init) j["cca_zero_init"] = true;
    if (copy_head) j["copy_head"] = true;
    return j;
}

namespace {
const std::set<std::string> KNOWN = {"num_tokens", "max_seq_len", "enc_dim", "enc_depth", "enc_cross_attn_layers",
                                     "dec_dim", "dec_depth", "dec_cross_attn_layers", "heads", "dim_head",
                                     "chunk_size", "pad_id", "num_neighbours", "enc_attn_dropout", "enc_ff_dropout",
                                     "dec_attn_dropout", "dec_ff_dropout", "use_deepnet", "gated_rmsnorm",
                                     "norm_klass", "enc_scale_residual", "dec_scale_residual", "comment",
                                     "cca_query_positions", "neighbour_alignment", "neighbour_min_match",
                                     "tie_embeddings", "cca_zero_init", "copy_head"};

std::int64_t get_int(const nlohmann::json& j, const char* key, std::int64_t def, const std::string& where) {
    if (!j.contains(key)) return def;
    const auto& v = j.at(key);
    if (!v.is_number_integer()) user_error_in(where, std::string("\"") + key + "\" must be an integer");
    return v.get<std::int64_t>();
}

std::vector<std::int64_t> get_list(const nlohmann::json& v, const char* key, const std::string& where) {
    if (!v.is_array()) user_error_in(where, std::string("\"") + key + "\" must be a list of layer numbers or null");
    std::vector<std::int64_t> out;
    for (const auto& e : v) {
        if (!e.is_number_integer()) user_error_in(where, std::string("\"") + key + "\" must hold integers");
        out.push_back(e.get<std::int64_t>());
    }
    return out;
}
}  // namespace

RetroConfig RetroConfig::from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) user_error_in(where, "model config must be a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!KNOWN.count(it.key())) {
            std::string meant;   // the nearest known field, where it is near enough to be a misspelling
            std::size_t best = 0;
            for (const std::string& known : KNOWN)
                if (const std::size_t d = edit_distance(it.key(), known);
                    near_misspelling(d, known) && (meant.empty() || d < best))
                    meant = known, best = d;
            user_error_in(where, "unknown model config field \"" + it.key() + "\"",
                          meant.empty() ? "see docs/model.md for the fields (RETRO-pytorch's constructor arguments)"
                                        : "did you mean \"" + meant + "\"? (docs/model.md lists the fields)");
        }
    RetroConfig c;
    c.num_tokens = get_int(j, "num_tokens", c.num_tokens, where);
    c.max_seq_len = get_int(j, "max_seq_len", c.max_seq_len, where);
    c.enc_dim = get_int(j, "enc_dim", c.enc_dim, where);
    c.enc_depth = get_int(j, "enc_depth", c.enc_depth, where);
    c.dec_dim = get_int(j, "dec_dim", c.dec_dim, where);
    c.dec_depth = get_int(j, "dec_depth", c.dec_depth, where);
    c.heads = get_int(j, "heads", c.heads, where);
    c.dim_head = get_int(j, "dim_head", c.dim_head, where);
    c.chunk_size = get_int(j, "chunk_size", c.chunk_size, where);
    c.pad_id = static_cast<std::int32_t>(get_int(j, "pad_id", c.pad_id, where));
    c.num_neighbours = get_int(j, "num_neighbours", c.num_neighbours, where);
    c.neighbour_min_match = get_int(j, "neighbour_min_match", c.neighbour_min_match, where);
    if (j.contains("cca_query_positions")) {
        const auto& v = j.at("cca_query_positions");
        if (!v.is_string() || (v.get<std::string>() != "rp" && v.get<std::string>() != "aligned"))
            user_error_in(where, "\"cca_query_positions\" must be \"rp\" or \"aligned\"", "see docs/model.md");
        c.cca_query_positions = v.get<std::string>();
    }
    if (j.contains("neighbour_alignment")) {
        const auto& v = j.at("neighbour_alignment");
        if (!v.is_string() || (v.get<std::string>() != "chunk" && v.get<std::string>() != "match"))
            user_error_in(where, "\"neighbour_alignment\" must be \"chunk\" or \"match\"", "see docs/model.md");
        c.neighbour_alignment = v.get<std::string>();
    }
    for (auto [key, field] : {std::pair{"tie_embeddings", &c.tie_embeddings}, {"cca_zero_init", &c.cca_zero_init},
                              {"copy_head", &c.copy_head}})
        if (j.contains(key)) {
            if (!j.at(key).is_boolean()) user_error_in(where, cat("\"", key, "\" must be true or false"));
            *field = j.at(key).get<bool>();
        }
    if (j.contains("enc_cross_attn_layers") && !j.at("enc_cross_attn_layers").is_null()) {
        c.enc_cross_attn_all = false;
        c.enc_cross_attn_layers = get_list(j.at("enc_cross_attn_layers"), "enc_cross_attn_layers", where);
    }
    if (j.contains("dec_cross_attn_layers")) {
        c.dec_cross_attn_layers.clear();
        if (j.at("dec_cross_attn_layers").is_null())   // RP: None = every layer
            for (std::int64_t l = 1; l <= c.dec_depth; l++) c.dec_cross_attn_layers.push_back(l);
        else
            c.dec_cross_attn_layers = get_list(j.at("dec_cross_attn_layers"), "dec_cross_attn_layers", where);
    }
    for (const char* k : {"enc_attn_dropout", "enc_ff_dropout", "dec_attn_dropout", "dec_ff_dropout"})
        if (j.contains(k) && (!j.at(k).is_number() || j.at(k).get<double>() != 0.0))
            user_error_in(where, std::string("\"") + k + "\" must be 0 (RetroKit trains without dropout)",
                          "set it to 0 (or remove it) to evaluate or generate with weights trained with dropout: "
                          "without dropout, as at inference, the model computes the same");
    for (const char* k : {"use_deepnet", "gated_rmsnorm"})
        if (j.contains(k) && (!j.at(k).is_boolean() || j.at(k).get<bool>()))
            user_error_in(where, std::string("\"") + k + "\" must be false (only RP's pre-norm RMSNorm variant is implemented)");
    for (const char* k : {"norm_klass", "enc_scale_residual", "dec_scale_residual"})
        if (j.contains(k) && !j.at(k).is_null())
            user_error_in(where, std::string("\"") + k + "\" must be null (only RP's default variant is implemented)");
    c.validate(where);
    return c;
}

void RetroConfig::validate(const std::string& where) const {
    auto positive = [&](const char* name, std::int64_t v) {
        if (v <= 0) user_error_in(where, cat("\"", name, "\" must be positive, got ", v));
    };
    positive("num_tokens", num_tokens);
    positive("max_seq_len", max_seq_len);
    positive("enc_dim", enc_dim);
    positive("enc_depth", enc_depth);
    positive("dec_dim", dec_dim);
    positive("dec_depth", dec_depth);
    positive("heads", heads);
    positive("dim_head", dim_head);
    positive("chunk_size", chunk_size);
    positive("num_neighbours", num_neighbours);
    // Far beyond any real model, and low enough that the parameter count and the memory estimate (which lists
    // every layer's tensors) cannot overflow or take minutes: a mistyped size is refused here, in one line.
    auto at_most = [&](const char* name, std::int64_t v, std::int64_t limit) {
        if (v > limit) user_error_in(where, cat("\"", name, "\" is ", v, "; at most ", limit, " is supported"));
    };
    at_most("enc_depth", enc_depth, 1024);
    at_most("dec_depth", dec_depth, 1024);
    at_most("enc_dim", enc_dim, 1 << 20);
    at_most("dec_dim", dec_dim, 1 << 20);
    at_most("heads", heads, 4096);
    at_most("dim_head", dim_head, 1 << 16);
    at_most("num_tokens", num_tokens, std::int64_t(1) << 31);
    at_most("max_seq_len", max_seq_len, std::int64_t(1) << 24);
    at_most("chunk_size", chunk_size, std::int64_t(1) << 24);
    at_most("num_neighbours", num_neighbours, 1024);
    if (neighbour_min_match < 0 || neighbour_min_match > chunk_size)
        user_error_in(where, cat("\"neighbour_min_match\" ", neighbour_min_match, " outside [0, chunk_size]"));
    if (dim_head < 32)
        user_error_in(where, cat("\"dim_head\" is ", dim_head, "; RETRO-pytorch requires at least 32"));
    if (max_seq_len % chunk_size != 0)
        user_error_in(where, cat("\"max_seq_len\" ", max_seq_len, " is not a multiple of \"chunk_size\" ", chunk_size),
                      "choose a max_seq_len that chunk_size divides");
    if (pad_id < 0 || pad_id >= num_tokens) user_error_in(where, cat("\"pad_id\" ", pad_id, " outside [0, num_tokens)"));
    if (tie_embeddings && enc_dim != dec_dim)
        user_error_in(where, cat("\"tie_embeddings\" needs enc_dim == dec_dim (the head reads token_emb), got ",
                                 enc_dim, " and ", dec_dim));
    if (copy_head && dec_cross_attn_layers.empty())
        user_error_in(where, "\"copy_head\" needs a CCA layer (it reads the neighbours CCA reads)",
                      "list one in \"dec_cross_attn_layers\"");
    std::set<std::int64_t> seen;
    for (auto l : dec_cross_attn_layers) {
        if (l < 1 || l > dec_depth)
            user_error_in(where, cat("\"dec_cross_attn_layers\" names layer ", l, " but dec_depth is ", dec_depth,
                                     dec_cross_attn_layers == std::vector<std::int64_t>{1, 3, 6, 9}
                                         ? " (RETRO-pytorch's default [1, 3, 6, 9], taken where the config lists none)"
                                         : ""),
                          "layers are numbered 1..dec_depth: list the CCA layers in \"dec_cross_attn_layers\"");
        if (!seen.insert(l).second) user_error_in(where, cat("\"dec_cross_attn_layers\" lists layer ", l, " twice"));
    }
    seen.clear();
    for (auto l : enc_cross_attn_layers) {
        if (l < 1 || l > enc_depth)
            user_error_in(where, cat("\"enc_cross_attn_layers\" names layer ", l, " but enc_depth is ", enc_depth),
                          "layers are numbered 1..enc_depth");
        if (!seen.insert(l).second) user_error_in(where, cat("\"enc_cross_attn_layers\" lists layer ", l, " twice"));
    }
}

RetroConfig RetroConfig::load(const std::string& path) {
    if (std::error_code ec; std::filesystem::is_directory(path, ec))   // (it said "not valid JSON: basic_filebuf::underflow")
        user_error_in(path, "is a folder, not a model config", shipped_configs_hint());
    std::ifstream in(path);
    if (!in) user_error_in(path, "cannot open model config", shipped_configs_hint());
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        user_error_in(path, std::string("not valid JSON: ") + e.what());
    }
    return from_json(j, path);
}

void RetroConfig::save(const std::string& path) const { write_file_atomic(path, to_json().dump(2) + "\n"); }

}  // namespace retro
