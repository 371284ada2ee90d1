// Implementation of block_reader.h: one producer thread, a bounded queue, one consumer.
#include "data/block_reader.h"

#include <algorithm>
#include <filesystem>

namespace retro {
namespace {
struct Stopped {};   // unwinds corpus_read_file when the consumer has gone away
}  // namespace

BlockReader::BlockReader(std::vector<CorpusFile> files, CorpusOptions opts, BlockPlan plan, std::size_t queue_depth)
    : files_(std::move(files)), opts_(std::move(opts)), plan_(plan), depth_(queue_depth) {
    thread_ = std::thread([this] { run(); });
}

BlockReader::~BlockReader() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void BlockReader::emit(InputBlock& block) {
    bool mine = block.index % plan_.shard_count == plan_.shard_index && block.index >= plan_.first_block;
    std::int64_t next_index = block.index + 1;
    blocks_ = next_index;
    if (!mine) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) throw Stopped{};
    } else {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
        if (stop_) throw Stopped{};
        queue_.push_back(std::move(block));
        cv_.notify_all();
    }
    block = InputBlock{};
    block.index = next_index;
}

void BlockReader::run() {
    try {
        InputBlock block;
        std::int64_t bytes = 0, input_done = 0;
        for (const auto& f : files_) {
            std::error_code ec;
            const std::int64_t file_size = static_cast<std::int64_t>(std::filesystem::file_size(f.path, ec));
            corpus_read_file(f, opts_, counts_, [&](Document& doc) {
                bytes += static_cast<std::int64_t>(doc.text.size());
                InputDoc d;
                d.source.block = block.index;
                d.source.source = doc.source;
                d.source.line = doc.line;
                d.source.byte_offset = doc.byte_offset;
                d.text = std::move(doc.text);
                block.docs.push_back(std::move(d));
                if (static_cast<std::int64_t>(block.docs.size()) >= plan_.block_docs || bytes >= plan_.block_bytes) {
                    // within a jsonl file: the line's offset (decompressed, so capped for .gz/.zst)
                    block.input_bytes_done = input_done + std::min(doc.byte_offset, file_size);
                    emit(block);
                    bytes = 0;
                }
            });
            input_done += file_size;
        }
        if (!block.docs.empty()) {
            block.input_bytes_done = input_done;
            emit(block);
        }
    } catch (const Stopped&) {
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    cv_.notify_all();
}

bool BlockReader::next(InputBlock& out) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !queue_.empty() || done_; });
    if (!queue_.empty()) {
        out = std::move(queue_.front());
        queue_.pop_front();
        cv_.notify_all();
        return true;
    }
    if (error_) std::rethrow_exception(error_);
    return false;
}

}  // namespace retro
