// RETRO model configuration (JSON), field for field RETRO-pytorch 0.3.9's RETRO(...) constructor arguments
// (RETRO.md B.1), plus `num_neighbours` (k, retrieved neighbours per chunk) which RP takes from the data.
// Layer lists are 1-based as in RP; `enc_cross_attn_layers: null` means every encoder layer (RP's None).
// Only RP's default variant is implemented: pre-norm RMSNorm, no dropout, no DeepNet, no gated RMSNorm;
// a config asking for another is refused with a one-line error (exit 2).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace retro {

struct RetroConfig {
    std::int64_t num_tokens = 28996;
    std::int64_t max_seq_len = 2048;
    std::int64_t enc_dim = 896;
    std::int64_t enc_depth = 2;
    bool enc_cross_attn_all = true;                 // enc_cross_attn_layers = null
    std::vector<std::int64_t> enc_cross_attn_layers;
    std::int64_t dec_dim = 768;
    std::int64_t dec_depth = 12;
    std::vector<std::int64_t> dec_cross_attn_layers = {1, 3, 6, 9};
    std::int64_t heads = 8;
    std::int64_t dim_head = 64;
    std::int64_t chunk_size = 64;
    std::int32_t pad_id = 0;
    std::int64_t num_neighbours = 2;
    // CCA query rotary positions (RETRO.md B.6.6 and open decision 3): "rp" = RETRO-pytorch's quirk (query 0 of
    // each group at 2cs-2, queries 1..cs-1 at 0; bit-compatible, the default) or "aligned" = the intended cs-1+i,
    // which puts the token a query predicts at relative offset 1 from it (neighbour keys sit at 0..r-1, the
    // continuation at cs..2cs-1). Not an RP constructor argument; written to JSON only when "aligned".
    std::string cca_query_positions = "rp";
    // What the encoder reads for each neighbour (data/neighbour_window.h, docs/retrieval.md section 7): "chunk" =
    // RETRO's unit, the neighbour chunk and its continuation (the default); "match" = the neighbour's text shifted
    // so that its longest run shared with the query chunk sits at the query's positions. Not an RP argument;
    // written to JSON only when "match". Data-side only: the model's weights and ops are the same.
    std::string neighbour_alignment = "chunk";
    // Neighbours sharing no run of this many tokens with the query chunk are not read (masked as pads); 0 = off.
    std::int64_t neighbour_min_match = 0;
    // The output head shares the token embedding (to_logits.weight = token_emb.weight; the file holds no
    // to_logits.weight), as GPT-2 does; needs enc_dim == dec_dim. token_emb (and pos_emb) start at N(0, 1/dec_dim),
    // so the first logits have the untied head's scale. Why: a copy through CCA then needs one map near a multiple
    // of the identity instead of a learnt token-to-logit table (docs/retrieval.md section 14). Not an RP argument;
    // written to JSON only when true.
    bool tie_embeddings = false;
    // CCA's output projection (to_out weight and bias) starts at zero, as Flamingo's zero-initialised gates: at
    // step 0 the model computes its no-retrieval twin's function (same seed, same draws: the other tensors get
    // the same values), and CCA adds to the residual stream only what training makes it add. Not an RP argument;
    // written to JSON only when true (docs/retrieval.md section 14).
    bool cca_zero_init = false;
    // The copy head (nn/copy_head.h): a per-token gate on "copy the token that followed the longest match of the
    // text so far in a neighbour CCA reads", added to the logits; tensors copy_head.bias / copy_head.weight, zero at
    // the start (the plain model's function). Needs a CCA layer. Not an RP argument; written to JSON only when true
    // (docs/retrieval.md section 17). CPU training and decoding only: the GPU paths refuse it.
    bool copy_head = false;

    std::int64_t inner_dim() const { return heads * dim_head; }
    std::int64_t rot_dim() const { return dim_head < 32 ? dim_head : 32; }   // RP: min(dim_head, MIN_DIM_HEAD)
    std::int64_t retrieved_len() const { return 2 * chunk_size; }           // neighbour + continuation
    bool enc_has_cross(std::int64_t layer1) const;                           // 1-based
    bool dec_has_cross(std::int64_t layer1) const;
    std::int64_t first_cca_layer() const;                                    // 1-based, 0 = none

    nlohmann::json to_json() const;
    // Parses and validates; `where` names the file in errors.
    static RetroConfig from_json(const nlohmann::json& j, const std::string& where);
    static RetroConfig load(const std::string& path);
    void save(const std::string& path) const;
    void validate(const std::string& where) const;
};

}  // namespace retro
