// Implementation of rank_options.h.
#include "train/rank_options.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/distributed.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
#include "train/run_folder.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

// A folder by its manifest's fingerprint (a node-local copy of the same database is the same), a checkpoint folder
// by the fingerprints its state.json records, a file by its bytes; what cannot be read by its path (the run then fails
// on it alike on every rank, or names it)
nlohmann::json input_identity(const std::string& path) {
    if (path.empty()) return nullptr;
    std::error_code ec;
    try {
        if (fs::is_directory(path, ec) && fs::exists(fs::path(path) / "manifest.json", ec))
            return folder_fingerprint(manifest_read(path));
        if (fs::is_directory(path, ec) && fs::exists(fs::path(path) / "state.json", ec)) {
            const nlohmann::json st = json_read_file((fs::path(path) / "state.json").string());
            if (st.is_object() && st.contains("fingerprints")) return st["fingerprints"];
        }
        if (fs::is_regular_file(path, ec)) return fingerprint_file(path);
    } catch (const UserError&) {
    }
    return fs::absolute(path).lexically_normal().string();
}

// What a rank resumes from: the newest complete checkpoint of its --out, by its recorded fingerprints (a rank given
// another --out read another checkpoint)
nlohmann::json resume_identity(const TrainOptions& o) {
    if (!o.resume) return nullptr;
    const std::string ck = latest_checkpoint(o.out);
    return ck.empty() ? nlohmann::json("no checkpoint") : input_identity(ck);
}

}  // namespace

nlohmann::json train_rank_job(const TrainOptions& o) {
    return {{"--steps", o.steps},
            {"--seed", o.seed},
            {"--batch-size", o.batch_size},
            {"--grad-accum", o.grad_accum},
            {"--lr", o.lr},
            {"--min-lr-ratio", o.min_lr_ratio},
            {"--warmup", o.warmup},
            {"--weight-decay", o.weight_decay},
            {"--beta1", o.beta1},
            {"--beta2", o.beta2},
            {"--eps", o.eps},
            {"--clip", o.clip},
            {"--val-fraction", o.val_fraction},
            {"--train-docs-fraction", o.train_docs_fraction},
            {"--val-every", o.val_every},
            {"--val-batches", o.val_batches},
            {"--checkpoint-every", o.checkpoint_every},
            {"--keep-checkpoints", o.keep_checkpoints},
            {"--no-retrieval", o.no_retrieval},
            {"--retrieval-dropout", o.retrieval_dropout},
            {"--oracle-neighbours", o.oracle_neighbours},
            {"--oracle-splice", o.oracle_splice},
            {"--oracle-hindsight", o.oracle_hindsight},
            {"--oracle-until", o.oracle_until},
            {"--retrieval-lr-scale", o.retrieval_lr_scale},
            {"--resume", o.resume},
            {"--force", o.force},
            {"--train-only", o.train_only},
            {"--reduce", o.reduce},
            {"--device", o.device},
            {"--dtype", o.dtype},
            {"--fused-attention", o.fused_attention ? nlohmann::json(*o.fused_attention) : nlohmann::json(nullptr)},
            {"--config", input_identity(o.config)},
            {"--db", input_identity(o.db)},
            {"--knn", o.no_retrieval ? nlohmann::json(nullptr) : input_identity(o.neighbours)},
            {"--init-from", input_identity(o.init_from)},
            {"--out", resume_identity(o)}};
}

void ranks_run_same_job(Distributed& d, const nlohmann::json& job) {
    if (!d.active()) return;
    const std::string text = job.dump();
    const std::uint64_t hash = std::stoull(fingerprint_bytes(text.data(), text.size()), nullptr, 16);
    const std::vector<std::uint64_t> heads = d.allgather(std::vector<std::uint64_t>{hash, text.size()});
    bool same = true;
    std::uint64_t longest = 0;
    for (std::size_t r = 0; r < heads.size(); r += 2) {
        same = same && heads[r] == heads[0];
        longest = std::max(longest, heads[r + 1]);
    }
    if (same) return;
    // every rank's text, padded to the longest in 8-byte words, so that each rank names the same difference
    const std::size_t words = static_cast<std::size_t>((longest + 7) / 8);
    std::vector<std::uint64_t> mine(words, 0);
    std::memcpy(mine.data(), text.data(), text.size());
    const std::vector<std::uint64_t> all = d.allgather(mine);
    const auto rank_job = [&](std::size_t r) {
        const char* bytes = reinterpret_cast<const char*>(all.data() + r * words);
        return nlohmann::json::parse(std::string(bytes, static_cast<std::size_t>(heads[2 * r + 1])));
    };
    const nlohmann::json root = rank_job(0);
    const auto is_input = [](const std::string& option) {
        return option == "--config" || option == "--db" || option == "--knn" || option == "--init-from" || option == "--out";
    };
    for (std::size_t r = 1; r < static_cast<std::size_t>(d.size()); r++) {
        const nlohmann::json other = rank_job(r);
        // the options first, then the inputs: a rank given --no-retrieval is named so, not as "--knn holds other contents"
        for (const bool inputs : {false, true})
            for (const auto& [option, value] : root.items()) {
                if (is_input(option) != inputs || other.value(option, nlohmann::json()) == value) continue;
                user_error_in(cat("rank ", r),
                              option == "--out" ? std::string("--out holds another checkpoint to resume from than rank 0's")
                              : inputs ? option + " holds other contents than rank 0's (another file or folder, or this "
                                                  "machine's copy differs)"
                                       : cat(option, " is ", other.value(option, nlohmann::json()).dump(), ", rank 0's ", value.dump()),
                              "give every rank the same command and the same input files (mpirun -np N retro-train ...)");
            }
    }
}

}  // namespace retro
