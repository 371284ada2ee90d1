// The retro-train run (train/trainer.h's train_run) as one class, declared for the files that define its parts:
// train/trainer.cpp (setup, the step loop, validation, the final files), train/trainer_device.cpp (the step on a
// backend: --device cuda / host-backend), train/trainer_checkpoint.cpp (checkpoints written, and read on --resume).
// Internal to those files, not an interface.
// provides: train_impl::Trainer, train_impl::Cursor, train_impl::num, train_impl::json_num
#pragma once
#include "train/trainer.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <random>
#include <sstream>
#include <tuple>
#include <type_traits>

#include <unistd.h>

#include "core/atomic_file.h"
#include "core/cuda_device.h"
#include "core/nccl_comm.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/interrupt_note.h"
#include "core/heap.h"
#include "core/input_stamps.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/memory_budget.h"
#include "core/output_folder.h"
#include "core/progress.h"
#include "core/threads.h"
#include "model/backend_model.h"
#include "model/config.h"
#include "model/model_flops.h"
#include "model/param_groups.h"
#include "model/params.h"
#include "model/retro.h"
#include "nn/nn_backend_cuda.h"
#include "nn/nn_backend_host.h"
#include "train/adamw.h"
#include "train/data.h"
#include "train/init_from.h"
#include "train/rank_options.h"
#include "train/train_stop.h"
#include "data/run_tokenizer.h"
#include "train/resume_checks.h"
#include "train/run_folder.h"
#include "train/train_memory.h"

namespace retro::train_impl {

namespace fs = std::filesystem;

// Data order: epoch e visits the training sequences in a Fisher-Yates permutation drawn from
// mt19937_64(seed, e); the cursor (epoch, position) is the whole RNG state a checkpoint needs.
struct Cursor {
    std::int64_t epoch = 0, pos = 0;
};

inline std::string num(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

// A metrics.jsonl value: JSON has no NaN or infinity (a diverged step's "-nan" made the line unreadable to every
// JSON reader), so those are null.
inline std::string json_num(double v) { return std::isfinite(v) ? num(v) : std::string("null"); }

class Trainer {
public:
    Trainer(const ToolContext& ctx, const TrainOptions& o) : ctx_(ctx), o_(o) {}
    void run();

private:
    std::vector<std::int64_t> next_seqs();
    double validate();
    double accumulate_step_gradients(std::vector<float>*& reduced);
    void setup_device();
    void device_upload_state();
    void device_download_state();
    double device_step_gradients();
    double fold_step_loss(const std::vector<double>& losses);
    double device_clip_and_step(double lr);
    void check_ranks_agree(std::int64_t step);
    void save_checkpoint(std::int64_t step);
    std::int64_t load_checkpoint(const std::string& dir);
    void append_metrics(const std::string& line);
    void setup_groups();
    std::string provenance_fields() const;
    // --fused-attention / --no-fused-attention, else on in the bf16 mode (docs/gpu.md, session 14)
    bool fused_attention() const { return o_.fused_attention.value_or(o_.dtype == "bf16"); }

    const ToolContext& ctx_;
    TrainOptions o_;
    RetroConfig config_;
    std::unique_ptr<RetroModel<float>> model_;
    std::unique_ptr<AdamW<float>> opt_;
    std::unique_ptr<RetroData> data_;
    Cursor cursor_;
    std::vector<bool> drop_;   // --retrieval-dropout: which sequences of the last next_seqs() read no neighbours
    std::vector<std::int64_t> epochs_;   // the epoch each sequence of the last next_seqs() was drawn in
    std::int64_t step_ = 0;              // the optimizer step being made (1-based), for --oracle-until
    // > 0: the run was resumed from a checkpoint that records no neighbour continuation rule (data/chunk_db.h), so its
    // steps before this one read the older rule; carried by every later checkpoint and the manifest
    std::int64_t continuation_from_step_ = 0;
    std::int64_t metrics_missing_ = 0;   // steps without a metrics.jsonl line, as the resume found them (a gap said once)
    // The lines of what a run will train (parameters, memory, init): said once it is known to train, not before a
    // --resume's "already complete; nothing to resume" (which printed them first: a new user's pass, session 54).
    std::vector<std::string> start_lines_;
    void start_lines_say() {
        for (const auto& line : start_lines_) log_info(line);
        start_lines_.clear();
    }
    void make_training_batch(const std::vector<std::int64_t>& seqs, RetroBatch& batch) const;
    // One step's micro-batches a = 0 .. --grad-accum - 1: every rank draws all of them from the data cursor (so the
    // cursor moves alike on every rank) and builds only its own, a = R, R + N, ..., each handed to
    // on_batch(j = a / N, batch) in order (the CPU and the backend step).
    template <class OnBatch>
    void for_each_own_micro_batch(OnBatch&& on_batch) {
        const int N = dist_->size(), R = dist_->rank();
        RetroBatch batch;
        for (std::int64_t a = 0; a < o_.grad_accum; a++) {
            const auto seqs = next_seqs();
            if (a % N != R) continue;
            make_training_batch(seqs, batch);
            on_batch(a / N, batch);
        }
    }
    std::vector<std::int64_t> order_;
    std::int64_t order_epoch_ = -1;
    std::vector<std::uint8_t> trainable_;   // per layout entry
    std::string train_only_;                // canonical group list, "cca,encoder,decoder" when all train
    std::int64_t trainable_count_ = 0;
    InitFromInfo init_;                     // weights empty without --init-from
    Distributed* dist_ = nullptr;
    std::vector<float> acc_;                   // summed gradients (when more than one micro-batch is summed)
    std::vector<std::vector<float>> parts_;   // --reduce deterministic: this rank's micro-batch gradients
    // --device cuda / host-backend: the model and optimizer state in the backend's memory (destroyed in reverse)
    std::unique_ptr<CudaStreamOwner> stream_;
    std::unique_ptr<nn::NnBackend> backend_;
    std::unique_ptr<BackendRetroModel> dmodel_;
    nn::BackendBuffer d_acc_, d_m_, d_v_, d_decay_;   // summed gradients; AdamW moments and decay flags (packed)
    float* reduced_ = nullptr;                        // the step's summed gradients (d_acc_ or the model's)
    std::unique_ptr<NcclComm> nccl_;                  // several ranks' GPUs (or --reduce nccl on one)
    bool mfu_ = false;          // --device cuda: metrics carry "mfu" (model FLOPs / dense bf16 peak, or "n/a")
    double peak_flops_ = 0;
};

}  // namespace retro::train_impl
