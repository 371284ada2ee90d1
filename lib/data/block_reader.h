// Reads a corpus on a background thread and hands it out in input blocks: block b holds the next
// documents in corpus order until it has `block_docs` documents or `block_bytes` bytes of text.
// Block boundaries depend only on the corpus, so --shard i/n (blocks with b % n == i) and --resume
// (blocks from `first_block` on) see exactly the blocks an unsharded, uninterrupted run sees.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/chunk_sources.h"
#include "text/corpus.h"

namespace retro {

struct BlockPlan {
    std::int64_t block_docs = 1024;
    std::int64_t block_bytes = 4 << 20;
    int shard_index = 0, shard_count = 1;
    std::int64_t first_block = 0;   // blocks before it are read (for counts) but not handed out
};

struct InputDoc {
    std::string text;
    DocSource source;   // .doc is left 0; the writer numbers documents
};

struct InputBlock {
    std::int64_t index = 0;
    std::vector<InputDoc> docs;
    std::int64_t input_bytes_done = 0;   // on-disk bytes of the files fully read so far (progress)
};

class BlockReader {
public:
    BlockReader(std::vector<CorpusFile> files, CorpusOptions opts, BlockPlan plan, std::size_t queue_depth = 2);
    ~BlockReader();   // stops and joins the thread
    BlockReader(const BlockReader&) = delete;
    BlockReader& operator=(const BlockReader&) = delete;

    // Next block of this shard; false at the end of the corpus. Rethrows the reader's error.
    bool next(InputBlock& out);
    // Whole-corpus counts; valid once next() returned false.
    const CorpusCounts& counts() const { return counts_; }
    // The whole corpus's blocks (every shard's); valid once next() returned false.
    std::int64_t blocks() const { return blocks_; }

private:
    void run();
    void emit(InputBlock& block);
    std::vector<CorpusFile> files_;
    CorpusOptions opts_;
    BlockPlan plan_;
    std::size_t depth_;
    CorpusCounts counts_;
    std::int64_t blocks_ = 0;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<InputBlock> queue_;
    bool done_ = false, stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;
};

}  // namespace retro
