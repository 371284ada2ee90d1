// retro-train's step on a backend (--device cuda, host-backend): the model and optimizer state in the backend's
// memory, the micro-batches' gradients summed there (and over the ranks' GPUs with NCCL), clipping and AdamW.
#include "train/trainer_impl.h"

namespace retro::train_impl {

// The backend, the model on it and the optimizer's device buffers, after the GPU's memory is checked.
void Trainer::setup_device() {
    if (o_.device != "cuda" && o_.device != "host-backend")
        user_error_in("--device", "\"" + o_.device + "\" is not a device", "use cpu or cuda");
    if (dist_->active() && o_.reduce == "deterministic")
        user_error_in("--reduce", "deterministic sums micro-batches in order on the CPU path; GPUs reduce with NCCL",
                      "use --reduce fast (NCCL's all-reduce) with --device cuda, or train on the CPU");
    if (dist_->active() && o_.device == "host-backend")
        user_error_in("--device", "host-backend runs one process");
    const std::int64_t k = o_.no_retrieval ? 0 : data_->neighbours_per_chunk();
    const std::string what = "training " + o_.config + " on micro-batches of " + std::to_string(o_.batch_size) +
                             " x " + std::to_string(data_->seq_len()) + " tokens";
    const std::string fix = "a smaller --batch-size (with --grad-accum for the same global batch) or a smaller model";
    // the backend first, in its mode (its attention's saved floats size the arena: train_device_bytes), then the
    // memory check, before anything large is allocated
    if (o_.device == "cuda") {
        cuda_require("--device", "retro-train");   // (checked in run() already, with its fix)
        if constexpr (kCudaBuilt) {
            stream_ = std::make_unique<CudaStreamOwner>();
            backend_ = nn::cuda_nn_backend(stream_->get());
        }
    } else {
        backend_ = std::make_unique<nn::HostNnBackend>();
    }
    if (o_.dtype == "bf16") backend_->set_gemm_inputs(nn::NnBackend::GemmInputs::bf16);
    backend_->set_fused_attention(fused_attention());
    const auto need = train_device_bytes(config_, o_.batch_size, data_->seq_len(), k, config_.retrieved_len(),
                                         !o_.no_retrieval, o_.grad_accum / dist_->size(), trainable_count_, o_.dtype == "bf16",
                                         backend_.get(),
                                         param_backward_skips(model_->layout(), config_, trainable_).head_trainable);
    if (o_.device == "cuda") {
        if constexpr (kCudaBuilt) {
            device_memory_require("--batch-size", need, cuda_free_bytes(), what, fix);
            if (dist_->active() || o_.reduce == "nccl") {   // gradients summed over the ranks' GPUs
                nccl_ = nccl_comm_create(*dist_, "--reduce");
                log_info(cat("NCCL ", nccl_->version(), ": rank ", nccl_->rank(), " of ", nccl_->size()));
            }
            mfu_ = true;
            peak_flops_ = cuda_dense_bf16_peak_flops(cuda_device_name());
            log_info(cat("device: ", cuda_device_name(), ", ", memory_format_bytes(double(need.total())),
                         " planned (activations ", memory_format_bytes(double(need.arena)), ")"));
        }
    } else {
        memory_require("--batch-size", double(need.total()), what, fix);
    }
    dmodel_ = std::make_unique<BackendRetroModel>(config_, *backend_);
    dmodel_->set_trainable(trainable_);
    const std::int64_t P = model_->layout().total(), T = opt_->trainable_count();
    // the summed gradients, where this rank runs more than one micro-batch a step (one sums in its own gradients)
    if (o_.grad_accum / dist_->size() > 1) d_acc_ = nn::BackendBuffer(*backend_, static_cast<std::size_t>(P) * sizeof(float));
    d_m_ = nn::BackendBuffer(*backend_, static_cast<std::size_t>(T) * sizeof(float));
    d_v_ = nn::BackendBuffer(*backend_, static_cast<std::size_t>(T) * sizeof(float));
    d_decay_ = nn::BackendBuffer(*backend_, static_cast<std::size_t>(T));
    backend_->upload(d_decay_.get(), opt_->decay_flags().data(), static_cast<std::size_t>(T));
}

// Host -> device: the weights (fresh, --init-from or a checkpoint's) and the AdamW moments.
void Trainer::device_upload_state() {
    dmodel_->upload_params(model_->params());
    backend_->upload(d_m_.get(), opt_->moment1().data(), opt_->moment1().size() * sizeof(float));
    backend_->upload(d_v_.get(), opt_->moment2().data(), opt_->moment2().size() * sizeof(float));
}

// Device -> host before a checkpoint or the final weights are written (the files are the CPU run's).
void Trainer::device_download_state() {
    dmodel_->download_params(model_->params());
    backend_->download(opt_->moment1().data(), d_m_.get(), opt_->moment1().size() * sizeof(float));
    backend_->download(opt_->moment2().data(), d_v_.get(), opt_->moment2().size() * sizeof(float));
}

// accumulate_step_gradients on the backend: this rank's micro-batches (a = R, R + N, ...; every rank walks the data
// cursor over all of them), each from zeroed gradients, summed in order on the device, then over the ranks' GPUs with
// NCCL's all-reduce. Points reduced_ at the summed buffer; returns the step's loss (folded in micro-batch order).
double Trainer::device_step_gradients() {
    const std::int64_t A = o_.grad_accum, m = A / dist_->size(), P = model_->layout().total();
    std::vector<double> losses(static_cast<std::size_t>(m));
    for_each_own_micro_batch([&](std::int64_t j, const RetroBatch& batch) {
        dmodel_->zero_grad();
        losses[static_cast<std::size_t>(j)] = dmodel_->forward(batch) / static_cast<double>(A);
        dmodel_->backward(1.0f / static_cast<float>(A));
        if (m == 1) return;
        if (j == 0) backend_->copy(d_acc_.get(), dmodel_->grads(), static_cast<std::size_t>(P) * sizeof(float));
        else backend_->residual_add(d_acc_.f(), dmodel_->grads(), P);
    });
    reduced_ = m > 1 ? d_acc_.f() : dmodel_->grads();
    if constexpr (kCudaBuilt)
        if (nccl_) nccl_->allreduce_sum(reduced_, P, stream_->get());
    return fold_step_loss(losses);
}

// Global-norm clipping over the trainable ranges and the AdamW update, on the backend. Returns the norm.
double Trainer::device_clip_and_step(double lr) {
    float* grads = reduced_;
    double sq = 0;
    for (const auto& [b, e] : opt_->ranges()) sq += backend_->sum_squares(grads + b, e - b);
    const double norm = std::sqrt(sq);
    if (const float s = train_clip_scale(norm, o_.clip); s != 1.0f)
        for (const auto& [b, e] : opt_->ranges()) backend_->scale(grads + b, s, e - b);
    const auto a = opt_->next_step_scalars(lr);
    std::int64_t packed = 0;
    const auto* decay = static_cast<const std::uint8_t*>(d_decay_.get());
    for (std::size_t r = 0; r < opt_->ranges().size(); r++) {
        const auto [b, e] = opt_->ranges()[r];
        backend_->adamw_update(dmodel_->params() + b, grads + b, d_m_.f() + packed, d_v_.f() + packed, decay + packed,
                               e - b, opt_->range_scalars(a, r, lr));
        packed += e - b;
    }
    return norm;
}

}  // namespace retro::train_impl
