// Implementation of chunk_bench.h. retro-chunk runs as a child process (the tool as users run it):
// its CPU time comes from wait4(), its peak RSS from its own VmHWM, untouched by this process's buffers.
#include "bench/chunk_bench.h"

#include "core/atomic_file.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "core/child_process.h"
#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/memory_budget.h"
#include "core/scratch_dir.h"
#include "core/threads.h"
#include "data/synthetic_text.h"
#include "text/corpus.h"
#include "text/tokenizer.h"
#include "text/tokenizer_folder.h"

extern char** environ;
namespace fs = std::filesystem;

namespace retro::bench {
namespace {

double process_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string default_chunk_bin() {
    fs::path exe = fs::read_symlink("/proc/self/exe").parent_path();
    for (fs::path p : {exe / "retro-chunk", exe / "bin" / "retro-chunk"})
        if (fs::exists(p)) return p.string();
    user_error_in("retro-chunk", "binary not found next to " + exe.string(), "pass --chunk-bin PATH");
}

struct ChildRun {
    double wall_s = 0, cpu_s = 0;
    std::int64_t peak_rss_bytes = 0;    // VmHWM: includes file pages mapped while fingerprinting
    std::int64_t peak_anon_bytes = 0;   // RssAnon sampled every 20 ms: the process's own memory
};

// Runs argv (argv[0] = binary) and waits; UserError when it fails.
ChildRun run_child(const std::vector<std::string>& args) {
    auto t0 = std::chrono::steady_clock::now();
    // the environment, with retro-chunk's Ctrl-C note off (core/interrupt_note.h): its "continue with the same command
    // and --resume" names a command the user never gave, in a folder the bench removes
    std::vector<std::string> env{"RETRO_INTERRUPT_NOTE=off"};
    for (char** e = environ; *e; ++e)
        if (std::string(*e).rfind("RETRO_INTERRUPT_NOTE=", 0) != 0) env.push_back(*e);
    ChildProcess child(args, env);   // (a SIGINT or SIGTERM to the bench reaches it too)
    // ru_maxrss of a spawned child starts at this process's own peak (the shared mm before exec is
    // counted), so the child's peak is VmHWM of its own /proc status, sampled until it exits.
    int status = 0;
    struct rusage ru{};
    ChildRun r;
    const std::string status_path = "/proc/" + std::to_string(child.pid()) + "/status";
    while (!child.poll(status, &ru)) {
        std::ifstream in(status_path);
        for (std::string line; std::getline(in, line);)
            if (line.rfind("VmHWM:", 0) == 0) r.peak_rss_bytes = std::max<std::int64_t>(r.peak_rss_bytes, std::stoll(line.substr(6)) * 1024);
            else if (line.rfind("RssAnon:", 0) == 0)
                r.peak_anon_bytes = std::max<std::int64_t>(r.peak_anon_bytes, std::stoll(line.substr(8)) * 1024);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    r.wall_s = seconds_since(t0);
    r.cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        user_error_in(args[0], "failed (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
    return r;
}

}  // namespace

nlohmann::json run_chunk_bench(const ChunkBenchOptions& o, const std::string& command_line) {
    if (o.corpus.empty() && !(o.size_mb > 0 && std::isfinite(o.size_mb)))
        user_error_in("--size-mb", cat(o.size_mb, " is not a corpus size"), "give the MB of text to generate, e.g. 64");
    if (o.corpus.empty() && o.size_mb < 0.001)   // (1e-9 generated an empty corpus, then blamed the scratch file)
        user_error_in("--size-mb", cat(o.size_mb, " MB is less than a kilobyte of text: nothing to time"),
                      "give the MB of text to generate, e.g. 64 (at least 0.001)");
    for (int t : o.threads)
        if (t < 1) user_error_in("--chunk-threads", cat(t, " is not a thread count"), "give counts >= 1, e.g. 1,2");
    if (!(o.encode_mb > 0 && std::isfinite(o.encode_mb)))
        user_error_in("--encode-mb", cat(o.encode_mb, " is not a size"), "give the MB of text for the Encode loop, e.g. 8");
    std::vector<BenchPath> ins;
    for (const auto& c : o.corpus) ins.push_back({"the corpus", c});
    ins.push_back({"--tokenizer", o.tokenizer});
    ins.push_back({"--chunk-bin", o.chunk_bin});
    bench_refuse_outputs_over_inputs({{"--json", o.json}, {"--work-dir", o.work_dir}}, ins);
    // before the corpus is generated and the tokenizer trained (both were refused only after them)
    const std::string bin = o.chunk_bin.empty() ? default_chunk_bin() : o.chunk_bin;
    if (std::error_code ec; !fs::is_regular_file(bin, ec) || ::access(bin.c_str(), X_OK) != 0)
        user_error_in("--chunk-bin", bin + " is not an executable file", "give the path of the retro-chunk binary");
    if (o.tokenizer.empty()) {
        TokenizerTrainOptions to;
        to.vocab_size = o.vocab_size;
        tokenizer_train_options_check(to);
    }
    // a --work-dir of its own: made here, or holding only what an earlier run of this bench made (its mark), never a
    // folder of the user's (its corpus.jsonl, tok.model and db/ are written over; a real database was replaced)
    constexpr const char* kWorkMark = "retro-bench-chunk.work";
    if (std::error_code ec; !o.work_dir.empty() && fs::exists(o.work_dir, ec) && !fs::is_directory(o.work_dir, ec))
        user_error_in("--work-dir", o.work_dir + " is a file, not a folder", "give a new or empty folder");   // ("cannot create directories")
    if (!o.work_dir.empty()) {   // nor --json over one of the files the bench writes there (the report replaced the corpus)
        const fs::path wd(o.work_dir);
        bench_refuse_outputs_over_inputs({{"--json", o.json}}, {{"the --work-dir's corpus", (wd / "corpus.jsonl").string()},
                                                                {"the --work-dir's tokenizer", (wd / "tok.model").string()},
                                                                {"the --work-dir's database", (wd / "db").string()},
                                                                {"the --work-dir's mark", (wd / kWorkMark).string()}});
    }
    if (!o.work_dir.empty() && fs::is_directory(o.work_dir) && !fs::is_empty(o.work_dir) &&
        !fs::exists(fs::path(o.work_dir) / kWorkMark))
        user_error_in("--work-dir", o.work_dir + " holds files retro-bench chunk did not make (it writes corpus.jsonl, "
                                    "tok.model and db/ there)",
                      "give an empty or new folder");
    std::optional<ScratchDir> scratch;   // removed at the end, and on Ctrl-C (core/scratch_dir.h)
    if (o.work_dir.empty()) scratch.emplace("retro-bench-chunk");
    const fs::path work = scratch ? fs::path(scratch->path()) : fs::path(o.work_dir);
    fs::create_directories(work);
    write_file_atomic((work / kWorkMark).string(), "a work folder of retro-bench chunk: its files are written over\n");

    std::vector<std::string> inputs = o.corpus;
    bool generated = inputs.empty();
    if (generated) {
        // the text, then retro-chunk's database of it (4-byte ids, about a token per 4 bytes of text: as large
        // again) and its offsets, once per --chunk-threads row (one database at a time)
        const double need = 2.2 * o.size_mb * 1e6;
        std::error_code ec;
        const auto space = fs::space(work, ec);
        if (!ec && static_cast<double>(space.available) < need)
            user_error_in("--size-mb", cat(o.size_mb, " MB of text and its database need about ",
                                           memory_format_bytes(need), " of disk; ", work.string(), " has ",
                                           memory_format_bytes(static_cast<double>(space.available)), " free"),
                          "give a smaller --size-mb, or --work-dir on a larger disk");
        auto t0 = std::chrono::steady_clock::now();
        std::string path = (work / "corpus.jsonl").string();
        std::int64_t docs = synthetic_jsonl_write(path, 1, static_cast<std::int64_t>(o.size_mb * 1e6), 4000);
        log_info("generated " + path + " (" + std::to_string(docs) + " documents) in " + format_fixed(seconds_since(t0), 1) + " s");
        inputs.push_back(path);
    }
    CorpusOptions co;   // (retro-chunk's own reading of the corpus, as its flags below say)
    co.glob = o.glob;
    co.text_key = o.text_key;
    co.on_error = o.on_error == "skip" ? OnError::SKIP : OnError::FAIL;
    auto files = corpus_list_files(inputs, co);
    std::string tok_path = o.tokenizer.empty() ? std::string() : tokenizer_resolve_path(o.tokenizer);
    if (tok_path.empty()) {
        auto t0 = std::chrono::steady_clock::now();
        TokenizerTrainOptions to;
        to.vocab_size = o.vocab_size;
        to.max_sentences = 100'000;
        auto r = tokenizer_train(files, co, to);
        tok_path = (work / "tok.model").string();
        std::ofstream(tok_path, std::ios::binary) << r.model_bytes;
        log_info("trained a " + std::to_string(r.vocab_size) + "-piece tokenizer in " + format_fixed(seconds_since(t0), 1) + " s");
    }
    Tokenizer tok(tok_path);

    // The text: total bytes (for MB/s) and the first encode_mb of it in memory for the bare loop.
    std::vector<std::string> sample;
    std::int64_t text_bytes = 0, sample_bytes = 0;
    CorpusCounts counts;
    for (const auto& f : files)
        corpus_read_file(f, co, counts, [&](Document& d) {
            text_bytes += static_cast<std::int64_t>(d.text.size());
            if (sample_bytes < o.encode_mb * 1e6) {
                sample_bytes += static_cast<std::int64_t>(d.text.size());
                sample.push_back(std::move(d.text));
            }
        });
    auto t0 = std::chrono::steady_clock::now();
    double cpu0 = process_cpu_seconds();
    std::int64_t sample_tokens = 0;
    for (const auto& s : sample) sample_tokens += static_cast<std::int64_t>(tok.encode(s).size());
    double loop_s = seconds_since(t0), loop_cpu = process_cpu_seconds() - cpu0;
    std::vector<std::string>().swap(sample);
    double loop_mbs = sample_bytes / 1e6 / loop_s, loop_tps = sample_tokens / loop_s;

    nlohmann::json result = stamp("retro-bench chunk", command_line);
    result["machine"] = {{"cpu", cpu_model()}, {"hardware_threads", hardware_threads()}};
    result["corpus"] = {{"inputs", inputs}, {"generated", generated}, {"text_bytes", text_bytes},
                        {"documents", counts.documents}, {"tokenizer", tok_path}, {"vocab_size", tok.vocab_size()}};
    result["encode_loop"] = {{"threads", 1}, {"text_bytes", sample_bytes}, {"tokens", sample_tokens},
                             {"seconds", loop_s}, {"cpu_seconds", loop_cpu}, {"mb_per_s", loop_mbs},
                             {"mb_per_cpu_s", sample_bytes / 1e6 / loop_cpu}, {"tokens_per_s", loop_tps}};
    std::vector<std::vector<std::string>> table{
        {"what", "threads", "MB/s", "Mtok/s", "wall s", "cpu s", "MB/cpu-s", "peak RSS MB", "peak anon MB", "vs Encode loop"},
        {"sentencepiece Encode loop, in-process", "1", format_fixed(loop_mbs, 2), format_fixed(loop_tps / 1e6, 3), format_fixed(loop_s, 2),
         format_fixed(loop_cpu, 2), format_fixed(sample_bytes / 1e6 / loop_cpu, 2), "-", "-", "1.00"}};

    std::vector<int> threads = o.threads.empty() ? std::vector<int>{1, hardware_threads()} : o.threads;
    if (threads.size() == 2 && threads[0] == threads[1]) threads.pop_back();
    nlohmann::json runs = nlohmann::json::array();
    double one_thread_mbs = 0;
    for (int t : threads) {
        std::vector<std::string> args{bin};
        args.insert(args.end(), inputs.begin(), inputs.end());
        std::vector<std::string> flags{"--tokenizer", tok_path, "--out", (work / "db").string(), "--force",
                                       "--quiet", "--threads", std::to_string(t), "--glob", o.glob, "--text-key", o.text_key,
                                       "--on-error", o.on_error};
        args.insert(args.end(), flags.begin(), flags.end());
        ChildRun r = run_child(args);
        if (!fs::exists(work / "db" / "manifest.json"))   // (a --chunk-bin that is not retro-chunk: "db: no such folder")
            user_error_in("--chunk-bin", bin + " ended without writing a database in " + (work / "db").string(),
                          "give the path of the retro-chunk binary");
        auto m = manifest_read((work / "db").string());
        std::int64_t tokens = m["stats"]["tokens"].get<std::int64_t>();
        double mbs = text_bytes / 1e6 / r.wall_s, tps = tokens / r.wall_s;
        if (t == 1) one_thread_mbs = mbs;
        runs.push_back({{"threads", t}, {"seconds", r.wall_s}, {"cpu_seconds", r.cpu_s}, {"mb_per_s", mbs},
                        {"tokens_per_s", tps}, {"mb_per_cpu_s", text_bytes / 1e6 / r.cpu_s}, {"tokens", tokens}, {"peak_rss_bytes", r.peak_rss_bytes}, {"peak_anon_rss_bytes", r.peak_anon_bytes},
                        {"vs_encode_loop", mbs / loop_mbs}});
        table.push_back({"retro-chunk", std::to_string(t), format_fixed(mbs, 2), format_fixed(tps / 1e6, 3), format_fixed(r.wall_s, 2),
                         format_fixed(r.cpu_s, 2), format_fixed(text_bytes / 1e6 / r.cpu_s, 2), format_fixed(r.peak_rss_bytes / 1e6, 1), format_fixed(r.peak_anon_bytes / 1e6, 1), format_fixed(mbs / loop_mbs, 2)});
    }
    // each row against the 1-thread row wherever that ran (it was 0 for rows before it), null without one
    for (auto& run : runs)
        run["vs_one_thread"] = one_thread_mbs > 0 ? nlohmann::json(run["mb_per_s"].get<double>() / one_thread_mbs)
                                                  : nlohmann::json(nullptr);
    result["retro_chunk"] = runs;
    std::cout << "retro-bench chunk: " << format_fixed(text_bytes / 1e6, 1) << " MB of text, " << counts.documents
              << " documents, " << (generated ? "generated" : "given") << ", vocabulary " << tok.vocab_size() << ", "
              << cpu_model() << "\n"
              << format_table(table);
    if (!o.json.empty()) {
        bench_json_write(o.json, result, "retro-bench chunk", command_line);   // (an unchecked ofstream said "wrote" for a missing folder)
        if (o.json != "-") log_info("wrote " + o.json);
    }
    return result;
}

}  // namespace retro::bench
