// Implementation of block_parts.h.
#include "index/block_parts.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
#include "core/npy.h"

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace retro {

BlockParts::BlockParts(std::string dir, std::string name, std::int64_t rows, std::int64_t block_rows)
    : dir_(std::move(dir)), name_(std::move(name)), rows_(rows), block_rows_(std::max<std::int64_t>(1, block_rows)) {
    blocks_ = (rows_ + block_rows_ - 1) / block_rows_;
}

std::int64_t BlockParts::block_end(std::int64_t b) const { return std::min(rows_, (b + 1) * block_rows_); }

std::string BlockParts::part_path(std::int64_t b) const {
    return (fs::path(dir_) / "parts" / (name_ + "." + std::to_string(b) + ".npy")).string();
}

namespace {
std::string seal_path(const std::string& part) { return part + ".fingerprint"; }

// Whether the folder holding parts/`part` was written by a version that seals its parts (its state.json says so).
bool folder_seals_parts(const std::string& part) {
    const fs::path state = fs::path(part).parent_path().parent_path() / "state.json";
    std::ifstream in(state);
    if (!in) return false;
    try {
        const nlohmann::json j = nlohmann::json::parse(in);
        return j.is_object() && j.value("parts_sealed", false);
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

// The --shard i/n a folder of parts records in its state.json ({-1, -1} where it records none).
std::pair<int, int> folder_shard(const std::string& dir) {
    std::ifstream in(fs::path(dir) / "state.json");
    return state_shard(nlohmann::json::parse(in, nullptr, false));
}

// UserError when `part` has a seal its bytes no longer match, or none where its folder seals every part.
void check_seal(const std::string& part) {
    const std::string seal = seal_path(part);
    if (!fs::exists(seal)) {
        if (folder_seals_parts(part))   // killed between the part and its seal, or the seal removed
            user_error_in(part, "has no " + fs::path(seal).filename().string() + " (its run stopped before sealing it, or "
                                "the seal was removed)",
                          "delete it and rerun the command that wrote its folder with --resume: the block is made again");
        return;   // written by a version before the seals
    }
    std::ifstream in(seal);
    std::string recorded;
    std::getline(in, recorded);
    if (fingerprint_file(part) != recorded)
        user_error_in(part, "has changed since it was written (its bytes no longer match " + fs::path(seal).filename().string() + ")",
                      "delete it and its .fingerprint, and rerun the command that wrote its folder with --resume: the block is made again");
}
}  // namespace

void BlockParts::seal(std::int64_t b) const {
    const std::string part = part_path(b);
    write_file_atomic(seal_path(part), fingerprint_file(part) + "\n");
}

bool BlockParts::part_done(std::int64_t b) const { return fs::exists(part_path(b)) && fs::exists(seal_path(part_path(b))); }

std::vector<std::int64_t> BlockParts::pending(const Shard& shard) const {
    std::vector<std::int64_t> out;
    for (std::int64_t b = shard.index; b < blocks_; b += shard.count)
        if (!part_done(b)) out.push_back(b);
    return out;
}

std::vector<std::int64_t> BlockParts::pending_with(const BlockParts& other, const Shard& shard) const {
    std::vector<std::int64_t> out;
    for (std::int64_t b = shard.index; b < blocks_; b += shard.count)
        if (!part_done(b) || !other.part_done(b)) out.push_back(b);
    return out;
}

std::string BlockParts::nothing_pending(const Shard& shard, const std::string& done) const {
    if (shard.index >= blocks_)   // (it said "every block was searched before (--resume)" of a run without --resume)
        return cat("shard ", shard.index, "/", shard.count, " has no blocks: the ", rows_, " rows make ", blocks_,
                   blocks_ == 1 ? " block" : " blocks", " of ", block_rows_, ", fewer than the shards (its folder is a "
                   "finished empty shard, to merge with the others)");
    // a shard is then complete; an unsharded run still joins its parts (its next lines say so: "nothing left to do"
    // was said before an index was built)
    if (shard.count > 1) return cat(dir_, ": already complete: every block of shard ", shard.index, "/", shard.count,
                                    " was ", done, " before (--resume)");
    return dir_ + ": every block was " + done + " before (--resume)";
}

std::string BlockParts::resuming_line(std::size_t pending, const Shard& shard, const std::string& done) const {
    const std::int64_t mine = shard.index < blocks_ ? (blocks_ - shard.index + shard.count - 1) / shard.count : 0;
    const std::int64_t kept = mine - static_cast<std::int64_t>(pending);
    if (kept <= 0 || pending == 0) return "";
    return cat(dir_, ": resuming: ", kept, " of ", mine, mine == 1 ? " block" : " blocks", kept == 1 ? " was " : " were ",
               done, " before, ", pending, " left");
}

std::vector<std::string> BlockParts::collect(const std::vector<std::string>& dirs) const {
    std::vector<std::string> out;
    for (std::int64_t b = 0; b < blocks_; ++b) {
        std::string found;
        for (const auto& d : dirs) {
            std::string p = (fs::path(d) / "parts" / (name_ + "." + std::to_string(b) + ".npy")).string();
            if (fs::exists(p)) {
                found = p;
                break;
            }
        }
        if (found.empty()) {
            // the folder whose shard owns the block (b % n == i, from its state.json) is the one to finish
            for (const auto& d : dirs)
                if (const auto [index, count] = folder_shard(d); count > 1 && b % count == index)
                    user_error_in(d, cat("lacks block ", b, " of ", name_, ", which its shard ", index, "/", count, " makes"),
                                  cat("re-run that shard (--shard ", index, "/", count, ") into it with --resume before merging"));
            user_error_in(dirs.empty() ? dir_ : dirs.front(), "block " + std::to_string(b) + " of " + name_ +
                                                                  " is in none of the folders",
                          "finish every shard (re-run it with --resume) before merging");
        }
        check_seal(found);
        out.push_back(found);
    }
    return out;
}

std::int64_t npy_concat_rows(const std::vector<std::string>& parts, const std::string& out, DType out_dtype) {
    std::int64_t width = -1, rows = 0;
    std::unique_ptr<NpyWriter> writer;
    std::vector<std::uint16_t> half;
    std::vector<float> single;
    for (const auto& p : parts) {
        NpyArray a(p);
        if (a.shape().size() != 2) user_error_in(p, "must be 2-D");
        if (width < 0) {
            width = a.dim(1);
            writer = std::make_unique<NpyWriter>(out, out_dtype, std::vector<std::int64_t>{width});
        }
        if (a.dim(1) != width) user_error_in(p, "has width " + std::to_string(a.dim(1)) + ", expected " + std::to_string(width));
        std::int64_t n = a.dim(0);
        if (a.dtype() == out_dtype) {
            writer->append(a.raw(), n);
        } else if (a.dtype() == DType::F32 && out_dtype == DType::F16) {
            const float* src = a.data<float>();
            half.resize(static_cast<std::size_t>(a.numel()));
            for (std::size_t i = 0; i < half.size(); ++i) half[i] = f32_to_f16(src[i]);
            writer->append(half.data(), n);
        } else if (a.dtype() == DType::F16 && out_dtype == DType::F32) {
            const auto* src = static_cast<const std::uint16_t*>(a.raw());
            single.resize(static_cast<std::size_t>(a.numel()));
            for (std::size_t i = 0; i < single.size(); ++i) single[i] = f16_to_f32(src[i]);
            writer->append(single.data(), n);
        } else {
            user_error_in(p, "has dtype " + dtype_name(a.dtype()) + ", expected " + dtype_name(out_dtype));
        }
        rows += n;
    }
    RETRO_CHECK(writer, "no parts to concatenate into ", out);
    writer->commit();
    return rows;
}

void parts_remove(const std::string& dir) {
    std::error_code ec;
    fs::remove_all(fs::path(dir) / "parts", ec);
}

}  // namespace retro
