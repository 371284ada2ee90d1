// Implementation of knn_ann_bench.h.
#include "bench/knn_ann_bench.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "bench/bench_util.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/shell_quote.h"
#include "core/log.h"
#include "core/npy.h"
#include "core/threads.h"
#include "index/faiss_index.h"

namespace fs = std::filesystem;

namespace retro::bench {

double recall_at_k(const std::vector<std::int64_t>& got, const std::vector<std::int64_t>& truth, std::int64_t q, int k) {
    double hit = 0;
    for (std::int64_t i = 0; i < q; ++i) {
        std::set<std::int64_t> s(got.begin() + i * k, got.begin() + (i + 1) * k);
        for (int j = 0; j < k; ++j) hit += static_cast<double>(s.count(truth[static_cast<std::size_t>(i * k + j)]));
    }
    return q > 0 ? hit / (double(q) * k) : 0.0;
}

namespace {

struct AnnIndex {
    std::string label, factory, param;   // param: "nprobe" or "efSearch"
    std::vector<int> values;
    std::string file;
    std::unique_ptr<FaissIndex> index;
    double build_seconds = 0;   // 0 when read from the cache
};

double seconds_of(const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return seconds_since(t0);
}

void set_param(FaissIndex& index, const std::string& param, int v) {
    if (param == "nprobe")
        index.set_nprobe(v);
    else
        index.set_ef_search(v);
}

// The indices to time, built (or read from the cache folder).
std::vector<AnnIndex> prepare_indices(const AnnBenchOptions& o, const AnnBenchData& data) {
    std::vector<AnnIndex> out;
    if (o.ivf_nlist > 0) {
        out.push_back({"ivf-flat", "IVF" + std::to_string(o.ivf_nlist) + ",Flat", "nprobe", o.nprobe, "", nullptr, 0});
        if (o.pq_m > 0)
            out.push_back({"ivf-pq", "IVF" + std::to_string(o.ivf_nlist) + ",PQ" + std::to_string(o.pq_m), "nprobe", o.nprobe, "",
                           nullptr, 0});
    }
    if (o.hnsw_m > 0) out.push_back({"hnsw", "HNSW" + std::to_string(o.hnsw_m), "efSearch", o.ef_search, "", nullptr, 0});
    const std::string dir = o.index_cache.empty() ? data.work_dir : o.index_cache;
    fs::create_directories(dir);
    for (auto& a : out) {
        std::string name = data.data_key + "_" + a.factory;
        std::replace(name.begin(), name.end(), ',', '_');
        a.file = (fs::path(dir) / (name + ".faiss")).string();
        if (!o.index_cache.empty() && fs::exists(a.file)) {
            log_info("reading " + a.file);
            try {
                a.index = std::make_unique<FaissIndex>(FaissIndex::load(a.file));
            } catch (const UserError& e) {   // FaissIndex's hint names retro-index; this file is the cache's own
                std::string why = e.what();
                if (why.rfind(a.file + ": ", 0) == 0) why.erase(0, a.file.size() + 2);
                if (const auto fix = why.rfind(" (fix: "); fix != std::string::npos) why.resize(fix);
                user_error_in(a.file, "is a damaged --index-cache entry (" + why + ")",
                              "remove it: the next run builds it again");
            }
            continue;
        }
        a.index = std::make_unique<FaissIndex>(a.factory, data.d);
        a.build_seconds = seconds_of([&] {
            if (a.index->needs_training()) {
                const std::int64_t n_train = std::min<std::int64_t>(data.n, std::max<std::int64_t>(39 * o.ivf_nlist, 65536));
                log_info("training " + a.factory + " on " + std::to_string(n_train) + " vectors");
                a.index->train(n_train, data.base);
            }
            log_info("adding " + std::to_string(data.n) + " vectors to " + a.factory);
            a.index->add(data.n, data.base);
        });
        log_info(a.factory + " built in " + format_fixed(a.build_seconds, 1) + " s");
        a.index->save(a.file);
    }
    return out;
}

std::string row_key(const std::string& label, int value, int threads) {
    return label + "/" + std::to_string(value) + "/" + std::to_string(threads);
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

std::string knn_peer_failure(int rc, const std::string& cmd) {
    return cat("the peer script failed (exit ", rc, "; is faiss-cpu installed? pip install faiss-cpu numpy; ",
               "run it by hand to see why: ", cmd, ")");
}

nlohmann::json run_ann_rows(const AnnBenchOptions& o, const AnnBenchData& data, const std::vector<int>& threads,
                            std::vector<std::vector<std::string>>& table) {
    auto indices = prepare_indices(o, data);
    if (indices.empty()) return nlohmann::json::array();
    const std::int64_t q = data.q;
    const int k = data.k;
    std::map<std::string, std::vector<double>> ours_qps, peer_qps, ratios;
    std::map<std::string, double> ours_recall, peer_recall;
    std::map<std::string, nlohmann::json> debian;

    auto run_ours = [&] {
        std::vector<std::int64_t> ids(static_cast<std::size_t>(q * k));
        std::vector<float> scores(ids.size());
        for (int t : threads) {
            set_thread_count(t);
            openblas_set_num_threads(t);
            for (auto& a : indices)
                for (int v : a.values) {
                    set_param(*a.index, a.param, v);
                    a.index->search(std::min<std::int64_t>(q, 64), data.queries, k, ids.data(), scores.data());   // warm-up
                    const double s = seconds_of([&] { a.index->search(q, data.queries, k, ids.data(), scores.data()); });
                    const std::string key = row_key(a.label, v, t);
                    ours_qps[key].push_back(q / s);
                    ours_recall[key] = recall_at_k(ids, *data.truth, q, k);
                }
        }
    };
    // the peer reads the same index files
    const std::string spec_path = (fs::path(data.work_dir) / "ann.json").string();
    const std::string truth_path = (fs::path(data.work_dir) / "truth.npy").string();
    const std::string queries_path = (fs::path(data.work_dir) / "queries.npy").string();
    const std::string peer_out = (fs::path(data.work_dir) / "peer_ann.json").string();
    if (!o.peer.empty()) {
        nlohmann::json spec = nlohmann::json::array();
        for (const auto& a : indices) spec.push_back({{"label", a.label}, {"file", a.file}, {"param", a.param}, {"values", a.values}});
        write_file_atomic(spec_path, spec.dump(2));
        npy_save(truth_path, {q, static_cast<std::int64_t>(k)}, data.truth->data());
        npy_save(queries_path, {q, static_cast<std::int64_t>(data.d)}, data.queries);
    }
    std::string threads_arg;
    for (int t : threads) threads_arg += (threads_arg.empty() ? "" : ",") + std::to_string(t);
    bool peer_ok = !o.peer.empty();
    auto run_peer = [&] {
        if (!peer_ok) return;
        const std::string cmd = shell_quote(o.python) + " " + shell_quote(o.peer) + " --no-flat --base " +
                                shell_quote(queries_path) + " --queries " + shell_quote(queries_path) + " --k " +
                                std::to_string(k) + " --threads " + threads_arg + " --ann " + shell_quote(spec_path) +
                                " --truth " + shell_quote(truth_path) + " --out " + shell_quote(peer_out);
        log_info("peer: " + cmd);
        if (const int rc = run_shell(cmd); rc != 0) {
            log_warn(knn_peer_failure(rc, cmd));
            peer_ok = false;
            return;
        }
        std::ifstream in(peer_out);
        const nlohmann::json pj = nlohmann::json::parse(in);
        for (const auto& r : pj["rows"]) {
            const std::string key = row_key(r["label"].get<std::string>(), r["value"].get<int>(), r["threads"].get<int>());
            peer_qps[key].push_back(r["queries_per_s"].get<double>());
            peer_recall[key] = r.value("recall_at_k", 0.0);
        }
    };
    const int rounds = std::max(1, o.rounds);
    for (int r = 0; r < rounds; ++r) {
        log_info("approximate search: round " + std::to_string(r + 1) + "/" + std::to_string(rounds));
        if (r % 2 == 0) {
            run_ours();
            run_peer();
        } else {
            run_peer();
            run_ours();
        }
        if (!peer_ok) continue;
        for (const auto& [key, qps] : ours_qps)
            if (peer_qps.count(key) && peer_qps[key].size() == qps.size()) ratios[key].push_back(qps.back() / peer_qps[key].back());
    }
    if (o.debian_queries > 0) {   // FAISS's own (scalar) search, once, on a prefix of the queries
        const std::int64_t qd = std::min(q, o.debian_queries);
        std::vector<std::int64_t> ids(static_cast<std::size_t>(qd * k)), truth(data.truth->begin(), data.truth->begin() + qd * k);
        std::vector<float> scores(ids.size());
        for (int t : threads) {
            set_thread_count(t);
            openblas_set_num_threads(t);
            for (auto& a : indices) {
                a.index->use_faiss_search(true);
                for (int v : a.values) {
                    set_param(*a.index, a.param, v);
                    const double s = seconds_of([&] { a.index->search(qd, data.queries, k, ids.data(), scores.data()); });
                    debian[row_key(a.label, v, t)] = {{"queries", qd}, {"queries_per_s", qd / s}, {"recall_at_k", recall_at_k(ids, truth, qd, k)}};
                }
                a.index->use_faiss_search(false);
            }
        }
    }
    nlohmann::json rows = nlohmann::json::array();
    table.push_back({"threads", "index", "param", "retrokit q/s", "faiss-cpu q/s", "ratio", "recall", "faiss-cpu recall",
                     "debian faiss q/s"});
    for (int t : threads)
        for (const auto& a : indices)
            for (int v : a.values) {
                const std::string key = row_key(a.label, v, t);
                const double ours = median(ours_qps[key]);
                const bool have_peer = peer_ok && !ratios[key].empty();
                const double ratio = have_peer ? median(ratios[key]) : 0;
                nlohmann::json row = {{"threads", t}, {"index", a.label}, {"factory", a.factory}, {a.param, v},
                                      {"retrokit_queries_per_s", ours}, {"retrokit_rounds", ours_qps[key]},
                                      {"recall_at_k", ours_recall[key]}, {"method", "retrokit " + a.index->search_method()}};
                if (have_peer)
                    row.update({{"peer_queries_per_s", median(peer_qps[key])}, {"peer_rounds", peer_qps[key]},
                                {"ratio_median_of_rounds", ratio}, {"peer_recall_at_k", peer_recall[key]}});
                if (debian.count(key)) row["debian_faiss"] = debian[key];
                rows.push_back(row);
                table.push_back({std::to_string(t), a.factory, a.param + " " + std::to_string(v), format_fixed(ours, 0),
                                 have_peer ? format_fixed(median(peer_qps[key]), 0) : "-",
                                 have_peer ? format_fixed(ratio, 2) + "x" : "-", format_fixed(ours_recall[key], 4),
                                 have_peer ? format_fixed(peer_recall[key], 4) : "-",
                                 debian.count(key) ? format_fixed(debian[key]["queries_per_s"].get<double>(), 0) : "-"});
            }
    for (const auto& a : indices)
        if (a.build_seconds > 0) log_info(a.factory + ": built in " + format_fixed(a.build_seconds, 1) + " s");
    return rows;
}

}  // namespace retro::bench
