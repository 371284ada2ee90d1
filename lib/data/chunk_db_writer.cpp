// Implementation of chunk_db_writer.h.
#include "data/chunk_db_writer.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/npy.h"
#include "data/chunk_layout.h"

namespace fs = std::filesystem;

namespace retro {
namespace {
constexpr std::int64_t kWidest = std::int64_t(1) << 60;   // header room for any final row count

std::uint64_t state_size(const nlohmann::json* state, const std::string& name) {
    if (!state) return 0;
    return state->at("sizes").at(name).get<std::uint64_t>();
}

// The fingerprint of a file's kept bytes the checkpoint records ("" for a checkpoint before session 52: not checked).
std::string state_hash(const nlohmann::json* state, const std::string& name) {
    if (!state || !state->contains("hashes")) return "";
    return state->at("hashes").at(name).get<std::string>();
}
}  // namespace

nlohmann::json chunk_stats_json(const ChunkDbCounts& k, int chunk_size) {
    double slots = static_cast<double>(k.chunks) * chunk_size;
    return {{"documents", k.docs},
            {"chunks", k.chunks},
            {"sequences", k.seqs},
            {"tokens", k.tokens},
            {"padding_fraction", slots > 0 ? 1.0 - static_cast<double>(k.tokens) / slots : 0.0}};
}

const std::vector<std::string>& ChunkDbWriter::output_names() {
    static const std::vector<std::string> names{"chunks.npy", "doc_ids.npy", "doc_offsets.npy", "seq_starts.npy",
                                                "sources.jsonl"};
    return names;
}

ChunkDbWriter::ChunkDbWriter(const std::string& dir, DType token_dtype, int chunk_size, int rows_per_seq,
                             const nlohmann::json* state)
    : dir_(dir), dtype_(token_dtype), chunk_size_(chunk_size), rows_per_seq_(rows_per_seq) {
    chunk_header_len_ = npy_header_bytes(dtype_, {kWidest, chunk_size_}).size();
    vec_header_len_ = npy_header_bytes(DType::I64, {kWidest}).size();
    bool resume = state != nullptr;
    auto open = [&](const std::string& name) {
        const std::uint64_t header = name == "chunks.npy" ? chunk_header_len_ : name == "sources.jsonl" ? 0 : vec_header_len_;
        return std::make_unique<ResumableOutput>((fs::path(dir_) / name).string(), resume, state_size(state, name), header,
                                                 state_hash(state, name));
    };
    chunks_ = open("chunks.npy");
    doc_ids_ = open("doc_ids.npy");
    doc_offsets_ = open("doc_offsets.npy");
    seq_starts_ = open("seq_starts.npy");
    sources_ = open("sources.jsonl");
    if (resume) {
        counts_.docs = state->at("docs").get<std::int64_t>();
        counts_.chunks = state->at("chunks").get<std::int64_t>();
        counts_.seqs = state->at("seqs").get<std::int64_t>();
        counts_.tokens = state->at("tokens").get<std::int64_t>();
        // the counts against the lengths (an edited progress.json ended in an internal error, or wrote a wrong
        // database): each array holds its header and a row per chunk, document or sequence
        const std::string cp = (fs::path(dir_) / "progress.json").string();
        const auto expect = [&](const ResumableOutput& f, std::uint64_t header, std::int64_t rows, std::uint64_t row_bytes,
                                const char* what) {
            if (rows < 0 || f.size() != header + static_cast<std::uint64_t>(rows) * row_bytes)
                user_error_in(cp, cat("records ", rows, " ", what, " and ", f.size(), " bytes of ", fs::path(f.path()).filename().string(),
                                      ", which do not agree"),
                              "start again with --force");
        };
        expect(*chunks_, chunk_header_len_, counts_.chunks, std::uint64_t(chunk_size_) * dtype_size(dtype_), "chunks");
        expect(*doc_ids_, vec_header_len_, counts_.chunks, 8, "chunks");
        expect(*doc_offsets_, vec_header_len_, counts_.docs, 8, "documents");
        expect(*seq_starts_, vec_header_len_, counts_.seqs, 8, "sequences");
        if (counts_.tokens < 0 || counts_.tokens > counts_.chunks * chunk_size_)
            user_error_in(cp, cat("records ", counts_.tokens, " tokens in ", counts_.chunks, " chunks of ", chunk_size_),
                          "start again with --force");
    } else {   // placeholders, rewritten by commit()
        chunks_->write(npy_header_bytes(dtype_, {kWidest, chunk_size_}));
        for (auto* f : {doc_ids_.get(), doc_offsets_.get(), seq_starts_.get()})
            f->write(npy_header_bytes(DType::I64, {kWidest}));
    }
}

void ChunkDbWriter::append_document(const std::int32_t* rows, std::int64_t row_count, std::int64_t tokens,
                                    DocSource src) {
    std::int64_t first = counts_.chunks;
    std::size_t n = static_cast<std::size_t>(row_count) * static_cast<std::size_t>(chunk_size_);
    std::size_t at = chunk_buf_.size();
    if (dtype_ == DType::U16) {
        chunk_buf_.resize(at + n * 2);
        auto* out = reinterpret_cast<std::uint16_t*>(chunk_buf_.data() + at);
        for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint16_t>(rows[i]);
    } else {
        chunk_buf_.resize(at + n * 4);
        std::memcpy(chunk_buf_.data() + at, rows, n * 4);
    }
    for (std::int64_t r = 0; r < row_count; ++r) doc_id_buf_.push_back(counts_.docs);
    offset_buf_.push_back(first);
    chunk_append_seq_starts(first, row_count, rows_per_seq_, seq_buf_);
    src.doc = counts_.docs;
    source_buf_ += chunk_source_line(src);
    counts_.docs++;
    counts_.chunks += row_count;
    counts_.seqs = counts_.seqs + (row_count + rows_per_seq_ - 1) / rows_per_seq_;
    counts_.tokens += tokens;
}

void ChunkDbWriter::flush() {
    chunks_->write(chunk_buf_.data(), chunk_buf_.size());
    doc_ids_->write(doc_id_buf_.data(), doc_id_buf_.size() * 8);
    doc_offsets_->write(offset_buf_.data(), offset_buf_.size() * 8);
    seq_starts_->write(seq_buf_.data(), seq_buf_.size() * 8);
    sources_->write(source_buf_);
    chunk_buf_.clear();
    doc_id_buf_.clear();
    offset_buf_.clear();
    seq_buf_.clear();
    source_buf_.clear();
}

nlohmann::json ChunkDbWriter::state() {
    flush();
    nlohmann::json sizes, hashes;
    for (auto* f : {chunks_.get(), doc_ids_.get(), doc_offsets_.get(), seq_starts_.get(), sources_.get()}) {
        f->sync();
        sizes[fs::path(f->path()).filename().string()] = f->size();
        hashes[fs::path(f->path()).filename().string()] = f->hash();
    }
    return {{"docs", counts_.docs}, {"chunks", counts_.chunks}, {"seqs", counts_.seqs},
            {"tokens", counts_.tokens}, {"sizes", sizes}, {"hashes", hashes}};
}

void ChunkDbWriter::commit() {
    flush();
    doc_offsets_->write(&counts_.chunks, 8);   // the (D+1)-th entry: one past the last chunk
    auto header = [](DType t, std::vector<std::int64_t> shape, std::size_t len) {
        std::string h = npy_header_bytes(t, shape, len);
        RETRO_CHECK(h.size() == len, "npy header grew");
        return h;
    };
    chunks_->commit(header(dtype_, {counts_.chunks, chunk_size_}, chunk_header_len_));
    doc_ids_->commit(header(DType::I64, {counts_.chunks}, vec_header_len_));
    doc_offsets_->commit(header(DType::I64, {counts_.docs + 1}, vec_header_len_));
    seq_starts_->commit(header(DType::I64, {counts_.seqs}, vec_header_len_));
    sources_->commit();
}

}  // namespace retro
