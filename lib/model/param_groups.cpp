#include "model/param_groups.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "core/error.h"

namespace retro {

namespace {
constexpr ParamGroup ORDER[] = {ParamGroup::CCA, ParamGroup::ENCODER, ParamGroup::COPY, ParamGroup::DECODER};

// "decoder.layers.<digits>.1." starts a CCA block (RP: Residual(PreNorm(ChunkedCrossAttention)) at index 1).
bool is_cca(const std::string& n) {
    const std::string p = "decoder.layers.";
    if (n.compare(0, p.size(), p) != 0) return false;
    std::size_t i = p.size();
    const std::size_t digits = i;
    while (i < n.size() && std::isdigit(static_cast<unsigned char>(n[i]))) i++;
    return i > digits && n.compare(i, 3, ".1.") == 0;
}
}  // namespace

ParamGroup param_group(const std::string& n) {
    if (n.compare(0, 8, "encoder.") == 0) return ParamGroup::ENCODER;
    if (is_cca(n)) return ParamGroup::CCA;
    if (n.compare(0, 10, "copy_head.") == 0) return ParamGroup::COPY;
    return ParamGroup::DECODER;
}

const char* param_group_name(ParamGroup g) {
    switch (g) {
        case ParamGroup::CCA: return "cca";
        case ParamGroup::ENCODER: return "encoder";
        case ParamGroup::COPY: return "copy";
        default: return "decoder";
    }
}

std::vector<std::string> param_group_names() {
    std::vector<std::string> names;
    for (auto g : ORDER) names.emplace_back(param_group_name(g));
    return names;
}

std::string param_group_list() {
    std::string s;
    for (const std::string& name : param_group_names()) s += (s.empty() ? "" : ", ") + name;
    return s;
}

std::vector<ParamGroup> param_groups_parse(const std::string& list, const std::string& where) {
    std::vector<ParamGroup> seen;
    std::size_t b = 0;
    while (b <= list.size()) {
        std::size_t e = list.find(',', b);
        if (e == std::string::npos) e = list.size();
        const std::string name = list.substr(b, e - b);
        bool known = false;
        for (auto g : ORDER)
            if (name == param_group_name(g)) {
                known = true;
                if (std::find(seen.begin(), seen.end(), g) != seen.end())   // (as every tool's list options refuse)
                    user_error_in(where, "names \"" + name + "\" twice", "give each group once");
                seen.push_back(g);
            }
        if (!known)
            user_error_in(where, name.empty() ? "has an empty group name" : "unknown group \"" + name + "\"",
                          "valid groups: " + param_group_list());
        b = e + 1;
    }
    std::vector<ParamGroup> out;
    for (auto g : ORDER)
        if (std::find(seen.begin(), seen.end(), g) != seen.end()) out.push_back(g);
    return out;
}

std::string param_groups_string(const std::vector<ParamGroup>& groups) {
    std::string s;
    for (auto g : groups) s += std::string(s.empty() ? "" : ",") + param_group_name(g);
    return s;
}

std::vector<std::uint8_t> param_trainable(const ParamLayout& layout, const std::vector<ParamGroup>& groups) {
    std::vector<std::uint8_t> t;
    for (const auto& e : layout.entries())
        t.push_back(std::find(groups.begin(), groups.end(), param_group(e.name)) != groups.end() ? 1 : 0);
    return t;
}

std::int64_t param_backward_block(const std::string& name, const RetroConfig& c) {
    const std::string dec = "decoder.layers.";
    if (name.compare(0, 8, "encoder.") == 0) {
        const std::int64_t f = c.first_cca_layer();   // 1-based, 0 = no CCA: the encoder never runs
        return f > 0 ? 3 * (f - 1) + 2 : std::numeric_limits<std::int64_t>::max();
    }
    if (name.compare(0, dec.size(), dec) == 0) {
        const std::size_t dot = name.find('.', dec.size());
        const std::int64_t i = std::stoll(name.substr(dec.size(), dot - dec.size()));
        return 3 * i + 1 + (name[dot + 1] - '0');   // sub-block 0 attention, 1 CCA, 2 feed-forward
    }
    if (name == "decoder.norm_out.gamma" || name.compare(0, 10, "to_logits.") == 0 ||
        name.compare(0, 10, "copy_head.") == 0)
        return 3 * c.dec_depth + 1;
    return 0;   // token_emb, pos_emb, to_decoder_model_dim
}

BackwardSkips param_backward_skips(const ParamLayout& layout, const RetroConfig& config,
                                   const std::vector<std::uint8_t>& per_entry) {
    const auto& es = layout.entries();
    RETRO_CHECK(per_entry.size() == es.size(), "set_trainable: ", per_entry.size(), " flags for ", es.size(),
                " tensors");
    BackwardSkips b;
    b.lowest_trainable = std::numeric_limits<std::int64_t>::max();
    b.head_trainable = b.encoder_trainable = false;
    for (std::size_t t = 0; t < es.size(); t++) {
        if (!per_entry[t]) continue;
        b.lowest_trainable = std::min(b.lowest_trainable, param_backward_block(es[t].name, config));
        if (es[t].name.compare(0, 10, "to_logits.") == 0) b.head_trainable = true;
        if (es[t].name.compare(0, 8, "encoder.") == 0) b.encoder_trainable = true;
    }
    return b;
}

}  // namespace retro
