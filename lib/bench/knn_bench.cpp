// Implementation of knn_bench.h. FLOPs of exact search: 2 * queries * n * dim (the sgemm; the
// top-k scan is not counted).
#include "bench/knn_bench.h"

#include <cblas.h>
#include <faiss/IndexFlat.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "bench/bench_util.h"
#include "core/fingerprint.h"
#include "core/atomic_file.h"
#include "core/cuda_device.h"
#include "core/error.h"
#include "core/shell_quote.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/npy.h"
#include "core/scratch_dir.h"
#include "core/threads.h"
#include "index/exact_search.h"
#include "index/exact_search_cuda.h"
#include "index/faiss_index.h"

namespace retro::bench {
namespace {

double seconds_of(const std::function<void()>& fn) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Clustered unit vectors (a retrieval-like distribution), deterministic.
std::vector<float> make_vectors(std::int64_t n, int d, int clusters, std::uint64_t seed, const std::vector<float>& centres) {
    std::vector<float> x(static_cast<std::size_t>(n * d));
    parallel_ranges(n, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t i = b; i < e; ++i) {
            std::mt19937_64 rng(seed * 1000003 + static_cast<std::uint64_t>(i));
            std::normal_distribution<float> g(0.0f, 1.0f);
            std::int64_t c = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(clusters));
            double norm = 0;
            for (int t = 0; t < d; ++t) {
                float v = centres[static_cast<std::size_t>(c * d + t)] + 0.5f * g(rng);
                x[static_cast<std::size_t>(i * d + t)] = v;
                norm += double(v) * v;
            }
            float inv = static_cast<float>(1.0 / std::sqrt(norm));
            for (int t = 0; t < d; ++t) x[static_cast<std::size_t>(i * d + t)] *= inv;
        }
    });
    return x;
}

// The block the sgemm reference multiplies: the exact search's retrieval block, up to 4096 queries x 65536 base rows,
// cut to the run's --queries and --n and to 1.25 GiB of A, B and C together, which keeps the full block (and the
// figures measured with it) up to a dim of about 900 (it was 4096 x 65536 whatever the sizes:
// 1 GiB of C for a 1,000-vector base, and 8 GiB of B at --dim 32768).
struct SgemmBlock {
    std::int64_t m = 0, n = 0;
    double bytes(int d) const { return 4.0 * (double(m) * d + double(n) * d + double(m) * double(n)); }
};

SgemmBlock sgemm_block(std::int64_t queries, std::int64_t base, int d) {
    SgemmBlock b{std::min<std::int64_t>(4096, queries), std::min<std::int64_t>(65536, base)};
    const double cap = 1.25 * (1 << 30);
    while (b.n > 1 && b.bytes(d) > cap) b.n /= 2;
    while (b.m > 1 && b.bytes(d) > cap) b.m /= 2;
    return b;
}

// OpenBLAS's own multithreaded sgemm on that block, (m x d) * (n x d)^T.
double sgemm_block_gflops(const SgemmBlock& blk, int d, int threads) {
    const auto m = static_cast<int>(blk.m), n = static_cast<int>(blk.n);
    std::vector<float> a(static_cast<std::size_t>(m) * d, 0.5f), b(static_cast<std::size_t>(n) * d, 0.25f),
        c(static_cast<std::size_t>(m) * n);
    int before = openblas_get_num_threads();
    openblas_set_num_threads(threads);
    auto once = [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, d, 1.0f, a.data(), d, b.data(), d, 0.0f, c.data(), n); };
    once();
    double best = 1e30;
    for (int r = 0; r < 3; ++r) best = std::min(best, seconds_of(once));
    openblas_set_num_threads(before);
    return 2.0 * m * n * d / best / 1e9;
}

std::string fmt(double v, const char* f = "%.1f") {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

}  // namespace

