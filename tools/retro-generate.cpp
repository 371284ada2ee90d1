// retro-generate: sample text from a trained RETRO run, retrieving for every finished chunk
// (lib/generate/generator.h). One prompt (argument or stdin) streams its continuation to stdout;
// --prompts in.jsonl --output out.jsonl decodes many prompts together (journaled: --resume after a kill). Retrieval notes and the summary
// go to stderr (lib/generate/generate_run.h).
#include "generate/generate_run.h"

#include "tool_main.h"

int main(int argc, char** argv) {
    return retro::tool_main(
        "retro-generate",
        "Generate text from a trained RETRO run, retrieving neighbours for every finished chunk.\n"
        "  retro-generate run/ --index index/ --db db/ \"The Python tutorial\"", argc, argv,
        [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
            static retro::GenerateRunOptions cli;
            auto& g = cli.g;
            g.sampler.top_p = 0.9;   // defaults: T = 1, nucleus 0.9, no top-k
            // (required, checked in the action: a run with neither is told the whole form, as the other tools' are)
            app.add_option("run", g.run, "Run folder from retro-train (config.json, model.safetensors); required");
            app.add_option("prompt", cli.prompt, "Prompt text (default, or -: read from stdin)");
            app.add_option("--index", g.index, "Index folder (retro-index) to retrieve from (default: the one the run's neighbours were searched in)");
            app.add_option("--db", g.db, "Chunk database the index was built from, its tokenizer used (default: the one the index records)");
            app.add_option("--tokenizer", g.tokenizer, "Tokenizer model (default: the database's)");
            app.add_option("--checkpoint,--weights", g.checkpoint, "Weights other than RUN/model.safetensors: a checkpoint folder, a .safetensors file, or a RETRO-pytorch state_dict saved with torch.save");
            app.add_option("--max-tokens", g.max_tokens, "Tokens to generate at most (also capped by the model's max_seq_len)")->capture_default_str();
            app.add_option("--temperature", g.sampler.temperature, "Softmax temperature (> 0)")->capture_default_str();
            app.add_option("--top-k", g.sampler.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
            app.add_option("--top-p", g.sampler.top_p, "Nucleus: keep the most likely tokens up to this probability mass, in (0, 1] (1 = off)")->capture_default_str();
            app.add_flag("--greedy", g.sampler.greedy, "Always take the most likely token (ignores temperature, top-k, top-p)");
            app.add_option("--seed", g.seed, "Random seed; one seed gives one text")->transform(retro::non_negative_integer())->capture_default_str();
            app.add_flag("--no-retrieval", g.no_retrieval, "Generate without neighbours (CCA skipped), the baseline");
            app.add_flag("--show-neighbours", cli.show_neighbours, "Print each retrieved chunk's neighbours on stderr");
            app.add_flag("--json", cli.json, "With --show-neighbours: JSON lines instead of text");
            app.add_option("--prompts", cli.prompts_file, "Batch mode: a .jsonl of prompts (strings or {\"prompt\": ..., \"id\": ...}); - reads standard input");
            app.add_option("--output", cli.output, "Batch mode: write results here as .jsonl (atomically; each finished "
                                                   "prompt is kept in OUTPUT.partial until then); - streams them to "
                                                   "standard output in input order");
            app.add_flag("--resume", cli.resume, "Batch mode: keep the prompts an interrupted run finished (OUTPUT.partial) "
                                                 "and decode the others; the same command otherwise");
            app.add_flag("--force", cli.force, "Batch mode: replace an existing --output (without it a finished "
                                               "file is kept: refused, or with --resume nothing to do)");
            auto* batch_size = app.add_option("--batch-size,--batch", g.batch_size, "Batch mode: prompts decoded together (on the CPU a prompt's text is the same at every batch size; with --device cuda only 1 makes it independent of the other prompts: docs/generate.md)")->capture_default_str();
            app.add_flag("--ignore-eos", cli.ignore_eos, "Keep going after an end-of-text token");
            app.add_flag("--allow-other-db", g.allow_other_db, "Accept a database whose tokenizer cannot be compared with the run's (one of the same tokenizer needs no flag)");
            app.add_option("--nprobe", g.nprobe, "IVF lists to search (0 = as the index was saved)");
            app.add_option("--ef-search", g.ef_search, "HNSW search depth (0 = as saved)");
            app.add_option("--device", g.device, "cpu, or cuda: decode on the GPU (caches there; the search stays on "
                                                 "the CPU)")
                ->capture_default_str()
                ->check(CLI::IsMember({"cpu", "cuda", "host-backend"}));
            app.add_option("--dtype", g.dtype,
                           "fp32 (exact), or bf16: the CPU decode step reads bf16 copies of the linear weights (half "
                           "the bytes a token reads, 1.2-1.9x the tokens/s; activations stay fp32; AVX-512 or AVX2+FMA CPUs)")
                ->capture_default_str()
                ->check(CLI::IsMember({"fp32", "bf16"}));
            auto* graphs = app.add_flag_function("--cuda-graphs", [&g](std::int64_t) { g.cuda_graphs = true; },
                                                 "With --device cuda: run each decode step as a captured CUDA graph "
                                                 "(one launch a token instead of one per op; the same text). The "
                                                 "default there");
            graphs->disable_flag_override();
            app.add_flag_function("--no-cuda-graphs", [&g](std::int64_t) { g.cuda_graphs = false; },
                                  "With --device cuda: launch every op of a decode step on its own")
                ->disable_flag_override()
                ->excludes(graphs);
            app.add_option("--threads", ctx.threads, "Threads (0 = all cores)");
            app.add_option("--stop-after", cli.stop_after, "Testing: batch mode stops after this many prompts, as if killed")
                ->transform(retro::non_negative_integer())
                ->group("");
            retro::add_no_verify_flag(app, g.verify);
            return [batch_size, &app] {
                if (cli.g.run.empty())
                    retro::refuse_usage(app, "retro-generate RUN \"PROMPT\" (PROMPT, or - for standard input; or "
                                             "retro-generate RUN --prompts FILE.jsonl --output OUT.jsonl for many)");
                cli.batch_size_given = batch_size->count() > 0;
                retro::generate_run(cli);
            };
        });
}
