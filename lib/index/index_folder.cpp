// Implementation of index_folder.h.
#include "index/index_folder.h"

#include <cmath>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/manifest.h"
#include "data/chunk_db.h"
#include "embed/embedder.h"

namespace fs = std::filesystem;

namespace retro {

namespace {
std::string kind_of(const nlohmann::json& m) {
    return m.contains("kind") && m["kind"].is_string() ? m["kind"].get<std::string>() : "dense";
}
}  // namespace

std::string IndexFolder::file(const std::string& name) const { return (fs::path(dir) / name).string(); }

std::string index_folder_recorded_db(const std::string& dir, const std::string& option) {
    const nlohmann::json m = manifest_read(dir);
    if (const std::string tool = m.value("tool", std::string()); tool != "retro-index" && !tool.empty())
        user_error_in((fs::path(dir) / "manifest.json").string(), "was written by " + tool + ", not retro-index",
                      "pass the index folder retro-index wrote (and the database as " + option + ")");
    return manifest_recorded_folder(dir, "db", "database", "the index " + dir + " was built from", option);
}

IndexFolder index_folder_open(const std::string& dir, const ChunkDb& db, const IndexFolderOptions& opts) {
    index_check_search_options(opts.nprobe, opts.ef_search);
    IndexFolder f;
    f.dir = dir;
    f.manifest = manifest_read(dir);
    const std::string manifest_path = f.file("manifest.json");
    if (const std::string tool = f.manifest.value("tool", ""); tool != "retro-index")   // (the fix: which folder it wants)
        user_error_in(manifest_path, tool.empty() ? std::string("was not written by retro-index")
                                                  : "was written by " + tool + ", not retro-index",
                      "pass the index folder retro-index --out wrote (retro-index DB --out INDEX)");
    if (kind_of(f.manifest) == "image")
        user_error_in(manifest_path, "is an image index (retro-index --images) with no chunk database",
                      "search it with retro-index query; retro-knn and retro-generate need a chunk index");
    const std::string db_fp = folder_fingerprint(db.manifest());
    const std::string index_db_fp = manifest_input(f.manifest, "db", "fingerprint");
    if (index_db_fp != db_fp)
        user_error_in(db.dir(), "is not the database " + dir + " was built from (fingerprint " + db_fp + ", the index records " +
                                    index_db_fp + ")",
                      "pass the --db the index was built from, or rebuild the index");
    f.kind = kind_of(f.manifest);
    if (f.kind == "bm25") return f;
    if (f.kind != "dense") user_error_in(manifest_path, "records an unknown index kind '" + f.kind + "'");
    if (!f.manifest.contains("embedder")) user_error_in(manifest_path, "names no embedder", "rebuild the index with retro-index");
    f.dim = f.manifest.value("index", nlohmann::json::object()).value("dim", 0);
    if (f.dim <= 0) user_error_in(manifest_path, "records no index dimension", "rebuild the index with retro-index");
    // read whole before use: FAISS trusts the file it reads; the bow embedder's idf.npy (when the manifest lists it)
    if (opts.verify) manifest_verify_outputs(dir, opts.load_index ? std::vector<std::string>{"index.faiss", "idf.npy"}
                                                                  : std::vector<std::string>{"idf.npy"});
    if (!opts.load_index) return f;
    const std::string path = f.file("index.faiss");
    f.index = std::make_unique<FaissIndex>(FaissIndex::load(path));
    if (f.index->dim() != f.dim)
        user_error_in(path, "has dimension " + std::to_string(f.index->dim()) + ", the manifest says " + std::to_string(f.dim));
    if (f.index->size() != db.chunk_count())
        user_error_in(path, "holds " + std::to_string(f.index->size()) + " vectors, the database " +
                                std::to_string(db.chunk_count()) + " chunks");
    index_apply_search_options(*f.index, opts.nprobe, opts.ef_search, path);
    return f;
}

NpyArray index_folder_embeddings(const IndexFolder& f, const ChunkDb& db) {
    NpyArray emb(f.file("embeddings.npy"));
    const char* fix = "rebuild the index with retro-index";
    if (emb.shape().size() != 2 || (emb.dtype() != DType::F32 && emb.dtype() != DType::F16))
        user_error_in(emb.path(), "must be a 2-D f32 or f16 array (chunks, dim), not " + dtype_name(emb.dtype()) + " " +
                                      shape_string(emb.shape()), fix);
    if (emb.dim(1) != f.dim)
        user_error_in(emb.path(), "has dimension " + std::to_string(emb.dim(1)) + ", the manifest says " + std::to_string(f.dim), fix);
    if (emb.dim(0) != db.chunk_count())
        user_error_in(emb.path(), "has " + std::to_string(emb.dim(0)) + " rows, the database " + db.dir() + " " +
                                      std::to_string(db.chunk_count()) + " chunks", fix);
    return emb;
}

std::string index_folder_kind(const std::string& dir) {
    return kind_of(manifest_read(dir));
}

void index_folder_check_embedder(const IndexFolder& f, const ChunkDb& db, const Embedder& embedder) {
    const std::string name = f.embedder().is_object() ? f.embedder().value("name", std::string()) : std::string();
    if (name != "bow" && name != "bert" && name != "t5") return;
    if (!fs::exists(f.file("embeddings.npy"))) return;
    const NpyArray emb = index_folder_embeddings(f, db);
    const int cs = db.chunk_size(), d = f.dim;
    std::vector<std::int32_t> ids;
    std::vector<float> mine(static_cast<std::size_t>(d));
    int compared = 0;
    for (std::int64_t c = 0; c < db.chunk_count() && c < 64 && compared < 4; ++c) {
        ids.clear();
        db.rows(c, c + 1, ids);
        embedder.embed(ids.data(), 1, cs, mine.data());
        double dot = 0, a2 = 0, b2 = 0;
        for (int i = 0; i < d; ++i) {
            const double stored = emb.dtype() == DType::F32 ? emb.data<float>()[c * d + i]
                                                            : f16_to_f32(static_cast<const std::uint16_t*>(emb.raw())[c * d + i]);
            dot += stored * mine[static_cast<std::size_t>(i)];
            a2 += stored * stored;
            b2 += static_cast<double>(mine[static_cast<std::size_t>(i)]) * mine[static_cast<std::size_t>(i)];
        }
        if (a2 == 0 && b2 == 0) continue;   // an all-padding chunk: a zero row either way
        const double cosine = a2 > 0 && b2 > 0 ? dot / std::sqrt(a2 * b2) : 0.0;
        if (cosine < 0.99)
            user_error_in((fs::path(f.dir) / "manifest.json").string(),
                          cat("its embedder settings do not give the vectors the index holds (chunk ", c, ": cosine ",
                              cosine, "): edited since retro-index wrote it?"),
                          "restore the manifest, or rebuild the index with retro-index");
        ++compared;
    }
}

}  // namespace retro