void run_knn_bench(const KnnBenchOptions& o, const std::string& command_line) {
    int d = o.dim;
    const int k = o.k;
    std::int64_t n = o.n, q = o.queries;
    if (o.cuda) cuda_require("--cuda", "retro-bench");   // before minutes of CPU rows, not after
    bench_refuse_outputs_over_inputs({{"--json", o.json}}, {{"--base-npy", o.base_npy}, {"--queries-npy", o.queries_npy},
                                                            {"--peer", o.peer}, {"--index-cache", o.ann.index_cache}});
    if (o.base_npy.empty() && n < 1) user_error_in("--n", cat(n, " is not a number of base vectors"));
    if (o.base_npy.empty() && q < 1) user_error_in("--queries", cat(q, " is not a number of queries"));
    if (o.base_npy.empty() && d < 1) user_error_in("--dim", cat(d, " is not a dimension"));
    if (k < 1) user_error_in("--k", cat(k, " is not a number of neighbours"));
    if (o.base_npy.empty() && k > n)   // recall@k over fewer than k vectors means nothing
        user_error_in("--k", cat(k, " neighbours of ", n, " base vectors"), "give a --k of at most --n");
    if (o.base_npy.empty() && o.clusters < 1) user_error_in("--clusters", cat(o.clusters, " is not a number of centres"));
    if (o.base_npy.empty() && o.clusters > std::max<std::int64_t>(n, 10000))   // (2e9 centres: a bad_alloc, exit 1)
        user_error_in("--clusters", cat(o.clusters, " centres for ", n, " base vectors"),
                      "give at most --n centres (or the default 10,000)");
    if (o.ann.hnsw_m > 4096)   // retro-index's bound (2 to 4,096): 50,000 asked FAISS for ~40 GB of links
        user_error_in("--hnsw-m", cat(o.ann.hnsw_m, " neighbours a node is past HNSW's 4,096"), "give e.g. 32");
    if (o.ann.hnsw_m == 1)   // FAISS's HNSW1 never finished building, its memory growing by GBs a second
        user_error_in("--hnsw-m", "1 neighbour a node: HNSW needs at least 2", "give e.g. 32, or 0 for no HNSW rows");
    if (o.ann.ivf_nlist < 0) user_error_in("--ivf-nlist", cat(o.ann.ivf_nlist, " is not a list count"), "give 0 for no IVF rows");
    if (o.ann.pq_m < 0) user_error_in("--pq-m", cat(o.ann.pq_m, " is not a sub-quantizer count"), "give 0 for no IVF-PQ rows");
    if (o.ann.hnsw_m < 0) user_error_in("--hnsw-m", cat(o.ann.hnsw_m, " is not a neighbour count"), "give 0 for no HNSW rows");
    for (int p : o.ann.nprobe)
        if (p < 1) user_error_in("--nprobe", cat(p, " is not a number of lists to probe"));
    if (o.ann.rounds < 1) user_error_in("--rounds", cat(o.ann.rounds, " is not a number of rounds"), "give 1 or more");
    if (o.ann.debian_queries < 0)
        user_error_in("--debian-queries", cat(o.ann.debian_queries, " is not a number of queries"),
                      "give 0 for no Debian FAISS rows");
    for (int e : o.ann.ef_search)
        if (e < 1) user_error_in("--ef-search", cat(e, " is not a search width"));
    for (int t : o.threads)
        if (t < 1) user_error_in("--thread-counts", cat(t, " is not a thread count"));
    std::vector<int> threads = o.threads.empty() ? std::vector<int>{1, hardware_threads()} : o.threads;
    if (threads.size() == 2 && threads[0] == threads[1]) threads.pop_back();
    if (o.base_npy.empty())
        memory_require("--n, --queries and --dim", (double(n) + double(q)) * d * 4 * 2.5,
                       cat("the synthetic base and queries (", n, " + ", q, " vectors of ", d, " floats) and their indices"),
                       "a smaller --n, --queries or --dim");
    std::vector<float> base, queries;
    std::string data_key;   // names the vectors in the index cache
    if (!o.base_npy.empty()) {   // real vectors (e.g. an index folder's embeddings.npy)
        if (o.queries_npy.empty()) user_error_in("--base-npy", "needs --queries-npy too");
        auto load = [&](const std::string& path, std::vector<float>& out) {
            NpyArray a(path);
            if (a.dtype() != DType::F32 || a.shape().size() != 2) user_error_in(path, "must be a 2-d float32 array");
            out.assign(a.data<float>(), a.data<float>() + a.numel());
            // a NaN or infinity: the exact rows ranked it silently, then FAISS's training asserted, blamed on "--index"
            for (std::size_t i = 0; i < out.size(); ++i)
                if (!std::isfinite(out[i]))
                    user_error_in(path, cat("row ", static_cast<std::int64_t>(i) / a.dim(1), " holds a value that is not finite (", out[i], ")"),
                                  "give vectors of finite numbers");
            return a.dim(1);
        };
        d = static_cast<int>(load(o.base_npy, base));
        if (load(o.queries_npy, queries) != d) user_error_in(o.queries_npy, "has another dimension than --base-npy");
        n = static_cast<std::int64_t>(base.size()) / d;
        q = static_cast<std::int64_t>(queries.size()) / d;
        if (k > n) user_error_in("--k", cat(k, " neighbours of the ", n, " vectors of ", o.base_npy), cat("give a --k of at most ", n));
        if (q < 1) user_error_in(o.queries_npy, "holds no vectors");
        // (the vectors' own bytes in the key: two files of one name and shape, e.g. two indices' embeddings.npy, once
        // shared a cached index, and the second reported recall 0)
        data_key = std::filesystem::path(o.base_npy).stem().string() + "_" + std::to_string(n) + "x" + std::to_string(d) +
                   "_" + fingerprint_bytes(base.data(), base.size() * sizeof(float)).substr(0, 12);
    } else {
        log_info("generating " + std::to_string(n) + " base and " + std::to_string(q) + " query vectors, d=" + std::to_string(d));
        std::vector<float> centres(static_cast<std::size_t>(o.clusters) * d);
        std::mt19937_64 rng(7);
        std::normal_distribution<float> g(0.0f, 1.0f);
        for (auto& c : centres) c = g(rng);
        base = make_vectors(n, d, o.clusters, 1, centres);
        queries = make_vectors(q, d, o.clusters, 2, centres);
        data_key = "synthetic_" + std::to_string(n) + "x" + std::to_string(d) + "_c" + std::to_string(o.clusters);
    }
    // --ivf-nlist's default (4,096) on fewer base vectors than FAISS trains that many lists on (39 a list): FAISS
    // warned and the k-means took most of a small run (a helper's docs walk, session 67): the largest power of two
    // the vectors train, said in a line; a given --ivf-nlist is taken as it is
    std::int64_t nlist = o.ann.ivf_nlist;
    if (!o.ann.ivf_nlist_given && nlist > 0 && n < 39 * nlist) {
        nlist = 1;
        while (nlist * 2 * 39 <= n) nlist *= 2;
        log_info(cat("IVF rows with ", nlist, " lists: ", n, " base vectors train at most that many at 39 a list (not the "
                     "default ", o.ann.ivf_nlist, "; --ivf-nlist sets it)"));
    }
    for (int p : o.ann.nprobe)   // FAISS and RetroKit probe min(nprobe, nlist) lists: the row's label would mislead
        if (nlist > 0 && p > nlist)
            log_warn(cat("--nprobe ", p, " is above the IVF's ", nlist, " lists: that row probes all ", nlist,
                         " lists (an exhaustive scan through the IVF)"));
    // the approximate rows' indices must be trainable on n vectors: refused here, before the exact rows' minutes
    // (FAISS's k-means wants a point per list; IVF-PQ's 8-bit codebooks 39 x 256 points)
    if (nlist > n)
        user_error_in("--ivf-nlist", cat(nlist, " lists need at least as many base vectors; there are ", n),
                      cat("give --ivf-nlist ", std::max<std::int64_t>(1, n / 39), " (39 vectors a list) or 0 for no IVF rows"));
    if (nlist > 0 && o.ann.pq_m > 0 && n < 39 * 256)
        user_error_in("--pq-m", cat("IVF-PQ's codebooks need at least ", 39 * 256, " base vectors to train; there are ", n),
                      "give --pq-m 0 for no IVF-PQ rows");
    if (nlist > 0 && o.ann.pq_m > 0 && d % o.ann.pq_m != 0)   // (FAISS refused it after the IVF-Flat rows, as "--index")
        user_error_in("--pq-m", cat(o.ann.pq_m, " sub-quantizers do not divide the dimension ", d),
                      "give a divisor of the dimension, or 0 for no IVF-PQ rows");
    const double gflop = 2.0 * q * n * d / 1e9;
    std::vector<std::string> kernels = o.kernels;
    if (kernels.empty()) {
        if (exact_kernel_resolve(ExactKernel::AUTO) == ExactKernel::AVX512) kernels.push_back("avx512");
        kernels.push_back("sgemm");
    }
    for (const auto& name : kernels) {
        if (name != "avx512" && name != "sgemm") user_error_in("--kernels", "unknown kernel '" + name + "' (expected avx512, sgemm)");
        if (name == "avx512") exact_kernel_resolve(ExactKernel::AVX512);   // a user error without AVX-512F
    }

    const SgemmBlock blk = sgemm_block(q, n, d);
    memory_require("--n, --queries and --dim", blk.bytes(d),
                   cat("the sgemm reference's ", blk.m, " x ", blk.n, " block of ", d, " floats beside the vectors"),
                   "a smaller --dim");
    nlohmann::json result = stamp("retro-bench knn", command_line);
    result["machine"] = {{"cpu", cpu_model()}, {"hardware_threads", hardware_threads()}};
    result["shape"] = {{"n", n}, {"dim", d}, {"queries", q}, {"k", k}, {"clusters", o.clusters}};
    result["sgemm_block"] = {{"m", blk.m}, {"n", blk.n}, {"k", d}};
    result["flops_formula"] = "2 * queries * n * dim per exact search";
    std::vector<std::vector<std::string>> table{{"threads", "method", "queries/s", "GFLOP/s", "vs sgemm", "recall@k", "note"}};
    std::vector<std::int64_t> truth(static_cast<std::size_t>(q * k));
    nlohmann::json rows = nlohmann::json::array();
    faiss::IndexFlatIP flat(d);
    flat.add(n, base.data());
    // one table/JSON row; `threads` is a CPU thread count or "gpu", `sg` the sgemm rate of that device
    auto add_row = [&](const std::string& threads_label, double sg, const std::string& method, double secs, double recall,
                       bool exact_flops, const std::string& note) {
        double qps = q / secs, g = exact_flops ? gflop / secs : 0;
        table.push_back({threads_label, method, fmt(qps), exact_flops ? fmt(g) : "-", exact_flops ? fmt(g / sg, "%.2f") : "-",
                         fmt(recall, "%.4f"), note});
        nlohmann::json threads_json = threads_label == "gpu" ? nlohmann::json("gpu") : nlohmann::json(std::stoi(threads_label));
        rows.push_back({{"threads", threads_json}, {"method", method}, {"seconds", secs}, {"queries_per_s", qps},
                        {"gflops", g}, {"sgemm_gflops", sg}, {"ratio_to_sgemm", exact_flops ? g / sg : 0}, {"recall_at_k", recall}, {"note", note}});
    };
    for (int t : threads) {
        set_thread_count(t);
        openblas_set_num_threads(t);   // FAISS's sgemm too: "t threads" means t cores for every method
        double sg = sgemm_block_gflops(blk, d, t);
        log_info("threads " + std::to_string(t) + ": sgemm " + fmt(sg) + " GFLOP/s on a " + std::to_string(blk.m) + " x " +
                 std::to_string(blk.n) + " x " + std::to_string(d) + " block");
        std::vector<std::int64_t> ids(static_cast<std::size_t>(q * k));
        std::vector<float> scores(ids.size());
        std::vector<std::pair<std::string, double>> ours;   // kernel, seconds
        for (const auto& name : kernels) {
            ExactSearchOptions eo;
            eo.k = k;
            eo.kernel = name == "sgemm" ? ExactKernel::SGEMM : ExactKernel::AVX512;
            if (o.query_block > 0) eo.query_block = o.query_block;
            if (o.base_block > 0) eo.base_block = o.base_block;
            // a warm-up on a few queries first (the thread pool, the kernel's scratch, the base's pages), then one
            // timed search of all queries
            exact_search_ip(queries.data(), std::min<std::int64_t>(q, 64), base.data(), n, d, eo, ids.data(), scores.data());
            double secs = seconds_of([&] { exact_search_ip(queries.data(), q, base.data(), n, d, eo, ids.data(), scores.data()); });
            if (ours.empty()) truth = ids;
            else if (ids != truth)   // the kernels sum in another order: near-tied scores may swap
                log_info("exact kernels " + kernels.front() + " and " + name + ": recall@k of one against the other " +
                         fmt(recall_at_k(ids, truth, q, k), "%.6f"));
            ours.emplace_back(name, secs);
        }
        std::vector<faiss::Index::idx_t> fids(ids.size());
        flat.search(std::min<std::int64_t>(q, 64), queries.data(), k, scores.data(), fids.data());   // warm-up as ours
        double s_flat = seconds_of([&] { flat.search(q, queries.data(), k, scores.data(), fids.data()); });
        std::vector<std::int64_t> fids64(fids.begin(), fids.end());
        double r_flat = recall_at_k(fids64, truth, q, k);
        auto add_cpu_row = [&](const std::string& method, double secs, double recall, bool exact_flops, const std::string& note) {
            add_row(std::to_string(t), sg, method, secs, recall, exact_flops, note);
        };
        for (const auto& [name, secs] : ours) {
            add_cpu_row("retrokit exact " + name, secs, 1.0, true, "speedup vs faiss flat " + fmt(secs > 0 ? s_flat / secs : 0, "%.2f") + "x");
            rows.back()["speedup_vs_faiss_flat"] = s_flat / secs;
        }
        add_cpu_row("faiss IndexFlatIP", s_flat, r_flat, true, "");
    }
    if constexpr (kCudaBuilt) {
        if (o.cuda) {   // cuBLAS sgemm + top-k kernel; seconds include the query upload and result download
            const std::int64_t qb = std::min<std::int64_t>(q, 4096);
            const CudaStreamOwner stream;
            // cuBLAS on exact search's score block
            const double sg = cuda_sgemm_gflops(qb, (std::int64_t{64} << 20) / qb, d, stream.get());
            log_info("gpu " + cuda_device_name() + ": cuBLAS sgemm " + fmt(sg) + " GFLOP/s");
            std::unique_ptr<CudaExactSearch> gpu;
            const double upload = seconds_of([&] { gpu = CudaExactSearch::upload(base.data(), n, d, nullptr, stream.get()); });
            std::vector<std::int64_t> ids(static_cast<std::size_t>(q * k));
            std::vector<float> scores(ids.size());
            gpu->search(queries.data(), std::min<std::int64_t>(q, 64), nullptr, k, ids.data(), scores.data(),
                        stream.get());   // warm-up
            double best = 1e30;
            for (int r = 0; r < 3; ++r)
                best = std::min(best, seconds_of([&] {
                    gpu->search(queries.data(), q, nullptr, k, ids.data(), scores.data(), stream.get());
                }));
            add_row("gpu", sg, "retrokit exact cuda", best, recall_at_k(ids, truth, q, k), true,
                    "best of 3; base upload " + fmt(upload, "%.2f") + " s once");
            result["gpu"] = {{"device", cuda_device_name()}, {"cublas_sgemm_gflops", sg}, {"base_upload_seconds", upload}};
        }
    }
    result["rows"] = rows;
    std::printf("%s", format_table(table).c_str());
    std::fflush(stdout);
    const ScratchDir scratch("retro-bench-knn");   // peer files, uncached indices: removed at the end, on an error, on Ctrl-C
    const std::string& dir = scratch.path();
    std::string threads_arg;
    for (int t : threads) threads_arg += (threads_arg.empty() ? "" : ",") + std::to_string(t);
    bool peer_failed = false;
    if (!o.peer.empty()) {   // the faiss-cpu Python package's IndexFlatIP on the same data (written as .npy)
        npy_save(dir + "/base.npy", {n, static_cast<std::int64_t>(d)}, base.data());
        npy_save(dir + "/queries.npy", {q, static_cast<std::int64_t>(d)}, queries.data());
        std::string cmd = shell_quote(o.python) + " " + shell_quote(o.peer) + " --base " + shell_quote(dir + "/base.npy") +
                          " --queries " + shell_quote(dir + "/queries.npy") + " --k " + std::to_string(k) + " --threads " +
                          threads_arg + " --out " + shell_quote(dir + "/peer.json");
        log_info("peer: " + cmd);
        if (const int rc = run_shell(cmd); rc != 0) {
            // said once (the approximate rows' peer is not tried again) and kept in the JSON: a failed peer and no
            // peer asked for looked the same there
            const std::string why = knn_peer_failure(rc, cmd);
            log_warn(why);
            result["peer_skipped"] = why;
            peer_failed = true;
        } else {
            std::ifstream in(dir + "/peer.json");
            result["peer"] = nlohmann::json::parse(in);
            for (const auto& r : result["peer"]["rows"])
                std::printf("peer %s threads %d: %.1f queries/s\n", r.value("method", "").c_str(), r.value("threads", 0),
                            r.value("queries_per_s", 0.0));
        }
        std::filesystem::remove(dir + "/base.npy");
    }
    AnnBenchOptions ann = o.ann;
    ann.ivf_nlist = nlist;
    ann.peer = peer_failed ? std::string() : o.peer;
    ann.python = o.python;
    AnnBenchData data{base.data(), n, queries.data(), q, d, k, &truth, data_key, dir};
    std::vector<std::vector<std::string>> ann_table;
    result["approximate"] = run_ann_rows(ann, data, threads, ann_table);
    if (ann_table.size() > 1) {
        const std::string debian = ann.debian_queries > 0 ? cat("; debian faiss: its own search on the first ",
                                                                std::min(q, ann.debian_queries), " queries")
                                                            : std::string();
        std::printf("\napproximate search (ratio: median over %d round(s) of retrokit q/s / faiss-cpu q/s%s)\n%s",
                    std::max(1, ann.rounds), debian.c_str(), format_table(ann_table).c_str());
    }
    if (!o.json.empty()) bench_json_write(o.json, result, "retro-bench knn", command_line);
}

}  // namespace retro::bench
