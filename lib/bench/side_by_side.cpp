// Implementation of side_by_side.h.
#include "bench/side_by_side.h"

#include <cmath>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "bench/bench_util.h"
#include "core/error.h"
#include "core/log.h"
#include "core/shell_quote.h"

namespace retro::bench {

namespace {

double cpu_now() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The row of median rate (the upper middle one for an even count).
nlohmann::json median_run(std::vector<nlohmann::json> runs, const std::string& rate) {
    std::sort(runs.begin(), runs.end(), [&](const nlohmann::json& x, const nlohmann::json& y) {
        return x[rate].get<double>() < y[rate].get<double>();
    });
    return runs[runs.size() / 2];
}

}  // namespace

ScratchPath::ScratchPath() = default;
ScratchPath::~ScratchPath() = default;   // the folder goes with dir_

const std::string& ScratchPath::make(const std::string& tag, const std::string& suffix) {
    dir_ = std::make_unique<ScratchDir>("retro-bench-" + tag);
    path_ = (std::filesystem::path(dir_->path()) / (tag + suffix)).string();
    return path_;
}

WallCpu median_wall_cpu(const std::function<void()>& fn, int repeats) {
    fn();
    std::vector<double> wall, cpu;
    for (int r = 0; r < repeats; ++r) {
        const double c0 = cpu_now();
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        wall.push_back(seconds_since(t0));
        cpu.push_back(cpu_now() - c0);
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

nlohmann::json run_peer_script(const std::string& python, const std::string& script, const std::string& args) {
    const std::string cmd = shell_quote(python) + " " + shell_quote(script) + " " + args + " 2>/dev/null";
    log_info("peer: " + cmd);
    nlohmann::json r = run_json_command(cmd);
    if (r.is_null())   // a peer that cannot run (its packages missing): our rows are still worth keeping
        return {{"skipped", script + " printed no JSON result (its Python packages are named at its top; run it by "
                                     "hand to see why: " + cmd.substr(0, cmd.size() - 12) + ")"}};
    return r;
}

namespace {

// What keeps a peer's result from standing beside ours ("" where nothing): each field ours has but "model", with a value of the
// same kind (a number, a string), and positive, finite rates (a peer printing 0 s gave "infx", a negative time a
// negative ratio, a string where a number belongs an error blaming the model's JSON files).
std::string peer_result_problem(const nlohmann::json& ours, const nlohmann::json& peer, const std::string& rate,
                                const std::string& cpu_rate) {
    if (!peer.is_object()) return "its result is not a JSON object";
    for (const auto& [key, value] : ours.items()) {
        if (key == "model") continue;   // (ours names the folder; the tables do not read the peer's)
        if (!peer.contains(key)) return "its result has no \"" + key + "\"";
        const nlohmann::json& v = peer[key];
        if ((value.is_number() && !v.is_number()) || (value.is_string() && !v.is_string()))
            return "its result's \"" + key + "\" is " + v.dump() + ", not a " + (value.is_number() ? "number" : "string");
    }
    for (const std::string& r : {rate, cpu_rate}) {
        const double x = peer[r].get<double>();
        if (!(x > 0) || !std::isfinite(x)) return "its result's \"" + r + "\" is " + peer[r].dump() + ", not a positive rate";
    }
    // the same work: a peer that embedded 3 of the 16 texts stood beside ours as if it had done them all
    const std::string unit = rate.substr(0, rate.size() - std::string("_per_s").size());
    if (ours.contains(unit) && ours[unit].is_number_integer() && peer[unit] != ours[unit])
        return "its result says " + peer[unit].dump() + " " + unit + ", not the " + ours[unit].dump() + " RetroKit ran";
    return "";
}

}  // namespace

SideBySide run_side_by_side(int rounds, const std::string& unit, const std::function<nlohmann::json()>& ours,
                            const std::function<nlohmann::json()>& peer) {
    const std::string rate = unit + "_per_s", cpu_rate = unit + "_per_cpu_s";
    SideBySide s;
    if (!peer) {
        if (rounds > 1) log_info("--rounds applies with --peer only: one timed run");
        s.ours = ours();
        return s;
    }
    std::vector<nlohmann::json> ours_runs, peer_runs;
    for (int r = 0; r < rounds; ++r) {
        if (r % 2 == 0) {
            ours_runs.push_back(ours());
            peer_runs.push_back(peer());
        } else {
            peer_runs.push_back(peer());
            ours_runs.push_back(ours());
        }
        if (!peer_runs.back().contains("skipped"))
            if (const std::string why = peer_result_problem(ours_runs.back(), peer_runs.back(), rate, cpu_rate); !why.empty())
                peer_runs.back() = nlohmann::json{{"skipped", why}};
        if (peer_runs.back().contains("skipped")) {   // the peer cannot run: our rows alone, the reason in the peer's place
            log_warn("peer skipped: " + peer_runs.back()["skipped"].get<std::string>());
            s.ours = median_run(ours_runs, rate);
            s.peer = peer_runs.back();
            s.ratios.clear();
            s.cpu_ratios.clear();
            s.rounds.clear();
            return s;
        }
        const nlohmann::json &a = ours_runs.back(), &b = peer_runs.back();
        s.ratios.push_back(a[rate].get<double>() / b[rate].get<double>());
        s.cpu_ratios.push_back(a[cpu_rate].get<double>() / b[cpu_rate].get<double>());
        s.rounds.push_back({{"retrokit_" + rate, a[rate]}, {"peer_" + rate, b[rate]},
                            {"ratio", s.ratios.back()}, {"cpu_ratio", s.cpu_ratios.back()}});
        if (rounds > 1)
            log_info(cat("round ", r + 1, "/", rounds, ": retrokit ", format_fixed(a[rate].get<double>(), 1), " ", unit,
                         "/s, peer ", format_fixed(b[rate].get<double>(), 1), " -> ", format_fixed(s.ratios.back(), 2), "x"));
    }
    s.ours = median_run(ours_runs, rate);
    s.peer = median_run(peer_runs, rate);
    return s;
}

void side_by_side_report(const SideBySide& s, const std::string& unit, nlohmann::json& result) {
    if (s.peer.is_null()) return;
    if (s.peer.contains("skipped")) {
        result["peer"] = s.peer;
        return;
    }
    const double ratio = median_of(s.ratios), cpu_ratio = median_of(s.cpu_ratios);
    const int rounds = static_cast<int>(s.ratios.size());
    // the peer as it names itself ("transformers", "sentence-transformers", "open_clip"...), not always "transformers"
    const std::string peer_name = s.peer.contains("impl") && s.peer["impl"].is_string() ? s.peer["impl"].get<std::string>() : "peer";
    if (rounds > 1) {
        const auto [lo, hi] = std::minmax_element(s.ratios.begin(), s.ratios.end());
        std::printf("retrokit / %s: %.2fx %s/s (wall), %.2fx %s per CPU-second: medians of %d "
                    "rounds side by side (wall %.2fx .. %.2fx; the rows above are each side's median round)\n",
                    peer_name.c_str(), ratio, unit.c_str(), cpu_ratio, unit.c_str(), rounds, *lo, *hi);
    } else {
        std::printf("retrokit / %s: %.2fx %s/s (wall), %.2fx %s per CPU-second\n", peer_name.c_str(), ratio, unit.c_str(),
                    cpu_ratio, unit.c_str());
    }
    result["peer"] = s.peer;
    result["ratio"] = ratio;
    result["cpu_ratio"] = cpu_ratio;
    result["rounds"] = s.rounds;
}

}  // namespace retro::bench
