// Implementation of train_memory.h (counts in floats, returned in bytes).
#include "train/train_memory.h"

#include "core/error.h"
#include "core/memory_budget.h"
#include "model/backend_model.h"
#include "model/params.h"

namespace retro {

double train_memory_bytes(const RetroConfig& c, std::int64_t batch, std::int64_t seq_len, bool retrieval) {
    const double P = static_cast<double>(ParamLayout(c).total());
    const double B = double(batch), T = double(seq_len), D = double(c.dec_dim), E = double(c.enc_dim);
    const double H = double(c.heads), I = double(c.inner_dim()), cs = double(c.chunk_size);
    const double k = double(c.num_neighbours), r = double(c.retrieved_len()), M = T / cs;
    double cca_layers = 0;
    for (std::int64_t l = 1; l <= c.dec_depth; ++l) cca_layers += c.dec_has_cross(l) ? 1 : 0;
    double floats = 4 * P;                                                   // params, grads, m, v
    floats += double(c.dec_depth) * (B * T * (D * 18 + I * 6) + 2 * B * H * T * T);
    floats += double(c.num_tokens) * B * T * 2;                              // logits and their gradient
    if (retrieval) {
        floats += cca_layers * (B * T * (D * 4 + I * 4) + B * M * k * r * I * 2 + 2 * B * M * H * cs * k * r);
        const double rows = B * M * k * r;                                   // encoder token rows
        floats += double(c.enc_depth) * (rows * (E * 18 + I * 6) + 2 * B * M * k * H * r * (r + cs));
    }
    return floats * 4;
}

DeviceTrainBytes train_device_bytes(const RetroConfig& c, std::int64_t batch, std::int64_t seq_len, std::int64_t k,
                                    std::int64_t r, bool retrieval, std::int64_t rank_micro_batches,
                                    std::int64_t trainable_parameters, bool bf16_gemm, const nn::NnBackend* be,
                                    bool head_trainable) {
    const std::size_t P = static_cast<std::size_t>(ParamLayout(c).total());
    DeviceTrainBytes b;
    b.weights = P * 4 * (rank_micro_batches > 1 ? 3 : 2);
    b.optimizer = static_cast<std::size_t>(trainable_parameters) * 9;
    b.arena = backend_model_plan(c, {batch, seq_len, k, r, retrieval}, be, head_trainable);
    b.scratch = backend_model_scratch_bound(c, {batch, seq_len, k, r, retrieval}, bf16_gemm, be);
    return b;
}

void device_memory_require(const std::string& option, const DeviceTrainBytes& need, std::size_t free_bytes,
                           const std::string& what, const std::string& fix) {
    if (need.total() <= free_bytes) return;
    user_error_in(option,
                  cat(what, " needs ", memory_format_bytes(double(need.total())), " on the GPU (activations ",
                      memory_format_bytes(double(need.arena)), ", scratch ", memory_format_bytes(double(need.scratch)),
                      ", weights and gradients ",
                      memory_format_bytes(double(need.weights)), ", optimizer ",
                      memory_format_bytes(double(need.optimizer)), "), the GPU has ",
                      memory_format_bytes(double(free_bytes)), " free"),
                  fix);
}

}  // namespace retro
