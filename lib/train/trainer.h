// The training loop behind `retro-train` (issue 6): AdamW (no decay on tensors with < 2 dims), linear warmup
// then cosine decay to min_lr_ratio * lr, global-norm gradient clipping, gradient accumulation, optional
// no-retrieval baseline, validation on held-out documents, metrics.jsonl, and checkpoints
// (weights + optimizer + data cursor/RNG + step, a DONE marker written last) from which --resume continues
// bit-exactly (same binary and thread count).
// Retro-fitting (RETRO paper §4.2): --init-from takes the step-0 weights from a trained run (train/init_from.h)
// and --train-only freezes every parameter group not listed (model/param_groups.h): frozen tensors get no
// AdamW update and the clipping norm counts the trainable tensors only.
// Data-parallel (issue 20; core/distributed.h): under mpirun/srun with N ranks, the --grad-accum micro-batches
// of each step are dealt round-robin (micro-batch a to rank a % N; --grad-accum must be a multiple of N), so the
// global batch, data order and schedule do not depend on N; gradients are summed over ranks (--reduce fast:
// MPI's all-reduce; deterministic: in micro-batch order, byte for byte a 1-process run), every rank keeps the
// same weights and optimizer, rank 0 alone writes. Accumulation is always a sum of separately computed
// micro-batch gradients, in order (never backward() adding into a non-zero buffer).
// --device cuda (issue 21): the same loop with the model, gradients, AdamW moments and update on the GPU
// (model/backend_model.h over the CUDA NnBackend); the host keeps the data order and the checkpoint files, which
// are the CPU run's formats, so a run moves between devices with --resume. The memory the GPU needs is computed
// before the first step and a too-large configuration is refused in one line.
// Run folder: config.json, metrics.jsonl, checkpoints/step_XXXXXXXX/{model,optimizer}.safetensors +
// state.json + DONE, model.safetensors (final weights), manifest.json (written last).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tool_context.h"

namespace retro {

struct TrainOptions {
    std::string db, neighbours, config, out;
    std::int64_t steps = 1000;
    std::uint64_t seed = 1;
    std::int64_t batch_size = 8;       // sequences per micro-batch
    std::int64_t grad_accum = 1;       // micro-batches per optimizer step
    double lr = 3e-4;
    double min_lr_ratio = 0.1;         // cosine floor, as a fraction of lr
    std::int64_t warmup = 100;         // linear warmup steps
    double weight_decay = 0.1;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    double clip = 1.0;                 // max global gradient norm (0 = off)
    double val_fraction = 0.05;        // share of documents held out
    double train_docs_fraction = 1;    // share of the other documents trained on (the rest: neighbours only)
    std::int64_t val_every = 100;      // steps between validations (0 = only at the end)
    std::int64_t val_batches = 4;
    std::int64_t checkpoint_every = 100;
    std::int64_t keep_checkpoints = 0; // complete checkpoints kept, the newest ones (0 = all)
    bool no_retrieval = false;
    double retrieval_dropout = 0;      // share of training sequences that read no neighbours (every one masked,
                                       // CCA sees only its null key); drawn per (seed, epoch, sequence)
    double oracle_neighbours = 0;      // share of training chunks that read themselves (+ continuation) in one
                                       // neighbour slot, drawn per (seed, epoch, sequence, chunk); eval never does
    bool oracle_splice = false;        // the oracle's continuation turns into the slot's retrieved tokens at a cut
    bool oracle_hindsight = false;     // the oracle is the next chunk's real neighbour, read one chunk earlier
    std::int64_t oracle_until = 0;     // the oracle share falls linearly to 0 after this step (0 = constant;
                                       // oracle_share in data.h): teach the copy, then train on real neighbours
    double retrieval_lr_scale = 1;     // the learning rate (and decoupled decay) of CCA and the encoder: lr x this
    bool resume = false;
    bool force = false;
    std::int64_t stop_after = 0;       // testing: stop after this many steps as if killed (0 = off)
    std::string init_from;             // base run, checkpoint folder or .safetensors ("" = fresh init from seed)
    std::string train_only;            // comma list of groups (cca, encoder, decoder); "" = all train
    std::string reduce = "fast";       // across ranks: fast (MPI all-reduce) or deterministic (micro-batch order)
    std::string device = "cpu";        // cpu, cuda (model/backend_model.h over the CUDA NnBackend), or
                                       // host-backend (testing: the GPU path's code over the CPU ops)
    std::string dtype = "fp32";        // with --device cuda: fp32, or bf16 (the linear layers' GEMMs on bf16-rounded
                                       // inputs, fp32 accumulation; fp32 master weights; nn/nn_backend.h GemmInputs)
    // NnBackend::set_fused_attention (the flash-style kernels): unset = on with dtype bf16 (the default since they
    // passed on an H100, docs/gpu.md), off with fp32; true with fp32 is refused
    std::optional<bool> fused_attention;
    int kill_rank = -1;                // testing: this rank kills itself (SIGKILL) after optimizer step kill_step
    std::int64_t kill_step = 0;
};

// Learning rate at optimizer step `step` (0-based).
double train_lr_at(const TrainOptions& o, std::int64_t step);
// The factor the gradients are scaled by before AdamW (--clip, the global norm over the trainable tensors): torch's
// clip_grad_norm_, clip / (norm + 1e-6) where the norm exceeds clip, else 1 (and 1 for clip 0: no clipping). The CPU
// and the device step both take it.
float train_clip_scale(double norm, double clip);
// Epoch `epoch`'s order of the training sequences: a Fisher-Yates shuffle drawn from mt19937_64(seed, epoch), so
// (epoch, position) is all the data order's state a checkpoint needs.
std::vector<std::int64_t> train_epoch_order(const std::vector<std::int64_t>& seqs, std::uint64_t seed, std::int64_t epoch);

void train_run(const ToolContext& ctx, const TrainOptions& opts);

}  // namespace retro
