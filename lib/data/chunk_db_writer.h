// Streams a chunk database into a folder: chunks.npy, doc_ids.npy, doc_offsets.npy, seq_starts.npy
// and sources.jsonl, all as NAME.tmp until commit(). Its state (counts and byte lengths) goes into
// the --resume checkpoint; a writer built from that state continues exactly where it stopped.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "data/chunk_sources.h"
#include "data/resumable_output.h"

namespace retro {

struct ChunkDbCounts {
    std::int64_t docs = 0, chunks = 0, seqs = 0, tokens = 0;   // tokens: non-pad ids, bos/eos included
};

// The manifest's "stats" object: documents, chunks, sequences, tokens, padding_fraction.
nlohmann::json chunk_stats_json(const ChunkDbCounts& k, int chunk_size);

class ChunkDbWriter {
public:
    // `state` is a previous state() (resume) or null (fresh start).
    ChunkDbWriter(const std::string& dir, DType token_dtype, int chunk_size, int rows_per_seq,
                  const nlohmann::json* state);
    // Appends one document: `rows` holds row_count * chunk_size ids (see chunk_layout.h) of which
    // `tokens` are not padding. `src.doc` is set here.
    void append_document(const std::int32_t* rows, std::int64_t row_count, std::int64_t tokens, DocSource src);
    void flush();                  // writes what append_document buffered
    nlohmann::json state();        // flushes, syncs, and returns counts + byte lengths
    void commit();                 // final headers, renames; the caller writes manifest.json after
    const ChunkDbCounts& counts() const { return counts_; }

    static const std::vector<std::string>& output_names();   // in manifest order

private:
    std::string dir_;
    DType dtype_;
    int chunk_size_, rows_per_seq_;
    ChunkDbCounts counts_;
    std::unique_ptr<ResumableOutput> chunks_, doc_ids_, doc_offsets_, seq_starts_, sources_;
    std::size_t chunk_header_len_ = 0, vec_header_len_ = 0;
    std::vector<std::uint8_t> chunk_buf_;
    std::vector<std::int64_t> doc_id_buf_, offset_buf_, seq_buf_;
    std::string source_buf_;
};

}  // namespace retro
