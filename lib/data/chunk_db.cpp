// Implementation of chunk_db.h.
#include "data/chunk_db.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
#include "core/tool_names.h"
#include "text/tokenizer.h"
#include "text/tokenizer_folder.h"

namespace fs = std::filesystem;

namespace retro {

ChunkDb::ChunkDb(const std::string& dir, bool shard_ok) : dir_(dir) {
    manifest_ = manifest_read(dir);
    if (const nlohmann::json p = manifest_.value("parameters", nlohmann::json::object());
        !shard_ok && p.is_object() && p.value("shard_count", 1) > 1)
        user_error_in((fs::path(dir) / "manifest.json").string(),
                      cat("the folder is shard ", p.value("shard_index", 0), "/", p.value("shard_count", 1),
                          " of a sharded retro-chunk run, not a whole database"),
                      "join the shards first: retro-chunk merge SHARD_DIRS... --out DIR");
    // a folder another RetroKit tool finished is not a database, whatever .npy files it also holds (test fixtures
    // write their own tool names, which pass)
    const std::string tool = manifest_.value("tool", "");
    for (const char* other : kRetroTools)
        if (tool == other && tool != "retro-chunk")
            user_error_in((fs::path(dir) / "manifest.json").string(), "was written by " + tool + ", not retro-chunk",
                          "pass a database folder made by retro-chunk");
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

namespace {
const char* const kRebuild = "rebuild the database with retro-chunk";
}  // namespace

void ChunkDb::verify(Verify which) const {
    std::vector<std::string> names{"doc_ids.npy", "doc_offsets.npy", "seq_starts.npy"};
    if (which != Verify::kLayout) names.insert(names.begin(), "chunks.npy");
    if (which == Verify::kAll) names.push_back("sources.jsonl");
    manifest_verify_outputs(dir_, names);
}

void ChunkDb::check_arrays() const {
    const std::int64_t n = chunk_count(), docs = doc_count();
    const std::int64_t* off = doc_offsets_.data<std::int64_t>();
    for (std::int64_t d = 0; d < docs; ++d)   // off[0] = 0 and off[D] = N were checked at opening
        if (off[d + 1] < off[d])
            user_error_in(doc_offsets_.path(), cat("row ", d + 1, " (", off[d + 1], ") is below row ", d, " (", off[d], ")"),
                          kRebuild);
    const std::int64_t* ids = doc_ids_.data<std::int64_t>();
    std::int64_t d = 0;
    for (std::int64_t c = 0; c < n; ++c) {
        while (off[d + 1] <= c) ++d;   // stops below D: off[D] = N > c
        if (ids[c] == d) continue;
        if (ids[c] < 0 || ids[c] >= docs)
            user_error_in(doc_ids_.path(), cat("row ", c, " holds document ", ids[c], " outside [0, ", docs, ")"), kRebuild);
        user_error_in(doc_ids_.path(), cat("row ", c, " holds document ", ids[c], "; doc_offsets.npy puts chunk ", c,
                                           " in document ", d),
                      kRebuild);
    }
    const std::int64_t* seq = seq_starts_.data<std::int64_t>();
    for (std::int64_t s = 0; s < seq_count(); ++s)
        if (seq[s] < 0 || seq[s] >= n)
            user_error_in(seq_starts_.path(), cat("row ", s, " holds chunk ", seq[s], " outside [0, ", n, ")"), kRebuild);
}

void ChunkDb::check_doc(std::int64_t doc) const {
    if (doc < 0 || doc >= doc_count())
        throw InternalError(cat("ChunkDb::check_doc: document ", doc, " outside [0, ", doc_count(), ")"));
    const std::int64_t first = doc_first(doc), end = doc_end(doc);
    if (first < 0 || end > chunk_count() || end < first)
        user_error_in(doc_offsets_.path(), cat("rows ", doc, " and ", doc + 1, " (", first, ", ", end,
                                               ") are not a range of chunks in [0, ", chunk_count(), "]"),
                      kRebuild);
}

std::int64_t ChunkDb::doc_of_checked(std::int64_t chunk) const {
    if (chunk < 0 || chunk >= chunk_count())
        throw InternalError(cat("ChunkDb::doc_of_checked: chunk ", chunk, " outside [0, ", chunk_count(), ")"));
    const std::int64_t doc = doc_of(chunk);
    if (doc < 0 || doc >= doc_count())
        user_error_in(doc_ids_.path(), cat("row ", chunk, " holds document ", doc, " outside [0, ", doc_count(), ")"), kRebuild);
    check_doc(doc);
    if (chunk < doc_first(doc) || chunk >= doc_end(doc))
        user_error_in(doc_ids_.path(), cat("row ", chunk, " holds document ", doc, ", whose rows in doc_offsets.npy are [",
                                           doc_first(doc), ", ", doc_end(doc), ")"),
                      kRebuild);
    return doc;
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
    // RP's rule (RETRO.md A.6): no continuation where row id's cs ids and the next row's first id hold EOS. Here a
    // document's EOS ends its last row, so that is: the next row is another document's, or it is this document's
    // last row and holds the EOS alone (a document of length ≡ 1 mod cs with bos and eos; it was taken until 2026-12)
    const bool continues = id + 1 < chunk_count() && doc_of(id + 1) == doc_of(id) && token(id + 1, 0) != TOKEN_EOS;
    for (int t = 0; t < cs; t++) out[cs + t] = continues ? token(id + 1, t) : 0;
}

std::string unrecorded_continuation_note(const std::string& what, const std::string& doing, int chunk_size) {
    return cat(what, " records no neighbour continuation rule: RetroKit before 2026-12-06 read a continuation for a ",
               "neighbour whose next row holds its document's EOS alone (about 1 document in ", chunk_size, "), ",
               doing, " reads none there, as RETRO-pytorch does (docs/formats.md)");
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

std::string ChunkDb::tokenizer_fingerprint() const { return manifest_input(manifest_, "tokenizer", "fingerprint"); }

std::string ChunkDb::tokenizer_checked(const std::string& override, const std::string& flag) const {
    const std::string recorded = tokenizer_path();
    if (override.empty() && recorded.empty())
        user_error_in((fs::path(dir_) / "manifest.json").string(), "records no tokenizer", "pass " + flag + " tok.model");
    const std::string path = tokenizer_resolve_path(override.empty() ? recorded : override);
    if (!fs::exists(path)) tokenizer_refuse_missing_unfinished(path);   // a training stopped before it wrote the model
    if (!fs::exists(path))
        user_error_in(path, override.empty() ? "is missing (the tokenizer " + dir_ + "'s manifest names)" : "does not exist",
                      "pass " + flag + " tok.model: the tokenizer the database was chunked with, or a copy of it");
    const std::string expected = tokenizer_fingerprint();
    if (!expected.empty() && fingerprint_file(path) != expected)
        user_error_in(override.empty() ? path : flag + " " + path,
                      "is not the tokenizer " + dir_ + " was chunked with (its fingerprint differs" +
                          (recorded.empty() ? std::string(")") : "; the database's manifest names " + recorded + ")"),
                      override.empty() ? "the recorded tokenizer was replaced: make the database again"
                                       : "pass that tokenizer (or a copy of it), or leave out " + flag);
    return path;
}

ChunkSourcesReader::ChunkSourcesReader(const std::string& path) : path_(path), in_(path) {
    if (!in_) user_error_in(path, std::string("cannot open: ") + std::strerror(errno));
}

bool ChunkSourcesReader::next(DocSource& out) {
    std::string line;
    if (!std::getline(in_, line)) return false;
    ++line_;
    out = chunk_source_parse(line, path_ + ":" + std::to_string(line_));
    return true;
}

}  // namespace retro
