// retro-train: train a RETRO model (RETRO-pytorch 0.3.9's architecture) on a chunk database and its
// neighbours, with checkpoints, metrics.jsonl and --resume (lib/train/trainer.h); `eval` is RETRO's
// evaluation (loss, perplexity, bpb by overlap; lib/train/eval.h), `plot` draws the curves (lib/train/plot.h).
// --init-from and --train-only retro-fit a trained model (docs/model.md "Retro-fitting").
#include "core/error.h"
#include "model/param_groups.h"
#include "train/plot.h"
#include "train/trainer.h"

#include "deprecated_option.h"
#include "tool_main.h"
#include "train_eval_command.h"

int main(int argc, char** argv) {
    return retro::tool_main(
        "retro-train", "Train a RETRO model on db/ + knn/ (or without retrieval, the baseline); eval; plot.", argc,
        argv, [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
            static retro::TrainOptions o;
            static std::string plot_run, plot_out;
            app.add_option("--db", o.db, "Chunk database folder (retro-chunk)");
            app.add_option("--knn", o.neighbours, "Neighbours folder (retro-knn) holding neighbours.npy");
            // the old spelling, for `eval` too: eval does not know it, so it falls through to here (a hidden
            // option of eval's own would add a blank line to eval's --help)
            retro::add_deprecated_option(app, "--neighbours", "--knn", o.neighbours, ctx, "the neighbours folder");
            retro::model_config_option(app.add_option("--config", o.config,
                           "Model config: a .json file, or a shipped config by name (demo, tiny, retro-172m, ...: "
                           "examples/configs/, installed in share/retrokit/configs/)"));
            app.add_option("--out", o.out, "Run folder (checkpoints, metrics.jsonl, model.safetensors)");
            app.add_option("--steps", o.steps, "Optimizer steps")->capture_default_str();
            app.add_option("--seed", o.seed, "Seed of the initial weights and the data order")->transform(retro::non_negative_integer())->capture_default_str();
            app.add_option("--batch-size,--batch", o.batch_size, "Sequences per micro-batch")->capture_default_str();
            app.add_option("--grad-accum", o.grad_accum, "Micro-batches per optimizer step")->capture_default_str();
            app.add_option("--lr", o.lr, "Peak learning rate")->capture_default_str();
            app.add_option("--min-lr-ratio", o.min_lr_ratio, "Cosine floor as a fraction of --lr")->capture_default_str();
            app.add_option("--warmup", o.warmup, "Linear warmup steps")->capture_default_str();
            app.add_option("--weight-decay", o.weight_decay, "AdamW decay (tensors with >= 2 dims)")->capture_default_str();
            app.add_option("--beta1", o.beta1, "AdamW beta1")->capture_default_str();
            app.add_option("--beta2", o.beta2, "AdamW beta2")->capture_default_str();
            app.add_option("--eps", o.eps, "AdamW epsilon")->capture_default_str();
            app.add_option("--clip", o.clip, "Max global gradient norm (0 = off)")->capture_default_str();
            app.add_option("--val-fraction", o.val_fraction, "Share of documents held out for validation")->capture_default_str();
            app.add_option("--train-docs-fraction", o.train_docs_fraction,
                           "Train on this share of the non-validation documents (a fixed hash); the rest stay in the "
                           "database as neighbours only, text the model never trains on (RETRO's setting; "
                           "docs/retrieval.md)")
                ->check(CLI::Range(0.0, 1.0))->capture_default_str();
            app.add_option("--val-every", o.val_every, "Steps between validations (0 = at the end only)")->capture_default_str();
            app.add_option("--val-batches", o.val_batches, "Validation micro-batches")->capture_default_str();
            app.add_option("--checkpoint-every", o.checkpoint_every, "Steps between checkpoints")->capture_default_str();
            app.add_option("--keep-checkpoints", o.keep_checkpoints,
                           "Keep only the newest N complete checkpoints (each holds the weights and AdamW's two moments: "
                           "3x the model's fp32 bytes); 0 keeps them all")
                ->capture_default_str();
            app.add_flag("--no-retrieval", o.no_retrieval, "Train the same model without neighbours (baseline)");
            app.add_option("--retrieval-dropout", o.retrieval_dropout,
                           "Share of training sequences that read no neighbours (all masked): the decoder keeps "
                           "modelling text alone while CCA learns to read (docs/retrieval.md)")
                ->check(CLI::Range(0.0, 1.0))->capture_default_str();
            app.add_option("--oracle-neighbours", o.oracle_neighbours,
                           "Share of training chunks that read their own text and continuation in one neighbour "
                           "slot, as a perfect retriever would: teaches CCA to copy; evaluation and generation "
                           "never do this (docs/retrieval.md)")
                ->check(CLI::Range(0.0, 1.0))->capture_default_str();
            app.add_flag("--oracle-splice", o.oracle_splice,
                         "With --oracle-neighbours: each oracle's continuation is the next chunk only up to a cut "
                         "drawn per chunk, the retrieved neighbour's tokens after it, as a real match that ends");
            app.add_flag("--oracle-hindsight", o.oracle_hindsight,
                         "With --oracle-neighbours: the oracle slot reads the next chunk's retrieved neighbour (one "
                         "chunk earlier, at its match) instead of the chunk itself: real text found with hindsight");
            app.add_option("--oracle-until", o.oracle_until,
                           "With --oracle-neighbours P: the share falls linearly from P at the first step to 0 after "
                           "this step, so the run ends on real neighbours only (0 = P throughout)")
                ->capture_default_str();
            app.add_option("--retrieval-lr-scale", o.retrieval_lr_scale,
                           "The learning rate of CCA and the encoder (the layers that read neighbours) is the "
                           "schedule's times this, as a torch param group with its own lr (docs/retrieval.md)")
                ->capture_default_str();
            app.add_flag("--resume", o.resume, "Continue from the newest complete checkpoint in --out");
            app.add_flag("--force", o.force, "Start over in an --out that holds a run");
            app.add_option("--init-from", o.init_from,
                           "Retro-fit: start from a trained run's weights (run folder, checkpoint folder, "
                           ".safetensors, or a RETRO-pytorch state_dict saved with torch.save); tensors the base "
                           "lacks keep the --seed init, the decoder must match");
            retro::comma_list_of(app.add_option("--train-only", o.train_only,
                                                "Train only these groups, freeze the rest (comma list of " +
                                                    retro::param_group_list() + "; token embedding and head are in decoder)"),
                                 retro::param_group_names());
            app.add_option("--reduce", o.reduce,
                           "Under mpirun/srun: sum gradients over ranks with MPI's all-reduce (fast; NCCL's with --device "
                           "cuda) or in micro-batch order (deterministic, CPU: the same bytes as one process with the same "
                           "--grad-accum); nccl: NCCL even on one GPU")
                ->check(CLI::IsMember({"fast", "deterministic", "nccl"}))->capture_default_str();
            app.add_option("--stop-after", o.stop_after, "Testing: stop after this many steps, as if killed")->group("");
            app.add_option("--kill-rank", o.kill_rank, "Testing: this rank kills itself after --kill-step")->group("");
            app.add_option("--kill-step", o.kill_step, "Testing: the optimizer step --kill-rank dies after")->group("");
            app.add_option("--device", o.device,
                           "cpu, or cuda: the model, gradients and AdamW on the GPU (one GPU per rank under mpirun/srun; "
                           "docs/gpu.md); host-backend: the GPU path's code on the CPU ops (tests)")
                ->capture_default_str()
                ->check(CLI::IsMember({"cpu", "cuda", "host-backend"}));
            app.add_option("--dtype", o.dtype,
                           "With --device cuda: fp32, or bf16 (linear layers on the tensor cores from bf16-rounded "
                           "inputs, fp32 accumulation and master weights)")
                ->capture_default_str()
                ->check(CLI::IsMember({"fp32", "bf16"}));
            auto* fused = app.add_flag_function(
                "--fused-attention", [](std::int64_t) { o.fused_attention = true; },
                "With --dtype bf16 (on by default there): the decoder's causal self-attention as one fused "
                "flash-style kernel on the tensor cores (bf16 softmax products)")
                ->disable_flag_override();
            app.add_flag_function("--no-fused-attention", [](std::int64_t) { o.fused_attention = false; },
                                  "With --device cuda: fp32 GEMMs around softmax rows instead of the fused kernel")
                ->disable_flag_override()
                ->excludes(fused);
            app.add_option("--threads", ctx.threads, "Threads (0 = all cores)");
            retro::add_no_verify_flag(app, ctx.verify_inputs);

            static retro::TrainEvalCommand eval;
            auto* ev = retro::train_eval_subcommand_add(app, ctx, eval);

            auto* pl = app.add_subcommand("plot", "Write RUN/curves.png (training and validation loss) with gnuplot");
            pl->add_option("run", plot_run, "Run folder")->required();
            pl->add_option("--out", plot_out, "PNG path (default RUN/curves.png)");

            return [&ctx, &app, ev, pl] {
                if (*ev) {
                    retro::train_eval_command_run(ctx, eval, o.neighbours);   // eval --neighbours DIR: the parent's
                } else if (*pl) {
                    retro::train_plot(plot_run, plot_out);
                } else {
                    if (o.db.empty() || o.config.empty() || o.out.empty())
                        retro::refuse_usage(app, "--db, --config and --out are required to train: retro-train --db DB "
                                                      "--config CONFIG --out RUN [--knn KNN]");
                    retro::train_run(ctx, o);
                }
            };
        });
}
