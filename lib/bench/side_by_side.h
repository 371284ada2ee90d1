// RetroKit beside a Python peer, the part retro-bench embed's text (bert, t5) and image (clip) paths
// share: median wall and CPU seconds of a timed call, running a peer script for its JSON line, and
// --rounds: the two alternate R times (RetroKit first in odd rounds, the peer first in even ones),
// each side's row is its median round and the reported ratio is the median of the per-round ratios.
// On a shared machine the speed drifts by 10-20 % within minutes, and a ratio of two measurements
// taken side by side is steadier than one of two taken a minute apart. A rate is named by its unit:
// "chunks" reads the rows' "chunks_per_s" and "chunks_per_cpu_s". Also the scratch path the inputs
// are handed to the peer through.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <memory>
#include <nlohmann/json.hpp>

#include "core/scratch_dir.h"

namespace retro::bench {

// A path "<tag><suffix>" inside a scratch folder of its own (core/scratch_dir.h: TMPDIR/retro-bench-<tag>-<pid>-XXXXXX),
// removed with everything in it when this dies — or when the process is stopped or killed (the folder's watchdog;
// a bare temp path was left behind by Ctrl-C). Empty until made.
class ScratchPath {
public:
    ScratchPath();
    ScratchPath(const ScratchPath&) = delete;
    ScratchPath& operator=(const ScratchPath&) = delete;
    ~ScratchPath();
    const std::string& make(const std::string& tag, const std::string& suffix = "");
    const std::string& path() const { return path_; }

private:
    std::unique_ptr<ScratchDir> dir_;
    std::string path_;
};

struct WallCpu {
    double wall = 0, cpu = 0;   // seconds; cpu = user + system time of every thread (getrusage)
};

// Median wall and CPU seconds of fn over `repeats` runs after one warm-up. The CPU figure is the
// fairer one on a shared machine: other jobs stretch wall time, not ours.
WallCpu median_wall_cpu(const std::function<void()>& fn, int repeats);

// Runs `python script args 2>/dev/null` and returns its last JSON line; UserError naming the script
// when it prints none (with how to see why).
nlohmann::json run_peer_script(const std::string& python, const std::string& script, const std::string& args);

struct SideBySide {
    nlohmann::json ours, peer;             // each side's median round by <unit>_per_s (peer null without one)
    nlohmann::json rounds = nlohmann::json::array();   // per round: retrokit_<unit>_per_s, peer_<unit>_per_s, ratio, cpu_ratio
    std::vector<double> ratios, cpu_ratios;
};

// One timed RetroKit row without a peer (`peer` empty; `rounds` > 1 is then noted and ignored),
// or `rounds` alternating rounds with it, each round logged.
SideBySide run_side_by_side(int rounds, const std::string& unit, const std::function<nlohmann::json()>& ours,
                            const std::function<nlohmann::json()>& peer);

// With a peer: prints "retrokit / transformers: ..." (the medians, and their range over the rounds)
// and adds "peer", "ratio", "cpu_ratio" and "rounds" to result. Nothing without a peer.
void side_by_side_report(const SideBySide& s, const std::string& unit, nlohmann::json& result);

}  // namespace retro::bench
