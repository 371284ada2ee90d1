#include "bench/generate_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>

#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/op_profile.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/heap.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/scratch_dir.h"
#include "core/shell_quote.h"
#include "core/threads.h"
#include "generate/generator.h"
#include "core/cuda_device.h"
#include "core/progress.h"
#include "generate/backend_decoder.h"
#include "nn/decode_program.h"
#include "generate/cached_decoder.h"
#include "generate/next_tokens.h"
#include "generate/sampler.h"
#include "model/params.h"
#include "nn/nn_backend_cuda.h"
#include "nn/nn_backend_host.h"

namespace fs = std::filesystem;

namespace retro::bench {

namespace {

RetroConfig bench_config(const GenerateBenchOptions& o) {
    RetroConfig c;
    if (!o.config.empty()) {
        c = RetroConfig::load(o.config);
    } else {
        c.num_tokens = 8000;
        c.enc_dim = 256;
        c.enc_depth = 2;
        c.enc_cross_attn_all = true;
        c.dec_dim = 512;
        c.dec_depth = 6;
        c.dec_cross_attn_layers = {3, 6};
        c.heads = 8;
        c.dim_head = 64;
        c.chunk_size = 64;
        c.num_neighbours = 2;
    }
    c.validate(o.config.empty() ? "default bench config" : o.config);
    // the longest prompt + output, in whole chunks: the bench's own max_seq_len where the config's is shorter
    const std::int64_t longest = *std::max_element(o.prompts.begin(), o.prompts.end()) + o.output;
    const std::int64_t whole = (longest + c.chunk_size - 1) / c.chunk_size * c.chunk_size;
    if (whole > c.max_seq_len) {
        if (!o.config.empty())
            log_info(cat("max_seq_len ", c.max_seq_len, " of ", o.config, " raised to ", whole,
                         " for --prompt + --output (random weights: the bench times, it does not need trained ones)"));
        c.max_seq_len = whole;
    }
    c.validate(o.config.empty() ? "default bench config" : "--prompt + --output with " + o.config);
    return c;
}

struct OurRun {
    double prefill_ms = 0, decode_ms_per_token = 0, tokens_per_s = 0;
    std::vector<std::int32_t> ids;   // the prompt and what was sampled
    std::int64_t fused_steps = 0;    // BackendDecoder: steps run as the backend's fused step (nn/decode_program.h)
    double replay_ms = -1;           // and its last step replayed back to back (time_replays), ms; -1: none
    std::int64_t program_ops = 0, program_barriers = 0;   // the last recorded step's ops and grid barriers
    std::string program_fallback;    // and why the last recording was not fused ("" when it was)
};

// `batch` sequences (the decoder's, made for that many): each its own random prompt of P ids, prefilled together in
// one step, then `output` decode steps of one token per sequence (ms/token is per step: every sequence gets a token;
// tokens/s counts all of them). Sequence 0's prompt is the one a batch of 1 decodes.
template <typename Decoder>
OurRun run_ours_with(Decoder& dec, const RetroConfig& c, const std::vector<std::int32_t>& neighbours, std::int64_t P,
                     std::int64_t output, bool retrieval, std::uint64_t seed, std::int64_t batch = 1) {
    const std::int64_t cs = c.chunk_size, KR = c.num_neighbours * c.retrieved_len();
    SplitMix64 rng(seed);
    std::vector<std::vector<std::int32_t>> ids(static_cast<std::size_t>(batch), std::vector<std::int32_t>{2});
    for (auto& seq : ids)
        while (static_cast<std::int64_t>(seq.size()) < P) seq.push_back(4 + static_cast<std::int32_t>(rng.next() % (c.num_tokens - 4)));
    auto add_neighbours_to = [&](std::int64_t s, std::int64_t len) {
        if (!retrieval) return;
        while (dec.neighbour_chunks(s) < len / cs) dec.add_neighbours(s, neighbours.data() + dec.neighbour_chunks(s) * KR);
    };
    SamplerOptions so;   // T = 1, all ids: the sampler's cost is part of a token's cost
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t s = 0; s < batch; s++) add_neighbours_to(s, P);
    dec.step(ids);
    const double prefill = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<std::vector<std::int32_t>> next(static_cast<std::size_t>(batch), std::vector<std::int32_t>(1));
    std::vector<std::int64_t> all_seqs(static_cast<std::size_t>(batch));
    std::iota(all_seqs.begin(), all_seqs.end(), std::int64_t{0});
    std::vector<std::int32_t> drawn;
    // a bar once a row has taken 3 s (a --batch of a million decoded for minutes without a word); none for the usual
    // sub-second rows, whose stderr stays as it was
    std::unique_ptr<Progress> progress;
    for (std::int64_t i = 0; i < output; i++) {
        if (!progress && seconds_since(t1) > 3.0) progress = std::make_unique<Progress>("decoding", output, "steps");
        if (progress) progress->set(i);
        // drawn where the logits are (next_tokens: on the GPU only the ids come back); one stream, in sequence order
        next_tokens(dec, c.num_tokens, c.num_tokens, so, all_seqs, [&](std::int64_t) { return rng.uniform(); }, drawn);
        for (const std::int32_t id : drawn)   // -1: a row of logits that is not finite (next_tokens), never fed on
            if (id < 0)
                user_error_in("the weights", cat("give logits that are not finite (NaN or infinite) at decode step ", i + 1),
                              "check the config and weights the row decodes with");
        for (std::int64_t s = 0; s < batch; s++) {
            auto& seq = ids[static_cast<std::size_t>(s)];
            seq.push_back(drawn[static_cast<std::size_t>(s)]);
            next[static_cast<std::size_t>(s)][0] = seq.back();
        }
        if (i + 1 == output) break;   // the last tokens are not fed
        for (std::int64_t s = 0; s < batch; s++) add_neighbours_to(s, static_cast<std::int64_t>(ids[static_cast<std::size_t>(s)].size()));
        dec.step(next);
    }
    const double decode = seconds_since(t1);
    if (progress) {
        progress->set(output);
        progress->finish();
    }
    std::vector<std::int32_t> all;
    for (const auto& seq : ids) all.insert(all.end(), seq.begin(), seq.end());
    OurRun run;
    run.prefill_ms = prefill * 1e3;
    run.decode_ms_per_token = decode * 1e3 / static_cast<double>(output);
    run.tokens_per_s = static_cast<double>(batch * output) / (prefill + decode);
    run.ids = std::move(all);
    return run;
}

constexpr int kReplays = 50;   // the last decode step replayed back to back (BackendDecoder::time_replays)

// The weights on a backend (--device cuda / host-backend), with the backend and its stream.
struct DeviceModel {
    std::unique_ptr<CudaStreamOwner> stream;
    std::unique_ptr<nn::NnBackend> be;
    nn::BackendBuffer weights;
};

// One prompt of P ids, then `output` tokens one at a time, neighbours added as chunks complete; on `device` when
// it has a backend (BackendDecoder), else with CachedDecoder.
OurRun run_ours(const RetroModel<float>& model, const std::vector<std::int32_t>& neighbours, std::int64_t P,
                std::int64_t output, bool retrieval, std::uint64_t seed, DeviceModel& device, std::int64_t batch,
                bool graphs = false, const nn::DecodeWeightsBf16* bf16 = nullptr,
                nn::DecodeProgramMode program = nn::DecodeProgramMode::off) {
    if (device.be) {
        BackendDecoder dec(model.config(), device.weights.f(), *device.be, batch, retrieval);
        dec.set_graphs(graphs);
        dec.set_decode_program(program);   // (explicit: RETRO_DECODE_PROGRAM does not change the graphs' column)
        OurRun run = run_ours_with(dec, model.config(), neighbours, P, output, retrieval, seed, batch);
        run.fused_steps = dec.fused_steps();
        run.program_fallback = dec.program_fallback();
        run.program_ops = dec.program_ops();
        run.program_barriers = dec.program_barriers();
        if (graphs) {
            const double r = dec.time_replays(kReplays);
            run.replay_ms = r < 0 ? -1 : r * 1e3;
        }
        return run;
    }
    CachedDecoder<float> dec(model, batch, retrieval, bf16);
    return run_ours_with(dec, model.config(), neighbours, P, output, retrieval, seed, batch);
}

nlohmann::json run_peer(const GenerateBenchOptions& o, const std::string& dir, std::int64_t P, bool retrieval) {
    const std::string cmd = shell_quote(o.python) + " " + shell_quote(o.peer) + " --config " + shell_quote(dir + "/config.json") +
                            " --weights " + shell_quote(dir + "/model.safetensors") + " --prompt-len " + std::to_string(P) +
                            " --steps " + std::to_string(o.peer_steps) + " --threads " + std::to_string(thread_count()) +
                            " --seed " + std::to_string(o.seed) + (retrieval ? "" : " --no-retrieval") +
                            (o.device == "cuda" ? " --device cuda" : "");
    log_info("peer: " + cmd);
    nlohmann::json r = run_json_command(cmd);
    if (r.is_null())   // a crash: our rows are still worth keeping, so the peer's row says why it is missing
        return {{"skipped", "the peer printed no JSON result (its error is above; run it by hand: " + cmd + ")"}};
    return r;
}

}  // namespace

