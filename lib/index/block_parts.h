// Resumable, shardable block work shared by retro-index and retro-knn: rows [0, N) are cut into
// blocks of B rows; block b's result is written atomically to DIR/parts/NAME.b.npy, so a killed
// run resumes by skipping finished parts, `--shard i/n` does blocks with b % n == i, and merge
// (or the last step of an unsharded run) concatenates every part in block order. Each part is sealed with its
// fingerprint (DIR/parts/NAME.b.npy.fingerprint, written after it): a block is done when both are there, and the
// parts a merge or the last step joins are held to their seals, so a part damaged while a run was stopped or a
// shard waited is refused by name instead of being built into the index. A folder whose state.json records
// `"parts_sealed": true` (written by this version) has every part sealed: a part without its seal is refused too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shard.h"

namespace retro {

class BlockParts {
public:
    BlockParts(std::string dir, std::string name, std::int64_t rows, std::int64_t block_rows);
    std::int64_t block_count() const { return blocks_; }
    const std::string& dir() const { return dir_; }
    std::int64_t block_begin(std::int64_t b) const { return b * block_rows_; }
    std::int64_t block_end(std::int64_t b) const;
    std::string part_path(std::int64_t b) const;
    // Writes the seal of part b (after the part itself: the pair marks the block done).
    void seal(std::int64_t b) const;
    bool part_done(std::int64_t b) const;
    // The blocks this shard still has to do.
    std::vector<std::int64_t> pending(const Shard& shard) const;
    // The same for a block written as two parts (retro-knn's neighbours and distances, same rows and blocks): a
    // block is done when both parts are (a run killed while it removed the parts at its end leaves one of a pair).
    std::vector<std::int64_t> pending_with(const BlockParts& other, const Shard& shard) const;
    // The line for a run that finds nothing pending: a shard past the last block ("shard 50/100 has no blocks: ...")
    // or a --resume of finished blocks ("every block was `done` before (--resume)").
    std::string nothing_pending(const Shard& shard, const std::string& done) const;
    // The line for a --resume that finds some of this shard's blocks done and `pending` left ("DIR: resuming: 3 of 5
    // blocks were embedded before, 2 left"); "" where none was done (a run said nothing of what it kept: a new
    // user's pass, session 54).
    std::string resuming_line(std::size_t pending, const Shard& shard, const std::string& done) const;
    // Part files of every block found in any of `dirs` (for merge); UserError naming the first
    // missing block, or a part whose bytes differ from its seal (parts of versions before the seals have none).
    std::vector<std::string> collect(const std::vector<std::string>& dirs) const;

private:
    std::string dir_, name_;
    std::int64_t rows_, block_rows_, blocks_;
};

// Concatenates 2-D .npy parts (same dtype and width) into `out` (atomic), optionally converting
// to `out_dtype` (f32 <-> f16 only). Returns the row count.
std::int64_t npy_concat_rows(const std::vector<std::string>& parts, const std::string& out, DType out_dtype);

// Removes DIR/parts.
void parts_remove(const std::string& dir);

}  // namespace retro
