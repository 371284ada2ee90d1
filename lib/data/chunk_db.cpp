// Implementation of chunk_db.h.
#include "data/chunk_db.h"

#include <filesystem>

#include "core/error.h"
#include "core/manifest.h"

namespace fs = std::filesystem;

namespace retro {

ChunkDb::ChunkDb(const std::string& dir) : dir_(dir) {
    manifest_ = manifest_read(dir);
    auto path = [&](const char* name) { return (fs::path(dir) / name).string(); };
    chunks_ = NpyArray(path("chunks.npy"));
    doc_ids_ = NpyArray(path("doc_ids.npy"));
    doc_offsets_ = NpyArray(path("doc_offsets.npy"));
    seq_starts_ = NpyArray(path("seq_starts.npy"));
    if (chunks_.shape().size() != 2 || (chunks_.dtype() != DType::U16 && chunks_.dtype() != DType::I32))
        user_error_in(chunks_.path(), "must be a 2-D u16 or i32 array (chunks, chunk_size)");
    chunk_size_ = static_cast<int>(chunks_.dim(1));
    std::int64_t n = chunks_.dim(0);
    doc_ids_.expect_shape({n});
    doc_ids_.data<std::int64_t>();
    seq_starts_.expect_shape({-1});
    seq_starts_.data<std::int64_t>();
    doc_offsets_.expect_shape({-1});
    const std::int64_t* off = doc_offsets_.data<std::int64_t>();
    if (doc_offsets_.dim(0) < 1 || off[doc_offsets_.dim(0) - 1] != n || off[0] != 0)
        user_error_in(doc_offsets_.path(), "must start at 0 and end at the chunk count " + std::to_string(n));
}

std::int32_t ChunkDb::token(std::int64_t row, int col) const {
    std::int64_t i = row * chunk_size_ + col;
    if (chunks_.dtype() == DType::U16) return chunks_.data<std::uint16_t>()[i];
    return chunks_.data<std::int32_t>()[i];
}

void ChunkDb::rows(std::int64_t first, std::int64_t end, std::vector<std::int32_t>& out) const {
    std::int64_t a = first * chunk_size_, b = end * chunk_size_;
    if (chunks_.dtype() == DType::U16) {
        const std::uint16_t* p = chunks_.data<std::uint16_t>();
        out.insert(out.end(), p + a, p + b);
    } else {
        const std::int32_t* p = chunks_.data<std::int32_t>();
        out.insert(out.end(), p + a, p + b);
    }
}

void ChunkDb::neighbour_tokens(std::int64_t id, std::int32_t* out) const {
    const int cs = chunk_size_;
    for (int t = 0; t < cs; t++) out[t] = token(id, t);
    const bool continues = id + 1 < chunk_count() && doc_of(id + 1) == doc_of(id);
    for (int t = 0; t < cs; t++) out[cs + t] = continues ? token(id + 1, t) : 0;
}

std::string ChunkDb::sources_path() const { return (fs::path(dir_) / "sources.jsonl").string(); }

DocSource ChunkDb::source(std::int64_t doc) const {
    ChunkSourcesReader r(sources_path());
    DocSource s;
    for (std::int64_t i = 0; i <= doc; ++i)
        if (!r.next(s)) user_error_in(sources_path(), "has no line for document " + std::to_string(doc));
    return s;
}

std::string ChunkDb::tokenizer_path() const { return manifest_input(manifest_, "tokenizer"); }

ChunkSourcesReader::ChunkSourcesReader(const std::string& path) : path_(path), in_(path) {
    if (!in_) user_error_in(path, "cannot open");
}

bool ChunkSourcesReader::next(DocSource& out) {
    std::string line;
    if (!std::getline(in_, line)) return false;
    ++line_;
    out = chunk_source_parse(line, path_ + ":" + std::to_string(line_));
    return true;
}

}  // namespace retro
