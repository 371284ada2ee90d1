#include "model/params.h"

#include <cmath>
#include <random>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "core/torch_pickle.h"
#include "core/weights_file.h"
#include "nn/copy_head.h"

namespace retro {

void ParamLayout::add(const std::string& name, std::vector<std::int64_t> shape, int init, double scale) {
    ParamEntry e;
    e.name = name;
    e.shape = std::move(shape);
    e.numel = 1;
    for (auto d : e.shape) e.numel *= d;
    e.offset = total_;
    e.init = init;
    e.scale = scale;
    total_ += e.numel;
    index_[name] = entries_.size();
    entries_.push_back(std::move(e));
}

const ParamEntry& ParamLayout::at(const std::string& name) const {
    auto it = index_.find(name);
    RETRO_CHECK(it != index_.end(), "no parameter named ", name);
    return entries_[it->second];
}

ParamLayout::ParamLayout(const RetroConfig& c) {
    const std::int64_t Ce = c.enc_dim, Cd = c.dec_dim, HD = c.inner_dim(), V = c.num_tokens;
    // `gain` 0 draws the values (the generator's stream stays that of gain 1) and writes zeros.
    auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in, bool bias, double gain = 1) {
        const double bound = gain / std::sqrt(static_cast<double>(in));   // U(+-1/sqrt(fan_in)), weight and bias
        add(name + ".weight", {out, in}, PARAM_INIT_LINEAR_WEIGHT, bound);
        if (bias) add(name + ".bias", {out}, PARAM_INIT_LINEAR_BIAS, bound);
    };
    auto attention = [&](const std::string& p, std::int64_t dim, std::int64_t ctx_dim, bool null_kv,
                         double out_gain = 1) {
        if (null_kv) {
            add(p + "null_k", {HD}, PARAM_INIT_NORMAL);
            add(p + "null_v", {HD}, PARAM_INIT_NORMAL);
        }
        linear(p + "to_q", HD, dim, false);
        linear(p + "to_k", HD, ctx_dim, false);
        linear(p + "to_v", HD, ctx_dim, false);
        linear(p + "to_out", dim, HD, true, out_gain);
    };
    auto ff = [&](const std::string& p, std::int64_t dim) {
        linear(p + "ff.0", 4 * dim, dim, true);
        linear(p + "ff.3", dim, 4 * dim, true);
    };
    // Tied (config.h): N(0, 1/dec_dim) as GPT-2's small embeddings, so that the head's logits start at the untied
    // head's scale and Adam's steps move the shared table as fast, relative to its size, as an untied head.
    // pos_emb the same, or position would drown the token in the decoder's input.
    const double emb_std = c.tie_embeddings ? 1.0 / std::sqrt(static_cast<double>(Cd)) : 1.0;
    add("token_emb.weight", {V, Ce}, PARAM_INIT_NORMAL, emb_std);
    add("pos_emb.weight", {c.max_seq_len, Ce}, PARAM_INIT_NORMAL, emb_std);
    if (Ce != Cd) linear("to_decoder_model_dim", Cd, Ce, true);
    for (std::int64_t i = 0; i < c.enc_depth; i++) {
        const std::string p = "encoder.layers." + std::to_string(i) + ".";
        attention(p + "0.fn.", Ce, Ce, false);
        add(p + "0.norm.gamma", {Ce}, PARAM_INIT_ONES);
        if (c.enc_has_cross(i + 1)) {
            attention(p + "1.fn.", Ce, Cd, false);
            add(p + "1.norm.gamma", {Ce}, PARAM_INIT_ONES);
        }
        ff(p + "2.fn.", Ce);
        add(p + "2.norm.gamma", {Ce}, PARAM_INIT_ONES);
    }
    add("encoder.norm_out.gamma", {Ce}, PARAM_INIT_ONES);
    linear("encoder.project_out", Cd, Ce, true);
    for (std::int64_t i = 0; i < c.dec_depth; i++) {
        const std::string p = "decoder.layers." + std::to_string(i) + ".";
        attention(p + "0.fn.", Cd, Cd, false);
        add(p + "0.norm.gamma", {Cd}, PARAM_INIT_ONES);
        if (c.dec_has_cross(i + 1)) {
            attention(p + "1.fn.cross_attn.", Cd, Cd, true, c.cca_zero_init ? 0.0 : 1.0);   // config.h
            add(p + "1.norm.gamma", {Cd}, PARAM_INIT_ONES);
        }
        ff(p + "2.fn.", Cd);
        add(p + "2.norm.gamma", {Cd}, PARAM_INIT_ONES);
    }
    add("decoder.norm_out.gamma", {Cd}, PARAM_INIT_ONES);
    if (!c.tie_embeddings)
        linear("to_logits", V, Cd, true);
    else   // the head's weight is token_emb.weight (layer_params.cpp); its bias as nn.Linear(Cd, V)'s
        add("to_logits.bias", {V}, PARAM_INIT_LINEAR_BIAS, 1.0 / std::sqrt(static_cast<double>(Cd)));
    if (c.copy_head) {   // nn/copy_head.h: zeros (ONES at value 0 draws nothing: the other tensors keep their values)
        add("copy_head.bias", {nn::kCopyBuckets}, PARAM_INIT_ONES, 0.0);
        add("copy_head.weight", {nn::kCopyBuckets, Cd}, PARAM_INIT_ONES, 0.0);
    }
}