void run_generate_bench(const GenerateBenchOptions& o, const std::string& command_line) {
    if (o.prompts.empty() || o.output < 1) user_error_in("--prompt/--output", "need at least one prompt length and one token");
    bench_refuse_outputs_over_inputs({{"--json", o.json}}, {{"--config", o.config}, {"--peer", o.peer}});
    if (o.peer_steps < 0)   // (-3 skipped the peer, and the footer read "its first -3 steps")
        user_error_in("--peer-steps", cat(o.peer_steps, " is not a number of steps"), "give 0 for no peer rows, or more");
    if (o.cuda_graphs.value_or(false) && o.device == "cpu")
        user_error_in("--cuda-graphs", "times the GPU decoder", "add --device cuda");
    const bool graphs = o.cuda_graphs.value_or(o.device == "cuda");
    for (auto P : o.prompts)
        if (P < 1) user_error_in("--prompt", "lengths must be positive");
    if (o.batch < 1) user_error_in("--batch", "must be at least 1");
    if (o.profile_tokens > 0 && o.device == "cpu")   // (checked after every row before: the rows were lost)
        user_error_in("--profile", "times the GPU path's ops", "use it with --device cuda");
    if (o.bf16 && o.device != "cpu") user_error_in("--bf16", "times the CPU decoder's bf16 weights", "drop --device");
    if (o.bf16 && !nn::bf16_decode_available())
        user_error_in("--bf16", "needs a CPU with AVX-512 (F, BW, VL) or AVX2 and FMA, which this one lacks", "drop --bf16");
    if (o.batch > 1 && o.peer_steps > 0 && !o.peer.empty())
        user_error_in("--batch", "the RETRO-pytorch peer decodes one sequence", "drop --peer, or --batch");
    const RetroConfig c = bench_config(o);
    // the prefill's causal scores: heads x P x P floats for the longest prompt P (the decode steps' are 1 x T; it was
    // sized by the config's max_seq_len, 2,048 by default: --batch 1000 --prompt 512 was refused for 125 GiB)
    const std::int64_t prompt = *std::max_element(o.prompts.begin(), o.prompts.end());
    const double longest = static_cast<double>(prompt);
    // and the model's weights and the decoder's caches (retro-generate's estimate: a 1B config's 4.5 GB of weights
    // were left out)
    memory_require(o.batch > 1 ? "--batch" : "--prompt",
                   decode_memory_bytes(c, o.device == "cpu" ? o.batch : 0) +   // (the GPU's caches are its own)
                       double(o.batch) * double(c.heads) * longest * longest * 4,
                   cat("the weights, ", o.batch, " sequences' caches and the attention scores of a ", prompt,
                       "-token prefill"),
                   o.batch > 1 ? "a smaller --batch, or a shorter --prompt or --output" : "a shorter --prompt or --output");
    heap_keep_freed_memory();   // as retro-generate does
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), o.seed);
    const bool retrieval = !o.no_retrieval && c.first_cca_layer() > 0;
    const std::int64_t chunks = c.max_seq_len / c.chunk_size, KR = c.num_neighbours * c.retrieved_len();
    std::vector<std::int32_t> neighbours(static_cast<std::size_t>(chunks * KR));
    SplitMix64 rng(o.seed + 17);
    for (auto& id : neighbours) id = 4 + static_cast<std::int32_t>(rng.next() % (c.num_tokens - 4));

    DeviceModel device;
    std::string device_name = cpu_model();
    if (o.device == "cuda") {
        cuda_require("--device", "retro-bench generate");
        if constexpr (kCudaBuilt) {
            device.stream = std::make_unique<CudaStreamOwner>();
            device.be = nn::cuda_nn_backend(device.stream->get());
            device_name = cuda_device_name();
        }
    } else if (o.device == "host-backend") {
        device.be = std::make_unique<nn::HostNnBackend>();
    } else if (o.device != "cpu") {
        user_error_in("--device", "\"" + o.device + "\" is not a device", "use cpu or cuda");
    }
    if (device.be) {
        device.weights = nn::BackendBuffer(*device.be, model.params().size() * sizeof(float));
        device.be->upload(device.weights.get(), model.params().data(), model.params().size() * sizeof(float));
    }
    std::string dir;
    std::optional<ScratchDir> scratch;   // the peer's config and weights: removed at the end and on Ctrl-C
    if (o.peer_steps > 0 && !o.peer.empty()) {
        scratch.emplace("retro-bench-generate");
        dir = scratch->path();
        c.save(dir + "/config.json");
        params_save(dir + "/model.safetensors", model.params(), model.layout(), c);
    }
    std::printf("retro-bench generate: %s (--device %s), %d thread(s), decoder %lld x %lld, encoder %lld x %lld, "
                "vocabulary %lld, chunk %lld, k %lld, %s\n",
                device_name.c_str(), o.device.c_str(), thread_count(), static_cast<long long>(c.dec_depth), static_cast<long long>(c.dec_dim),
                static_cast<long long>(c.enc_depth), static_cast<long long>(c.enc_dim),
                static_cast<long long>(c.num_tokens), static_cast<long long>(c.chunk_size),
                static_cast<long long>(c.num_neighbours), retrieval ? "retrieval every chunk" : "no retrieval");
    // the memory bound of a decode step (issue 21): every weight read once, at the copy bandwidth measured here (bytes
    // read + written per second, as retro-bench retention's bound), so the bound is weight bytes / that rate
    const double weight_bytes = static_cast<double>(model.params().size() * sizeof(float));
    double copy_gbps = 0;
    if (o.device == "cuda") {
        if constexpr (kCudaBuilt) copy_gbps = cuda_copy_gbps(std::size_t(1) << 30, device.stream->get());
    } else {
        copy_gbps = memcpy_gbps();
    }
    const double bound_ms = copy_gbps > 0 ? 1e3 * weight_bytes / (copy_gbps * 1e9) : 0;
    std::printf("memory bound: %.1f MB of fp32 weights a token at %.1f GB/s (copy, read + written) = %.4f ms/token\n",
                weight_bytes / 1e6, copy_gbps, bound_ms);
    std::fflush(stdout);
    const std::int64_t B = o.batch;
    // warm-up: at most 16 tokens after at most 64 of the first prompt (within max_seq_len, sized for prompt + output)
    const std::int64_t warm_prompt = std::min<std::int64_t>(o.prompts[0], 64), warm_output = std::min<std::int64_t>(o.output, 16);
    run_ours(model, neighbours, warm_prompt, warm_output, retrieval, o.seed, device, B);
    if (graphs) run_ours(model, neighbours, warm_prompt, warm_output, retrieval, o.seed, device, B, true);
    // on the GPU, graph-eligible steps also as one fused kernel each (nn/decode_program.h), timed beside the graphs;
    // an error there (a kernel not yet run on this device) costs its column only
    bool fused = graphs && o.device == "cuda";
    auto fused_run = [&](std::int64_t P, std::int64_t n) -> std::optional<OurRun> {
        try {
            return run_ours(model, neighbours, P, n, retrieval, o.seed, device, B, true, nullptr,
                            nn::DecodeProgramMode::fused);
        } catch (const std::exception& e) {
            // a refused launch costs the column; a fault inside the kernel leaves the context dead, and every later
            // run would fail under another name: stop here, naming the fused step
            if (const std::string fault = cuda_context_fault(); !fault.empty())
                throw InternalError(cat("the fused decode step (RETRO_DECODE_PROGRAM=fused's kernel) faulted and left "
                                        "the GPU unusable (", fault, "): ", e.what()));
            log_warn(std::string("the fused decode step failed: ") + e.what());
            return std::nullopt;
        }
    };
    if (fused && !fused_run(warm_prompt, warm_output)) fused = false;
    const std::unique_ptr<nn::DecodeWeightsBf16> bf16 = o.bf16 ? linear_weights_bf16(model) : nullptr;

    std::vector<std::vector<std::string>> rows = {{"prompt", "output", "prefill ms", "ms/token", "x bound", "tokens/s",
                                                   "RP ms/token", "RP tokens/s", "speed-up"}};
    if (graphs) rows[0].insert(rows[0].begin() + 6, {"graph ms/token", "graph x bound"});
    if (fused) rows[0].insert(rows[0].begin() + 8, {"fused ms/token", "fused x bound"});
    if (bf16) rows[0].insert(rows[0].begin() + 6, {"bf16 ms/token", "bf16 speed-up", "same ids"});
    nlohmann::json results = nlohmann::json::array();
    std::vector<std::string> replay_lines;   // the device's time for a step alone (BackendDecoder::time_replays)
    for (auto P : o.prompts) {
        const OurRun ours = run_ours(model, neighbours, P, o.output, retrieval, o.seed, device, B);
        nlohmann::json row = {{"prompt", P},
                              {"output", o.output},
                              {"batch", B},
                              {"prefill_ms", ours.prefill_ms},
                              {"decode_ms_per_token", ours.decode_ms_per_token},
                              {"tokens_per_s", ours.tokens_per_s},
                              {"of_memory_bound", bound_ms > 0 ? ours.decode_ms_per_token / bound_ms : 0.0}};
        std::vector<std::string> cells = {std::to_string(P), std::to_string(o.output), format_fixed(ours.prefill_ms, 1),
                                          format_fixed(ours.decode_ms_per_token, 2),
                                          bound_ms > 0 ? format_fixed(ours.decode_ms_per_token / bound_ms, 1) : "-",
                                          format_fixed(ours.tokens_per_s, 1)};
        if (graphs) {   // the same decode with each step a captured graph: the same tokens, its time beside
            const OurRun graphed = run_ours(model, neighbours, P, o.output, retrieval, o.seed, device, B, true);
            row["graph_same_tokens"] = graphed.ids == ours.ids;   // same kernels, same arguments: same bits expected
            if (graphed.ids != ours.ids) log_warn("prompt " + std::to_string(P) + ": with --cuda-graphs other tokens were sampled");
            row["graph_decode_ms_per_token"] = graphed.decode_ms_per_token;
            if (graphed.replay_ms >= 0) {   // the step alone, back to back
                row["graph_replay_ms"] = graphed.replay_ms;
                replay_lines.push_back(cat("prompt ", P, ": the last step replayed ", kReplays,
                                           " times back to back: graph ", format_fixed(graphed.replay_ms, 4), " ms"));
            }
            row["graph_of_memory_bound"] = bound_ms > 0 ? graphed.decode_ms_per_token / bound_ms : 0.0;
            cells.push_back(format_fixed(graphed.decode_ms_per_token, 3));
            cells.push_back(bound_ms > 0 ? format_fixed(graphed.decode_ms_per_token / bound_ms, 1) : "-");
        }
        if (fused) {   // the same decode with each graph-eligible step one cooperative kernel: the same tokens expected
            const std::optional<OurRun> f = fused_run(P, o.output);
            if (f) {
                row["fused_same_tokens"] = f->ids == ours.ids;
                if (f->ids != ours.ids) log_warn(cat("prompt ", P, ": the fused decode step sampled other tokens"));
                row["fused_decode_ms_per_token"] = f->decode_ms_per_token;
                row["fused_of_memory_bound"] = bound_ms > 0 ? f->decode_ms_per_token / bound_ms : 0.0;
                row["fused_steps"] = f->fused_steps;
                if (f->replay_ms >= 0) {
                    row["fused_replay_ms"] = f->replay_ms;
                    // (a last step whose recording was refused replayed as a captured graph: said so, not "fused")
                    if (!replay_lines.empty())
                        replay_lines.back() +=
                            f->program_fallback.empty()
                                ? cat(", fused ", format_fixed(f->replay_ms, 4), " ms (", f->program_ops, " ops, ",
                                      f->program_barriers, " grid barriers)")
                                : cat(", not fused (", f->program_fallback, ") ", format_fixed(f->replay_ms, 4), " ms");
                }
                row["fused_fallback"] = f->program_fallback;   // why the last recording ran as a graph ("" fused)
                row["fused_ops"] = f->program_ops;             // a step's ops, and the grid barriers between them
                row["fused_barriers"] = f->program_barriers;
                if (f->fused_steps == 0) log_warn("no decode step ran fused: " + f->program_fallback);
                cells.push_back(format_fixed(f->decode_ms_per_token, 3));
                cells.push_back(bound_ms > 0 ? format_fixed(f->decode_ms_per_token / bound_ms, 1) : "-");
            } else {
                row["fused_error"] = true;
                cells.insert(cells.end(), {"failed", "-"});
            }
        }
        if (bf16) {   // the same prompt with bf16 decode weights: its time, and how many sampled ids stay the fp32 run's
            const OurRun half = run_ours(model, neighbours, P, o.output, retrieval, o.seed, device, B, false, bf16.get());
            // sequence 0's ids (its prompt, then its `output` tokens): the tokens sampled alike before bf16's first
            // other choice (the same random draws; a near tie in the logits can go the other way)
            std::int64_t same = 0;
            while (same < P + o.output && half.ids[static_cast<std::size_t>(same)] == ours.ids[static_cast<std::size_t>(same)])
                ++same;
            row["bf16_decode_ms_per_token"] = half.decode_ms_per_token;
            row["bf16_tokens_per_s"] = half.tokens_per_s;
            row["bf16_speedup"] = ours.decode_ms_per_token / half.decode_ms_per_token;
            row["bf16_same_tokens"] = same - P;
            cells.push_back(format_fixed(half.decode_ms_per_token, 2));
            cells.push_back(format_fixed(ours.decode_ms_per_token / half.decode_ms_per_token, 2) + "x");
            cells.push_back(cat(same - P, "/", o.output));
        }
        if (!dir.empty()) {
            const nlohmann::json peer = run_peer(o, dir, P, retrieval);
            row["peer"] = peer;
            if (peer.contains("skipped")) {
                log_warn("peer skipped: " + peer["skipped"].get<std::string>());
                cells.insert(cells.end(), {"skipped", "-", "-"});
            } else {
                const double pm = peer.at("ms_per_token").get<double>();
                row["speedup"] = pm / ours.decode_ms_per_token;
                cells.push_back(format_fixed(pm, 1));
                cells.push_back(format_fixed(1e3 / pm, 2));
                cells.push_back(format_fixed(pm / ours.decode_ms_per_token, 1) + "x");
            }
        } else {
            cells.insert(cells.end(), {"-", "-", "-"});
        }
        results.push_back(row);
        rows.push_back(cells);
    }
    nlohmann::json profile;
    if (o.profile_tokens > 0) {
        if (!device.be) user_error_in("--profile", "times the GPU path's ops", "use it with --device cuda");
        // the last prompt again, through nn::ProfilingNnBackend; the prefill's ops are their own rows (their shapes
        // differ), and everything is per generated token
        nn::ProfilingNnBackend prof(*device.be);
        BackendDecoder dec(c, device.weights.f(), prof, B, retrieval);
        run_ours_with(dec, c, neighbours, o.prompts.back(), o.profile_tokens, retrieval, o.seed, B);
        const OpProfile p = op_profile(prof.timings(), static_cast<double>(o.profile_tokens), B > 1 ? "step" : "token");
        std::printf("profile: prompt %lld then %lld tokens, each op between two synchronizes: %.3f ms per token inside "
                    "the ops (the prefill's rows included)\n%s",
                    static_cast<long long>(o.prompts.back()), static_cast<long long>(o.profile_tokens), p.ms_in_ops,
                    p.table.c_str());
        profile = p.json;
    }
    std::printf("%s", format_table(rows).c_str());
    std::printf("ms/token: our decode steps from the prompt to prompt + output%s; x bound: that over the memory bound "
                "above; tokens/s: output tokens over prefill + decode time; RP: its first %lld steps from the prompt\n",
                B > 1 ? (", each a token for every one of the " + std::to_string(B) + " sequences (tokens/s counts them all)").c_str() : "",
                static_cast<long long>(o.peer_steps));
    for (const auto& line : replay_lines) std::printf("%s\n", line.c_str());
    if (graphs) std::printf("graph: each decode step one captured graph%s\n",
                            fused ? "; fused: each one cooperative kernel (nn/decode_program.h), the steps a graph cannot "
                                    "replay (a chunk to encode) as launched ops in both"
                                  : "");
    if (!o.json.empty()) {
        nlohmann::json j = {{"stamp", stamp("retro-bench generate", command_line)},
                            {"cpu", cpu_model()},
                            {"device", o.device},
                            {"device_name", device_name},
                            {"threads", thread_count()},
                            {"config", c.to_json()},
                            {"retrieval", retrieval},
                            {"weight_bytes", weight_bytes},
                            {"copy_gbps", copy_gbps},
                            {"memory_bound_ms_per_token", bound_ms},
                            {"results", results}};
        if (!profile.is_null()) j["profile"] = profile;
        bench_json_write(o.json, j, "retro-bench generate", command_line);
    }
}

}  // namespace retro::bench
