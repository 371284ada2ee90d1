// retro-chunk: corpus -> token chunk database (chunks, documents, sequences, sources), plus
// `merge` (shards -> one database) and `inspect` (chunks and documents back to text, stats).
#include <iostream>

#include "core/error.h"
#include "core/std_streams.h"
#include "data/chunk_build.h"
#include "data/chunk_inspect.h"
#include "data/chunk_merge.h"
#include "model/config.h"

#include "tool_main.h"

int main(int argc, char** argv) {
    return retro::tool_main(
        "retro-chunk", "Cut a corpus into token chunks for RETRO (docs/chunk.md); merge shards; inspect a database.",
        argc, argv, [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
            static retro::ChunkOptions opts;
            static std::string shard, on_error = "fail";
            static retro::MergeOptions merge_opts;
            static retro::InspectOptions insp;

            app.add_option("corpus", opts.inputs, "Folders (files matching --glob), text files, .jsonl/.jsonl.gz/.jsonl.zst files (a document a line) or .parquet files (a document a row)");
            app.add_option("--tokenizer", opts.tokenizer, "tok.model, or the folder holding it");
            app.add_option("--out", opts.out, "Output folder (the chunk database)");
            static std::string config;
            auto* chunk_size = app.add_option("--chunk-size", opts.chunk_size, "Tokens per chunk (the model config's chunk_size)");
            auto* seq_len = app.add_option("--seq-len", opts.seq_len, "Tokens per training sequence (a multiple of --chunk-size; at most the model config's max_seq_len)");
            retro::model_config_option(app.add_option("--config", config, "Take --chunk-size and --seq-len from the model config to train (its chunk_size, and "
                                               "max_seq_len unless a shorter --seq-len is given): a .json file or a shipped config's name (demo, ...)"));
            app.add_option("--threads", ctx.threads, "Threads (0 = all cores); the output does not depend on it");
            app.add_option("--shard", shard, "Process input blocks b with b % n == i (i/n, or auto: i and n from srun/mpirun); join with `merge`")->type_name("I/N");
            app.add_flag("--resume", opts.resume, "Continue a killed run in --out (same command otherwise)");
            app.add_flag("--force", opts.force, "Replace an existing database in --out");
            app.add_option("--glob", opts.corpus.glob, "Which files of a folder to read")->type_name("PATTERN");
            app.add_option("--text-key", opts.corpus.text_key, "JSON key holding the text in .jsonl inputs, and the text's column in .parquet inputs")->type_name("KEY");
            app.add_option("--on-error", on_error, "A malformed .jsonl line, a binary (NUL-holding) file or an unreadable .parquet file: fail or skip")->check(CLI::IsMember({"fail", "skip"}));
            app.add_option("--block-docs", opts.block_docs, "Input block: at most this many documents (recorded; shards must agree)");
            app.add_option("--block-bytes", opts.block_bytes, "Input block: ends at the document reaching this many bytes");
            app.add_option("--checkpoint-every", opts.checkpoint_seconds, "Seconds between --resume checkpoints");

            auto* merge = app.add_subcommand("merge", "Merge the shards of one corpus (all i of --shard i/n) into one database");
            merge->add_option("shards", merge_opts.shards, "Shard folders, any order")->required();
            merge->add_option("--out", merge_opts.out, "Output folder")->required();
            merge->add_flag("--force", merge_opts.force, "Replace an existing database in --out");
            merge->add_flag("--resume", merge_opts.resume, "Run again: keep a finished merge of these shards (--out complete), make an interrupted one again");
            retro::add_no_verify_flag(*merge, ctx.verify_inputs);

            auto* inspect = app.add_subcommand("inspect", "Print a chunk, a document, or statistics of a database");
            inspect->add_option("db", insp.db, "Chunk database folder")->required();
            // (no default shown: -1 is "not given", which --chunk -1 is refused as)
            auto* by_chunk = inspect->add_option("--chunk", insp.chunk, "Chunk id: its text, document, source, position")
                                 ->transform(retro::non_negative_integer())
                                 ->default_str("");
            auto* by_doc = inspect->add_option("--doc", insp.doc, "Document id: its chunks")
                               ->transform(retro::non_negative_integer())
                               ->default_str("");
            auto* stats = inspect->add_flag("--stats", insp.stats, "Counts, tokens per chunk and document, padding");
            by_chunk->excludes(by_doc)->excludes(stats);
            by_doc->excludes(stats);
            inspect->add_flag("--json", insp.json, "Print JSON instead of text");
            inspect->add_option("--tokenizer", insp.tokenizer, "Decode with this tokenizer instead of the recorded one");

            return [&ctx, &app, merge, inspect, chunk_size, seq_len] {
                if (*merge) return retro::chunk_merge(ctx, merge_opts);
                if (*inspect) {
                    retro::std_output_required("the report");
                    return retro::chunk_inspect(insp, std::cout);
                }
                if (opts.inputs.empty()) retro::refuse_usage(app, "no corpus given: retro-chunk CORPUS... --tokenizer TOK --out DB");
                if (opts.tokenizer.empty()) retro::user_error_in("--tokenizer", "is required");
                if (!config.empty()) {   // the sizes the model will check the database against (retro-train, retro-generate)
                    const retro::RetroConfig c = retro::RetroConfig::load(config);
                    if (chunk_size->count() && opts.chunk_size != c.chunk_size)
                        retro::user_error_in("--chunk-size", retro::cat(opts.chunk_size, " is not ", config, "'s chunk_size ", c.chunk_size),
                                             "drop --chunk-size: --config sets it");
                    if (seq_len->count() && opts.seq_len > c.max_seq_len)   // (shorter sequences train: lib/train/data.cpp)
                        retro::user_error_in("--seq-len", retro::cat(opts.seq_len, " is past ", config, "'s max_seq_len ", c.max_seq_len),
                                             "give at most max_seq_len, or drop --seq-len: --config sets it");
                    opts.chunk_size = c.chunk_size;
                    if (!seq_len->count()) opts.seq_len = c.max_seq_len;
                }
                if (!shard.empty()) retro::chunk_parse_shard(shard, opts);
                opts.corpus.on_error = on_error == "skip" ? retro::OnError::SKIP : retro::OnError::FAIL;
                retro::chunk_corpus(ctx, opts);
            };
        });
}
