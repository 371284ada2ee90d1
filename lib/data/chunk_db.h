// Read side of a chunk database folder (docs/formats.md "retro-chunk"): the manifest, the four
// arrays mapped read-only with their shapes checked against each other, and sources.jsonl read
// line by line. Used by `retro-chunk merge` and `inspect`, and by later stages.
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/npy.h"
#include "data/chunk_sources.h"

namespace retro {

// The name of ChunkDb::neighbour_tokens' continuation rule, recorded by retro-train (a checkpoint's state.json, the
// run's manifest `parameters`) so that a resume or eval of a run trained under another rule is told: since
// 2026-12-06 RETRO-pytorch's (no continuation where the next row holds its document's EOS alone). A run that records
// none was trained before then, when that row was read too.
inline constexpr const char* kNeighbourContinuationRule = "retro-pytorch";
// The info line for such a run (`what`: its checkpoint or manifest; `doing`: "this resume", "this eval").
std::string unrecorded_continuation_note(const std::string& what, const std::string& doing, int chunk_size);

class ChunkDb {
public:
    // UserError naming the file when anything is off. A shard of a sharded retro-chunk run (`--shard i/n`, n > 1) is
    // refused unless `shard_ok` (merge, inspect, retro-knn --queries): it holds only some of the corpus's documents, and index, knn and
    // train took it for the whole database (a helper's pass, session 54), where an index's or knn's shard is refused.
    explicit ChunkDb(const std::string& dir, bool shard_ok = false);
    const std::string& dir() const { return dir_; }
    const nlohmann::json& manifest() const { return manifest_; }
    int chunk_size() const { return chunk_size_; }
    std::int64_t chunk_count() const { return chunks_.dim(0); }
    std::int64_t doc_count() const { return doc_offsets_.dim(0) - 1; }
    std::int64_t seq_count() const { return seq_starts_.dim(0); }
    DType token_dtype() const { return chunks_.dtype(); }

    std::int32_t token(std::int64_t row, int col) const;
    // Appends rows [first, end) as int32 ids (padding included) to out.
    void rows(std::int64_t first, std::int64_t end, std::vector<std::int32_t>& out) const;
    // RETRO's retrieved unit for chunk `id` (RETRO.md A.6): its cs ids, then the next row's cs ids when that
    // row is in the same document and does not begin with its EOS (RP's test: no EOS in row id's cs + 1 ids), else
    // cs pads (0); out holds 2 * chunk_size ids.
    void neighbour_tokens(std::int64_t id, std::int32_t* out) const;
    // The opening checks only shapes; the values of doc_ids, doc_offsets and seq_starts are read unchecked
    // here: a reader first calls check_arrays() (it goes over the database anyway), or looks a few rows up
    // through doc_of_checked() / check_doc().
    std::int64_t doc_of(std::int64_t chunk) const { return doc_ids_.data<std::int64_t>()[chunk]; }
    std::int64_t doc_first(std::int64_t doc) const { return doc_offsets_.data<std::int64_t>()[doc]; }
    std::int64_t doc_end(std::int64_t doc) const { return doc_offsets_.data<std::int64_t>()[doc + 1]; }
    std::int64_t seq_start(std::int64_t s) const { return seq_starts_.data<std::int64_t>()[s]; }
    // docs/formats.md's invariants, in one sequential pass over the mapped arrays: doc_offsets non-decreasing
    // (from 0 to N), doc_ids[c] the document whose rows hold c (so in [0, D) and non-decreasing), seq_starts in
    // [0, N). Reads 8 bytes a chunk, a document and a sequence (about 8.5 GB for a billion chunks): for readers
    // that go over the database anyway. UserError naming the file and its first bad row.
    void check_arrays() const;
    // Re-hashes files against the fingerprints the manifest records (core/manifest.h manifest_verify_outputs):
    // kLayout = doc_ids, doc_offsets and seq_starts (what check_arrays reads); kRows adds chunks.npy, for readers
    // that go over every row (a shard's reader sees only its rows: kLayout); kAll adds sources.jsonl, which only
    // a merge reads whole (a database whose sources.jsonl was rewritten, e.g. paths after moving the corpus,
    // still indexes and trains).
    enum class Verify { kLayout, kRows, kAll };
    void verify(Verify which) const;
    // doc_ids[chunk] after checking that row and its document's two doc_offsets rows (O(1)), for readers that
    // look up a few chunks (inspect --chunk, knn show, generate).
    std::int64_t doc_of_checked(std::int64_t chunk) const;
    // UserError unless 0 <= doc_first(doc) <= doc_end(doc) <= N (doc in [0, D)); O(1).
    void check_doc(std::int64_t doc) const;
    // Source of one document (a scan of sources.jsonl).
    DocSource source(std::int64_t doc) const;
    std::string sources_path() const;
    std::string tokenizer_path() const;   // recorded in the manifest ("" when absent)
    // The tokenizer to show this database's text with: `override` (a --tokenizer: tok.model or its folder) or the
    // recorded one. UserError when there is none, or when it is not the tokenizer the database was chunked with
    // (the fingerprint the manifest records differs: its ids would decode to other text, or fall outside its
    // vocabulary); `flag` names the option in the messages.
    std::string tokenizer_checked(const std::string& override, const std::string& flag = "--tokenizer") const;
    // The fingerprint the manifest records for that tokenizer ("" when absent): Tokenizer's vouched_fingerprint, so a
    // model tokenizer_checked held to it is read even where a stopped retro-tokenizer --force left its folder marked.
    std::string tokenizer_fingerprint() const;

private:
    std::string dir_;
    nlohmann::json manifest_;
    int chunk_size_ = 0;
    NpyArray chunks_, doc_ids_, doc_offsets_, seq_starts_;
};

// Reads sources.jsonl in order, one document at a time.
class ChunkSourcesReader {
public:
    explicit ChunkSourcesReader(const std::string& path);
    bool next(DocSource& out);   // false at the end
private:
    std::string path_;
    std::ifstream in_;
    std::int64_t line_ = 0;
};

}  // namespace retro