template <typename T>
void params_init(std::vector<T>& data, const ParamLayout& layout, std::uint64_t seed) {
    data.assign(static_cast<std::size_t>(layout.total()), T(0));
    std::mt19937_64 rng(seed);
    auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };   // [0, 1)
    auto normal = [&] {   // Box-Muller, portable across standard libraries
        double u1 = uniform(), u2 = uniform();
        if (u1 < 1e-300) u1 = 1e-300;
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
    };
    const auto& es = layout.entries();
    for (std::size_t i = 0; i < es.size(); i++) {
        const auto& e = es[i];
        T* p = data.data() + e.offset;
        for (std::int64_t j = 0; j < e.numel; j++) {
            switch (e.init) {
                case PARAM_INIT_NORMAL: p[j] = static_cast<T>(normal() * e.scale); break;
                case PARAM_INIT_ONES: p[j] = static_cast<T>(e.scale); break;
                default: p[j] = static_cast<T>((2 * uniform() - 1) * e.scale + 0.0); break;   // + 0: no -0 at scale 0
            }
        }
    }
}

namespace {
std::vector<float> rp_inv_freq(const RetroConfig& c) {
    const std::int64_t R = c.rot_dim();
    std::vector<float> f;
    for (std::int64_t j = 0; j < R; j += 2) f.push_back(1.0f / std::pow(10000.0f, static_cast<float>(j) / R));
    return f;
}
const char* INV_FREQ_NAMES[] = {"encoder.rotary_pos_emb.inv_freq", "decoder.rotary_pos_emb.inv_freq"};
}  // namespace

template <typename T>
void params_save(const std::string& path, const std::vector<T>& data, const ParamLayout& layout,
                 const RetroConfig& config, const std::map<std::string, std::string>& metadata) {
    RETRO_CHECK(static_cast<std::int64_t>(data.size()) == layout.total(), "parameter buffer size");
    std::vector<float> f32(data.begin(), data.end());
    auto inv = rp_inv_freq(config);
    std::vector<TensorToWrite> ts;
    for (const auto& e : layout.entries()) ts.push_back({e.name, DType::F32, e.shape, f32.data() + e.offset});
    for (const char* n : INV_FREQ_NAMES) ts.push_back({n, DType::F32, {(std::int64_t)inv.size()}, inv.data()});
    auto meta = metadata;
    meta["format"] = "pt";
    meta["retrokit_config"] = config.to_json().dump();
    safetensors_save(path, ts, meta);
}

template <typename T>
void params_read_tensor(const std::string& path, const ParamEntry& e, const TensorView& v, T* dst) {
    if (v.dtype == DType::F32) {
        const float* s = static_cast<const float*>(v.data);
        for (std::int64_t i = 0; i < e.numel; i++) dst[i] = static_cast<T>(s[i]);
    } else if (v.dtype == DType::F64) {
        const double* s = static_cast<const double*>(v.data);
        for (std::int64_t i = 0; i < e.numel; i++) dst[i] = static_cast<T>(s[i]);
    } else if (v.dtype == DType::BF16 || v.dtype == DType::F16) {   // (a model.half() state_dict: widened exactly)
        const auto* s = static_cast<const std::uint16_t*>(v.data);
        for (std::int64_t i = 0; i < e.numel; i++)
            dst[i] = static_cast<T>(v.dtype == DType::BF16 ? bf16_to_f32(s[i]) : f16_to_f32(s[i]));
    } else {
        user_error_in(path, "tensor \"" + e.name + "\" has dtype " + dtype_name(v.dtype) + ", expected f32, f64, bf16 or f16",
                      "save the weights as floating-point tensors");
    }
    for (std::int64_t i = 0; i < e.numel; i++)
        if (!std::isfinite(static_cast<double>(dst[i])))
            user_error_in(path, "tensor \"" + e.name + "\" holds a non-finite value");
}

