// Implementation of bench_commands.h: one add_<name> per benchmark, in the order --help lists them.
#include "bench_commands.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/chunk_bench.h"
#include "bench/embed_bench.h"
#include "bench/generate_bench.h"
#include "bench/knn_bench.h"
#include "bench/retention_bench.h"
#include "bench/train_bench.h"
#include "bench/train_scaling_bench.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/output_folder.h"
#include "core/shipped_data.h"
#include "core/std_streams.h"
#include "op_registry.h"
#include "tool_main.h"
#include "ops_bench.h"

namespace retro::bench {
namespace {

// An output file option checked as the command line is read, before minutes of timing (a missing folder, a device,
// a pipe, a link or a tool folder's own file: output_file_guard), not when the results are written at the end.
// A thread count of a list option (each value): 1 to 4096, as every tool's --threads (0 there means all cores; a
// timed row needs its count: 99999 crashed train, 0 and -1 ran on all cores under their own label).
const CLI::Range kThreadCount(1, 4096);

// An option given to a subcommand whose run would ignore it (`ignored`: what makes it so): refused with `why`
// (`--python` without `--peer` ran no peer, `--size-mb` with `--corpus` generated nothing, a silent no-op).
void refuse_ignored(const CLI::App* sub, const char* option, bool ignored, const std::string& why, const std::string& fix) {
    if (ignored && sub->count(option) > 0) retro::user_error_in(option, why, fix);
}

// --json FILE, or `-`: standard output (the tables then on stderr; bench_util.h's bench_json_to_stdout)
CLI::Validator output_file_check(const std::string& option) {
    return CLI::Validator(
        [option](std::string& path) {
            if (option == "--json" && path == "-") return std::string();   // (the subcommand's bench_outputs_begin takes it)
            output_file_guard(path, option);
            return std::string();
        },
        "FILE");
}

// A peer script option: a file, or one of `peers` by name (`--peer rp_generate`: tests/peers/rp_generate.py, installed
// as share/retrokit/peers/rp_generate.py; core/shipped_data.h). As --config, a file there is taken as given and a
// folder of that name hides nothing; anything else is refused naming the shipped peers this option runs.
CLI::Option* peer_script_option(CLI::Option* option, const std::vector<std::string>& peers) {
    std::string listed;
    for (const std::string& p : peers) listed += (listed.empty() ? "" : ", ") + p;
    const CLI::Validator by_name(
        [peers, listed](std::string& value) -> std::string {
            std::error_code ec;
            if (std::filesystem::exists(value, ec) && !std::filesystem::is_directory(value, ec)) return std::string();
            const std::string stem = value.size() > 3 && value.ends_with(".py") ? value.substr(0, value.size() - 3) : value;
            if (std::find(peers.begin(), peers.end(), stem) != peers.end()) {
                if (const std::string shipped = shipped_file(ShippedData::kPeers, stem, ".py"); !shipped.empty()) {
                    value = shipped;
                    return std::string();
                }
                return "the shipped peer " + stem + " is not installed here, nor is the source tree's tests/peers/ (give the script's path)";
            }
            return "'" + value + "' is not a file, nor a shipped peer of this command (" + listed + ")";
        },
        "{" + [&peers] {
            std::string braced;
            for (const std::string& p : peers) braced += (braced.empty() ? "" : ",") + p;
            return braced;
        }() + "}");
    return option->type_name("PEER")->transform(by_name);
}

void add_retention(CLI::App& bench, ToolContext& ctx) {
    auto o = std::make_shared<RetentionBenchOptions>();
    auto* sub = bench.add_subcommand("retention", "Retention modes (naive, parallel, recurrent, chunkwise): fwd, fwd+bwd, "
                                                  "memory, decode step, chunkwise/parallel crossover, GFLOP/s vs sgemm");
    sub->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    comma_list_of(sub->add_option("--modes", o->modes, "Modes to run (comma-separated)")->delimiter(','),
                  {"naive", "parallel", "recurrent", "chunkwise"});
    sub->add_option("--T", o->T, "Sequence lengths (comma-separated; default cpu 256..4096, cuda 1024..16384)")->delimiter(',');
    sub->add_option("--B", o->B, "Batch (0 = default: cpu 4, cuda 8)");
    sub->add_option("--H", o->H, "Heads (0 = default: cpu 8, cuda 32)");
    sub->add_option("--K", o->K, "Key/query head dim (0 = 128)");
    sub->add_option("--V", o->V, "Value head dim (0 = 128)");
    comma_list_of(sub->add_option("--dtype", o->dtypes, "cpu: fp32,fp64; cuda: fp32,bf16 (default fp32 on cpu, bf16 on cuda)")
                      ->delimiter(','),
                  {"fp32", "fp64", "bf16"});
    sub->add_option("--chunk-size", o->chunk_size, "Chunk size of the chunkwise mode")->check(CLI::PositiveNumber);
    sub->add_option("--repeats", o->repeats, "Timed repeats per row (median reported, after one warm-up)")->check(CLI::PositiveNumber);
    sub->add_option("--naive-max-T", o->naive_max_T, "Skip naive (O(T^2) memory) above this T");
    sub->add_option("--json", o->json, "Write the results as JSON to this file (-: to standard output, the tables then to stderr)")->check(output_file_check("--json"));
    sub->add_option("--plot", o->plot, "Write a PNG of forward ms vs T (needs gnuplot)")->check(output_file_check("--plot"));
    sub->callback([o, &ctx] {
        bench_outputs_begin(o->json);
        if (o->naive_max_T < 0)   // (-1 skipped every naive row: an empty table, exit 0)
            retro::user_error_in("--naive-max-T", retro::cat(o->naive_max_T, " is not a sequence length"), "give the largest T to run naive at");
        run_retention_bench(*o, ctx.command_line);
    });
}

void add_chunk(CLI::App& bench, ToolContext& ctx) {
    auto opt = std::make_shared<ChunkBenchOptions>();
    auto* sub = bench.add_subcommand("chunk", "retro-chunk MB/s and tokens/s at 1 and all threads, peak RSS, "
                                              "against a bare sentencepiece Encode loop over the same text");
    sub->add_option("--corpus", opt->corpus, "Corpus inputs (as for retro-chunk); default: generate one");
    sub->add_option("--size-mb", opt->size_mb, "Size of the generated corpus (MB of text)");
    sub->add_option("--tokenizer", opt->tokenizer, "tok.model (default: train one on the corpus)");
    sub->add_option("--vocab-size", opt->vocab_size, "Vocabulary of the trained tokenizer");
    sub->add_option("--encode-mb", opt->encode_mb, "MB of text for the in-process Encode loop");
    sub->add_option("--chunk-threads,--thread-counts", opt->threads, "retro-chunk thread counts (default: retro-bench --threads, "
                                                                      "else 1 and all cores)")
        ->delimiter(',')
        ->check(kThreadCount);
    sub->add_option("--chunk-bin", opt->chunk_bin, "retro-chunk binary (default: next to retro-bench)");
    sub->add_option("--work-dir", opt->work_dir, "Keep the corpus, tokenizer and database here");
    sub->add_option("--glob", opt->glob, "With --corpus: which files of a folder to read (as retro-chunk)")
        ->type_name("PATTERN")->capture_default_str();
    sub->add_option("--text-key", opt->text_key, "With --corpus: JSON key of the document in .jsonl inputs, its column in .parquet inputs (as retro-chunk)")
        ->type_name("KEY")
        ->capture_default_str();
    sub->add_option("--on-error", opt->on_error, "With --corpus: a malformed .jsonl line, a binary file or an unreadable .parquet file: fail or skip (as retro-chunk)")
        ->check(CLI::IsMember({"fail", "skip"}))
        ->capture_default_str();
    sub->add_option("--json", opt->json, "Write the results as JSON to this file (-: to standard output, the tables then to stderr)")->check(output_file_check("--json"));
    sub->callback([opt, &ctx, sub] {
        bench_outputs_begin(opt->json);
        const bool given = !opt->corpus.empty();
        refuse_ignored(sub, "--size-mb", given, "sizes the generated corpus, which --corpus replaces", "drop one of them");
        refuse_ignored(sub, "--vocab-size", !opt->tokenizer.empty(), "sizes the tokenizer trained, which --tokenizer replaces",
                       "drop one of them");
        for (const char* f : {"--glob", "--text-key", "--on-error"})
            refuse_ignored(sub, f, !given, "reads a --corpus, and the generated one needs none", "add --corpus, or drop it");
        ChunkBenchOptions run = *opt;   // the tool's --threads is the default list, as for train (it timed 1 and all cores)
        if (run.threads.empty() && ctx.threads > 0) run.threads = {ctx.threads};
        run_chunk_bench(run, ctx.command_line);
    });
}

void add_embed(CLI::App& bench, ToolContext& ctx) {
    auto o = std::make_shared<EmbedBenchOptions>();
    auto* sub = bench.add_subcommand("embed", "bert or t5 embedder chunks/s (tokenizer + encoder + pooling), clip images/s "
                                              "(decode + preprocess + vision tower) or clip-text chunks/s (BPE + text tower), "
                                              "optionally beside Hugging Face (--peer tests/peers/hf_embed.py; t5: "
                                              "tests/peers/st_embed.py; clip, clip-text: tests/peers/clip_embed.py)");
    sub->add_option("--embedder", o->embedder, "bert, t5, clip (its images) or clip-text (its texts, at most 77 tokens)")
        ->check(CLI::IsMember({"bert", "t5", "clip", "clip-text"}));
    sub->add_option("--model", o->model, "BERT checkpoint folder (config.json, model.safetensors, vocab.txt), or a T5 one "
                                         "(spiece.model instead of vocab.txt; or a sentence-transformers folder), or a "
                                         "CLIPModel one (clip); or a Hub id (ORG/NAME) in the local Hugging Face cache")
        ->required();
    sub->add_option("--images", o->images, "clip: embed the *.jpg/*.jpeg/*.png files below this folder (default: synthetic images)");
    auto* image_count = sub->add_option("--image-count", o->image_count, "clip: synthetic images per timed run")->check(CLI::PositiveNumber);
    sub->add_option("--images-out", o->images_out, "clip: write the synthetic images to this folder and keep them");
    sub->add_option("--chunks", o->chunks, "Texts embedded per timed run")->check(CLI::PositiveNumber);
    sub->add_option("--tokens", o->tokens, "Model tokens per text, at least: whole words are added until a text holds this many "
                                           "(the specials — [CLS]/[SEP], </s>, CLIP's start/end of text — not counted here; the "
                                           "table's tokens/chunk counts them)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--min-tokens", o->min_tokens,
                    "Draw each text's length uniformly from [min-tokens, tokens] (default: all = tokens)");
    sub->add_option("--batch,--batch-size", o->batch, "Texts per forward pass")->check(CLI::PositiveNumber);
    sub->add_option("--device", o->device, "cpu, or cuda: both encoders on GPU 0 (the peer as torch .cuda())")
        ->check(CLI::IsMember({"cpu", "cuda"}));
    auto* max_length = sub->add_option("--max-length", o->max_length,
                                       "Model tokens per text at most, the specials included (clip-text: the model's text "
                                       "positions, 77, unless given)")
                           ->check(CLI::PositiveNumber);
    sub->add_option("--repeats", o->repeats, "Timed repeats (median reported, after one warm-up)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--texts", o->texts, "Cut the texts from this UTF-8 file (default: synthetic words)");
    sub->add_option("--seed", o->seed, "Seed of the synthetic words (clip: images)")->transform(retro::non_negative_integer());
    sub->add_option("--texts-out", o->texts_out, "Write the texts here, one JSON string a line");
    peer_script_option(sub->add_option("--peer", o->peer, "Also run this peer script on the same texts (a path, or a shipped peer by name: hf_embed, st_embed, clip_embed)"),
                       {"hf_embed", "st_embed", "clip_embed"});
    sub->add_option("--python", o->python, "Python interpreter for --peer");
    sub->add_option("--rounds", o->rounds,
                    "With --peer: alternate RetroKit and the peer this many times and report the median of the "
                    "per-round ratios (steadier on a shared machine)")
        ->check(CLI::PositiveNumber);
    sub->add_flag("--peer-sorted", o->peer_sorted,
                  "The peer batches the texts sorted by length, as sentence-transformers' encode does (less padding)");
    sub->add_option("--json", o->json, "Write the results as JSON to this file (-: to standard output, the tables then to stderr)")->check(output_file_check("--json"));
    sub->callback([o, &ctx, image_count, max_length, sub] {
        bench_outputs_begin(o->json);
        refuse_ignored(sub, "--python", o->peer.empty(), "runs the peer, and there is none", "add --peer SCRIPT, or drop it");
        if (image_count->count() && o->embedder != "clip")
            retro::user_error_in("--image-count", "applies to --embedder clip only", "drop it, or pass --embedder clip");
        if (image_count->count() && !o->images.empty())
            retro::user_error_in("--image-count", "counts synthetic images, which --images DIR replaces", "drop one of them");
        if (o->embedder == "clip-text" && !max_length->count()) o->max_length = 0;   // the model's text positions
        run_embed_bench(*o, ctx.command_line);
    });
}

void add_knn(CLI::App& bench, ToolContext& ctx) {
    auto o = std::make_shared<KnnBenchOptions>();
    auto* sub = bench.add_subcommand("knn", "Exact kNN vs FAISS IndexFlatIP (queries/s, GFLOP/s vs sgemm); IVF-Flat, IVF-PQ, HNSW vs pip faiss-cpu");
    sub->add_option("--n", o->n, "Base vectors");
    sub->add_option("--dim", o->dim, "Dimension");
    sub->add_option("--queries", o->queries, "Queries");
    sub->add_option("--k,--neighbours", o->k, "Neighbours");
    sub->add_option("--thread-counts", o->threads, "Thread counts to run (default: retro-bench --threads, else 1 and all cores)")
        ->delimiter(',')
        ->check(kThreadCount);
    sub->add_option("--ivf-nlist", o->ann.ivf_nlist, "IVF lists of the IVF-Flat and IVF-PQ rows (0 = skip IVF; the default is "
                                                     "lowered to what --n trains at 39 vectors a list)");
    sub->add_option("--nprobe", o->ann.nprobe, "IVF nprobe values")->delimiter(',');
    sub->add_option("--pq-m", o->ann.pq_m, "IVF-PQ sub-quantizers, 8-bit codes (0 = skip IVF-PQ)");
    sub->add_option("--hnsw-m", o->ann.hnsw_m, "HNSW neighbours per node (0 = skip HNSW)");
    sub->add_option("--ef-search", o->ann.ef_search, "HNSW efSearch values")->delimiter(',');
    sub->add_option("--rounds", o->ann.rounds,
                    "Approximate rows: alternate RetroKit and the peer this many times (order flipped each round); "
                    "report medians and the median per-round ratio");
    sub->add_option("--index-cache", o->ann.index_cache,
                    "Keep the built IVF/PQ/HNSW index files in this folder and reuse them on the next run with the same vectors");
    sub->add_option("--debian-queries", o->ann.debian_queries,
                    "Queries for the reference rows of Debian's FAISS search (scalar: slow; 0 = skip)");
    sub->add_option("--base-npy", o->base_npy, "Base vectors from this float32 .npy (e.g. an index's embeddings.npy) instead of synthetic ones");
    sub->add_option("--queries-npy", o->queries_npy, "Query vectors from this float32 .npy (with --base-npy)");
    sub->add_option("--clusters", o->clusters, "Clusters in the synthetic data");
    peer_script_option(sub->add_option("--peer", o->peer, "Also run this Python peer on the same vectors (a path, or faiss_knn: the shipped tests/peers/faiss_knn.py)"),
                       {"faiss_knn"});
    sub->add_option("--python", o->python, "Python interpreter for the peer");
    sub->add_option("--json", o->json, "Write the results as JSON to this file (-: to standard output, the tables then to stderr)")->check(output_file_check("--json"));
    sub->add_option("--query-block", o->query_block, "Exact search: queries per sgemm (0 = default)");
    sub->add_option("--base-block", o->base_block, "Exact search: base rows per sgemm (0 = default)");
    sub->add_flag("--cuda", o->cuda, "Also time exact search on the GPU (cuBLAS sgemm + top-k kernel) against cuBLAS sgemm");
    comma_list_of(sub->add_option("--kernels", o->kernels,
                                  "Exact search kernels to time: avx512, sgemm (default: both where the CPU has AVX-512F)")
                      ->delimiter(','),
                  {"avx512", "sgemm"});
    sub->callback([o, &ctx, sub] {
        bench_outputs_begin(o->json);
        // vectors from files replace the synthetic ones and their sizes; a query file alone was dropped unread
        if (!o->queries_npy.empty() && o->base_npy.empty())
            retro::user_error_in("--queries-npy", "needs --base-npy too (the synthetic base has no such queries)", "add --base-npy FILE");
        if (!o->base_npy.empty())
            for (const char* f : {"--n", "--dim", "--queries", "--clusters"})
                if (sub->count(f) > 0) retro::user_error_in(f, "sizes the synthetic vectors, which --base-npy replaces", "drop it");
        refuse_ignored(sub, "--python", o->peer.empty(), "runs the peer, and there is none", "add --peer SCRIPT, or drop it");
        // (taken without a word: no row reads them)
        refuse_ignored(sub, "--nprobe", o->ann.ivf_nlist == 0, "applies to the IVF rows, and --ivf-nlist 0 runs none",
                       "drop it, or give --ivf-nlist");
        refuse_ignored(sub, "--ef-search", o->ann.hnsw_m == 0, "applies to the HNSW rows, and --hnsw-m 0 runs none",
                       "drop it, or give --hnsw-m");
        if (o->query_block < 0) retro::user_error_in("--query-block", retro::cat(o->query_block, " is not a block size"), "give 0 for the default");
        if (o->base_block < 0) retro::user_error_in("--base-block", retro::cat(o->base_block, " is not a block size"), "give 0 for the default");
        KnnBenchOptions run = *o;   // the tool's --threads is the default list, as for train (it timed 1 and all cores)
        run.ann.ivf_nlist_given = sub->count("--ivf-nlist") > 0;
        if (run.threads.empty() && ctx.threads > 0) run.threads = {ctx.threads};
        run_knn_bench(run, ctx.command_line);
    });
}

void add_train(CLI::App& bench, ToolContext& ctx) {
    auto o = std::make_shared<TrainBenchOptions>();
    auto* sub = bench.add_subcommand("train", "RETRO training steps (fwd + bwd + AdamW, fp32): tokens/s and GFLOP/s "
                                              "vs sgemm, optionally beside RETRO-pytorch on torch CPU (--peer)");
    model_config_option(sub->add_option("--config", o->config, "Model config: a .json file or a shipped config's name (default: the "
                                           "built-in demo config = examples/configs/demo.json; e.g. retro-172m)"));
    sub->add_option("--batch,--batch-size", o->batch, "Sequences per step")->check(CLI::PositiveNumber);
    sub->add_option("--seq-len", o->seq_len, "Input tokens per sequence (0 = the config's max_seq_len)");
    sub->add_option("--steps,--repeats", o->steps, "Timed steps per row (median reported)")->check(CLI::PositiveNumber);
    sub->add_option("--warmup", o->warmup, "Untimed steps before the timed ones");
    sub->add_option("--threads,--thread-counts", o->threads, "Thread counts, comma-separated (default: retro-bench --threads, "
                                             "else 1 and all cores)")
        ->delimiter(',')
        ->check(kThreadCount);
    sub->add_flag("--no-retrieval", o->no_retrieval, "Decoder only: no neighbours, no encoder, no CCA");
    sub->add_flag("--peer", o->peer, "Also time RETRO-pytorch 0.3.9 (torch CPU) at the same config, batch and threads");
    peer_script_option(sub->add_option("--peer-script", o->peer_script, "The peer script, a path or a shipped peer's name (default: rp_train, the shipped tests/peers/rp_train.py)"),
                       {"rp_train"});
    sub->add_option("--python", o->python, "Python interpreter for --peer (with torch and retro-pytorch==0.3.9)");
    sub->add_option("--seed", o->seed, "Seed of the weights and of the random tokens")->transform(retro::non_negative_integer());
    sub->add_option("--json", o->json, "Write the results as JSON to this file (-: to standard output, the tables then to stderr)")->check(output_file_check("--json"));
    sub->add_option("--device", o->device, "cpu, or cuda: the GPU training path (fp32) with MFU, and with --peer "
                                           "RETRO-pytorch on the same GPU in fp32 and bf16 autocast")
        ->check(CLI::IsMember({"cpu", "cuda", "host-backend"}))->capture_default_str();
    comma_list_of(sub->add_option("--dtype", o->dtypes, "With --device cuda: fp32, bf16 (retro-train --dtype bf16: the linear "
                                          "layers' GEMMs on bf16 inputs and the fused flash-style self-attention) "
                                          "and/or bf16-unfused (the same without the fused attention: "
                                          "--no-fused-attention), comma-separated, one row each")
        ->delimiter(',')->capture_default_str(),
                  {"fp32", "bf16", "bf16-unfused"});
    sub->add_option("--profile", o->profile_steps, "With --device cuda: N more steps per dtype with every op timed "
                                                   "between two synchronizes; prints where a step's time goes")
        ->check(CLI::Range(0, 1000));
    auto scaling = std::make_shared<TrainScalingOptions>();
    auto worker = std::make_shared<std::string>();
    sub->add_option("--ranks", scaling->ranks, "Data-parallel scaling: rank counts, comma-separated (e.g. 1,2), each "
                                               "launched with --launcher; tokens/s, all-reduce time, efficiency")
        ->delimiter(',');
    sub->add_option("--launcher", scaling->launcher, "With --ranks: the launch command, {n} = ranks")
        ->type_name("COMMAND")->capture_default_str();
    sub->add_option("--threads-per-rank", scaling->threads_per_rank,
                    "With --ranks: threads of each rank (0 = cores / the largest rank count)")
        ->check(CLI::Range(0, 4096));
    sub->add_option("--reduce", scaling->reduce, "With --ranks: fast (MPI all-reduce) or deterministic")
        ->check(CLI::IsMember({"fast", "deterministic"}))->capture_default_str();
    sub->add_option("--rank-worker", *worker, "Internal: one rank of a --ranks launch, rank 0 writes FILE")->group("");
    sub->callback([o, scaling, worker, &ctx, sub] {
        if (worker->empty()) bench_outputs_begin(o->json);   // (a --ranks launch's worker writes its FILE only)
        // options a row would silently ignore (a run without --ranks launched nothing; --peer-script without --peer)
        if (scaling->ranks.empty() && worker->empty())
            for (const char* f : {"--launcher", "--threads-per-rank", "--reduce"})
                if (sub->count(f) > 0) retro::user_error_in(f, "applies with --ranks only", "add --ranks N,M, or drop it");
        if (!o->peer)
            for (const char* f : {"--peer-script", "--python"})
                if (sub->count(f) > 0) retro::user_error_in(f, "applies with --peer only", "add --peer, or drop it");
        // and those a --ranks launch does not pass to its ranks (CPU workers of batch, seq-len, steps, warmup, seed,
        // threads-per-rank, reduce, config, no-retrieval): `--ranks 2 --device cuda` printed CPU rows (a helper's
        // pass, session 54)
        if (!scaling->ranks.empty())
            for (const char* f : {"--device", "--dtype", "--profile", "--peer", "--threads"})
                if (sub->count(f) > 0)
                    retro::user_error_in(f, "is not passed to the ranks of a --ranks launch (CPU ranks; --threads-per-rank "
                                            "sets their threads)",
                                         "drop it, or time it without --ranks");
        TrainBenchOptions run = *o;
        if (!scaling->ranks.empty() || !worker->empty()) {
            scaling->step = run;
            if (!worker->empty()) return run_train_rank_worker(*scaling, *worker);
            run_train_scaling(*scaling, ctx.command_line);
            return;
        }
        if (run.threads.empty() && ctx.threads > 0) run.threads = {ctx.threads};
        run_train_bench(run, ctx.command_line);
    });
}

void add_generate(CLI::App& bench, ToolContext& ctx) {
    auto o = std::make_shared<GenerateBenchOptions>();
    auto* sub = bench.add_subcommand("generate", "KV-cached decoding tokens/s and ms per token at several prompt lengths, "
                                                 "beside RETRO-pytorch's full-recompute loop (--peer tests/peers/rp_generate.py)");
    model_config_option(sub->add_option("--config", o->config, "Model config: a .json file or a shipped config's name (default: 6 x 512 "
                                           "decoder, 2 x 256 encoder, chunk 64)"));
    sub->add_option("--prompt", o->prompts, "Prompt lengths in tokens (comma-separated)")->delimiter(',')->capture_default_str();
    sub->add_option("--output,--max-tokens", o->output, "Tokens generated per prompt")->capture_default_str();
    sub->add_option("--batch,--batch-size", o->batch, "Sequences decoded together, each its own prompt of the length given: ms/token "
                                         "is then per step, tokens/s counts every sequence's")
        ->capture_default_str();
    sub->add_flag("--no-retrieval", o->no_retrieval, "Decode without neighbours (CCA skipped)");
    peer_script_option(sub->add_option("--peer", o->peer, "RETRO-pytorch peer script, a path or rp_generate (the shipped tests/peers/rp_generate.py); omit: no peer"),
                       {"rp_generate"});
    sub->add_option("--peer-steps", o->peer_steps, "Tokens the peer makes per prompt length")->capture_default_str();
    sub->add_option("--profile", o->profile_tokens, "With --device cuda: N more tokens after the last prompt with every "
                                                    "op timed between two synchronizes; prints where a token's time goes")
        ->check(CLI::Range(0, 100000));
    sub->add_option("--python", o->python, "Python interpreter for --peer")->capture_default_str();
    sub->add_option("--seed", o->seed, "Seed of the weights, prompts and neighbours")->transform(retro::non_negative_integer())->capture_default_str();
    sub->add_option("--device", o->device, "cpu, or cuda: decode on the GPU (the peer too, with --peer)")
        ->check(CLI::IsMember({"cpu", "cuda", "host-backend"}))->capture_default_str();
    auto* graphs = sub->add_flag_function("--cuda-graphs", [o](std::int64_t) { o->cuda_graphs = true; },
                                          "Each prompt decoded again with every step a captured CUDA graph, its ms/token "
                                          "beside (the same tokens, checked); the default with --device cuda");
    graphs->disable_flag_override();
    sub->add_flag_function("--no-cuda-graphs", [o](std::int64_t) { o->cuda_graphs = false; },
                           "With --device cuda: eager steps only")
        ->disable_flag_override()
        ->excludes(graphs);
    sub->add_flag("--bf16", o->bf16,
                  "Each prompt decoded again with the CPU decoder reading bf16 copies of the linear weights "
                  "(retro-generate --dtype bf16), its ms/token and speed-up beside");
    sub->add_option("--json", o->json, "Write the results as JSON to this file (-: to standard output, the tables then to stderr)")->check(output_file_check("--json"));
    sub->callback([o, &ctx, sub] {
        bench_outputs_begin(o->json);
        refuse_ignored(sub, "--python", o->peer.empty(), "runs the peer, and there is none", "add --peer SCRIPT, or drop it");
        run_generate_bench(*o, ctx.command_line);
    });
}

void add_ops(CLI::App& bench, ToolContext& ctx) {
    auto o = std::make_shared<ops::OpsBenchOptions>();
    auto list = std::make_shared<bool>(false);
    auto* sub = bench.add_subcommand(
        "ops", "The op registry's perf mode: GFLOP/s and GB/s of every registered op (nn, retention, exact search, BERT)");
    sub->add_option("--ops", o->ops, "Ops to time: names or name prefixes, comma-separated (default: all)")
        ->delimiter(',')->type_name("NAMES");
    sub->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
    sub->add_option("--repeats", o->repeats, "Timed runs per row (median, after one warm-up)")->capture_default_str();
    sub->add_option("--json", o->json, "Write the results as JSON to this file (-: to standard output, the tables then to stderr)")->check(output_file_check("--json"));
    sub->add_flag("--list", *list, "List the registered ops with their CPU reference, CUDA kernel and tests, and exit");
    sub->callback([o, list, &ctx] {
        bench_outputs_begin(o->json);
        if (*list) {
            nlohmann::json all = nlohmann::json::array();
            for (const auto& op : ops::registry()) {
                std::printf("%s\n  cpu:  %s\n  cuda: %s\n", op.name.c_str(), op.cpu.c_str(), op.cuda.empty() ? "-" : op.cuda.c_str());
                for (const auto& t : op.tests) std::printf("  test: %s\n", t.c_str());
                all.push_back({{"name", op.name}, {"cpu", op.cpu}, {"cuda", op.cuda.empty() ? nlohmann::json(nullptr) : nlohmann::json(op.cuda)},
                               {"tests", op.tests}});
            }
            // --list --json: the registry as JSON, in every --json file's envelope (stamp, machine) under "ops"
            if (!o->json.empty()) bench_json_write(o->json, {{"ops", all}}, "retro-bench ops --list", ctx.command_line);
            return;
        }
        ops::run_ops_bench(*o, ctx.command_line);
    });
}

}  // namespace

void bench_add_subcommands(CLI::App& app, ToolContext& ctx) {
    add_retention(app, ctx);
    add_chunk(app, ctx);
    add_embed(app, ctx);
    add_knn(app, ctx);
    add_train(app, ctx);
    add_generate(app, ctx);
    add_ops(app, ctx);
}

}  // namespace retro::bench