namespace {

// Weights saved by params_save record their config ("retrokit_config"): where it differs from `config` in anything
// but how fresh weights are drawn, the tensors can have the config's shapes (heads x dim_head, CCA's query positions,
// the neighbours' alignment) and still mean something else, so loading them is refused naming the fields. Files
// without the record (RETRO-pytorch's, torch state_dicts) are held to their names and shapes alone.
void check_saved_config(const WeightsFile& f, const RetroConfig& config) {
    const auto it = f.metadata().find("retrokit_config");
    if (it == f.metadata().end()) return;
    nlohmann::json saved;
    try {
        saved = RetroConfig::from_json(nlohmann::json::parse(it->second), f.path() + " (its recorded config)").to_json();
    } catch (const nlohmann::json::exception&) {
        user_error_in(f.path(), "has an unreadable \"retrokit_config\" metadata entry");
    }
    nlohmann::json now = config.to_json();
    for (nlohmann::json* j : {&saved, &now}) j->erase("cca_zero_init");   // (how CCA starts: not what the weights mean)
    std::set<std::string> keys;
    for (const nlohmann::json* j : {&now, &saved})
        for (const auto& item : j->items()) keys.insert(item.key());
    std::string differ;
    for (const std::string& key : keys) {
        const nlohmann::json a = saved.contains(key) ? saved[key] : nlohmann::json("(not set)");
        const nlohmann::json b = now.contains(key) ? now[key] : nlohmann::json("(not set)");
        if (a != b) differ += cat(differ.empty() ? "" : ", ", "\"", key, "\" ", a.dump(), " (the config: ", b.dump(), ")");
    }
    if (!differ.empty())
        user_error_in(f.path(), "was saved under another model config: " + differ,
                      "pass weights trained with this config (the run they came from, or its checkpoints)");
}

}  // namespace

template <typename T>
void params_load(const std::string& path, std::vector<T>& data, const ParamLayout& layout, const RetroConfig& config) {
    const WeightsFile f(path);   // .safetensors, or a torch.save state_dict (RETRO-pytorch's names)
    check_saved_config(f, config);
    const std::string prefix = f.prefix_holding(layout.entries().front().name);
    data.assign(static_cast<std::size_t>(layout.total()), T(0));
    for (const auto& e : layout.entries()) {
        if (!f.has(prefix + e.name)) {
            if (const std::string why = f.why_not(prefix + e.name); !why.empty())   // a torch file's entry it left out
                user_error_in(path, "holds \"" + e.name + "\" as " + why + ", not a tensor RetroKit reads",
                              "save the weights as plain float tensors");
            user_error_in(path, "has no tensor \"" + e.name + "\"" + weights_file_where(f),
                          "the weights were made for another model config (compare depths, widths and CCA layers)");
        }
        const TensorView& v = f.get(prefix + e.name);
        if (v.shape != e.shape) {
            // RP 0.3.9 builds 8 heads whatever its `heads` argument says (docs/model.md): a config copied from an RP
            // constructor call with heads = 4 then misses by exactly the inner width
            const bool attention = e.name.find(".to_q.") != std::string::npos || e.name.find(".to_k.") != std::string::npos ||
                                   e.name.find(".to_v.") != std::string::npos || e.name.find(".to_out.") != std::string::npos;
            bool eight_heads = attention && config.heads != 8 && v.shape.size() == e.shape.size();
            for (std::size_t i = 0; eight_heads && i < v.shape.size(); i++)
                eight_heads = v.shape[i] == e.shape[i] ||
                              (v.shape[i] == 8 * config.dim_head && e.shape[i] == config.heads * config.dim_head);
            user_error_in(path, "tensor \"" + e.name + "\" has shape " + shape_string(v.shape) + ", the config needs " +
                                    shape_string(e.shape),
                          eight_heads ? cat("the weights have 8 heads of ", config.dim_head, ", the config ", config.heads,
                                            ": RETRO-pytorch builds 8 heads whatever its `heads` says; set \"heads\": 8")
                                      : "the weights were made for another model config");
        }
        params_read_tensor(path, e, v, data.data() + e.offset);
    }
    const auto inv = rp_inv_freq(config);
    for (const auto& [full_name, view] : f.tensors()) {
        const std::string name = full_name.substr(prefix.size());
        if (layout.has(name)) continue;
        bool is_inv = false;
        for (const char* n : INV_FREQ_NAMES) is_inv = is_inv || name == n;
        if (!is_inv)
            user_error_in(path, "has an unexpected tensor \"" + quoted(name) + "\"",
                          "the weights were made for another model config (CCA or cross-attention layers differ?)");
        if (view.dtype != DType::F32 || view.numel() != static_cast<std::int64_t>(inv.size()))
            user_error_in(path, "tensor \"" + quoted(name) + "\" does not match the config's rotary dimension");
    }
}

template void params_init<float>(std::vector<float>&, const ParamLayout&, std::uint64_t);
template void params_init<double>(std::vector<double>&, const ParamLayout&, std::uint64_t);
template void params_save<float>(const std::string&, const std::vector<float>&, const ParamLayout&, const RetroConfig&,
                                 const std::map<std::string, std::string>&);
template void params_save<double>(const std::string&, const std::vector<double>&, const ParamLayout&,
                                  const RetroConfig&, const std::map<std::string, std::string>&);
template void params_read_tensor<float>(const std::string&, const ParamEntry&, const TensorView&, float*);
template void params_read_tensor<double>(const std::string&, const ParamEntry&, const TensorView&, double*);
template void params_load<float>(const std::string&, std::vector<float>&, const ParamLayout&, const RetroConfig&);
template void params_load<double>(const std::string&, std::vector<double>&, const ParamLayout&, const RetroConfig&);

}  // namespace retro
