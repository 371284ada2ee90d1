// Implementation of image_index.h.
#include "index/image_index.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/folder_walk.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/npy.h"
#include "core/output_folder.h"
#include "embed/model_folder.h"
#include "index/index_memory.h"
#include "text/utf8.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

bool image_name(const fs::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// The xxh3 over every image's relative path and content fingerprint: what the index was built from.
std::string images_fingerprint(const std::string& root, const std::vector<std::string>& rel) {
    std::string all;
    for (const auto& r : rel) all += r + "\n" + fingerprint_file((fs::path(root) / r).string()) + "\n";
    return fingerprint_bytes(all.data(), all.size());
}

}  // namespace

std::vector<std::string> image_folder_list(const std::string& dir, std::int64_t* skipped) {
    if (!fs::is_directory(dir)) user_error_in(dir, "is not a folder", "give the folder of JPEG / PNG images to index");
    std::vector<std::string> rel;
    std::int64_t other = 0;
    FolderWalkVisitor visit;
    visit.on_file = [&](const fs::path& file) {
        // the path under the folder as walked (fs::relative resolved symlinks: a linked file was recorded as
        // "../../target/x.png", a linked folder's files under the target's path)
        if (!image_name(file)) {
            ++other;
            return;
        }
        utf8_require_path(file.string(), "an image");   // (images.json records it)
        rel.push_back(file.lexically_relative(dir).generic_string());
    };
    visit.on_broken_link = [&](const fs::path& link, const std::string& why) {
        if (image_name(link)) log_warn("skipping " + link.string() + ": " + why);
        ++other;
    };
    folder_walk(dir, visit);
    std::sort(rel.begin(), rel.end());
    if (rel.empty()) user_error_in(dir, "holds no *.jpg, *.jpeg or *.png file", "give the folder of images to index");
    if (skipped) *skipped = other;
    return rel;
}

void image_index_build(const ToolContext& ctx, const ImageIndexOptions& given) {
    ImageIndexOptions o = given;
    if (!o.clip.model_dir.empty()) o.clip.model_dir = embedder_model_folder("clip", o.clip.model_dir);
    if (o.out.empty()) user_error_in("--out", "is needed", "retro-index --images DIR --embedder clip --model M --out IDX");
    index_check_search_options(o.nprobe, o.ef_search);
    std::error_code ec;
    if (fs::exists(o.out) && !fs::is_empty(o.out, ec) && !o.force) user_error_in(o.out, "already exists", "pass --force to replace it");
    output_folder_guard(o.out, ctx.tool, {{"--images", o.images}, {"--model", o.clip.model_dir}},
                        o.force && fs::exists(o.out) && !fs::is_empty(o.out, ec));
    if (o.force && fs::exists(o.out)) output_folder_clear(o.out, ctx.tool, /*check_only=*/true);
    const std::string root = fs::absolute(o.images).lexically_normal().string();
    std::int64_t skipped = 0;
    const std::vector<std::string> rel = image_folder_list(root, &skipped);
    const std::int64_t n = static_cast<std::int64_t>(rel.size());
    log_info("indexing " + std::to_string(n) + " images from " + root +
             (skipped ? " (" + std::to_string(skipped) + " other files left out)" : ""));
    ClipEmbedder emb(o.clip);
    if (!emb.model().has_vision())
        user_error_in(emb.model().weights_path(), "holds no vision tower (a text-only CLIP checkpoint) and cannot embed images",
                      "give a CLIPModel checkpoint with vision_model");
    const int d = emb.dim();
    std::string factory = o.factory.empty() ? index_default_factory(n) : o.factory, note;
    const std::string fitted = index_fit_factory(factory, n, note);
    index_check_trainable(factory, n);   // the factory asked for named (its PQ part is the fitted one's)
    if (!note.empty()) log_warn(note);
    index_check_sizes(fitted, n, d, n, "", static_cast<double>(n) * d * 4, false);   // the vectors held, added at once
    FaissIndex index(fitted, d);

    std::vector<std::string> paths;
    for (const auto& r : rel) paths.push_back((fs::path(root) / r).string());
    std::vector<float> vectors(static_cast<std::size_t>(n) * d);
    emb.embed_images(paths, vectors.data());   // every image decoded before anything is written
    if (index.needs_training()) index.train(n, vectors.data());
    index.add(n, vectors.data());
    const std::int64_t nlist = index_factory_nlist(fitted);
    int nprobe = o.nprobe;
    if (nlist > 0) {
        nprobe = nprobe <= 0 ? index_default_nprobe(nlist) : index_fit_nprobe(nprobe, nlist);
        index.set_nprobe(nprobe);
    }
    if (o.ef_search > 0 && !index.set_ef_search(o.ef_search))
        log_warn(cat("--ef-search ", o.ef_search, ": the index has no HNSW graph; nothing to set"));

    if (o.force && fs::exists(o.out)) output_folder_clear(o.out, ctx.tool);
    fs::create_directories(o.out);
    npy_save((fs::path(o.out) / "embeddings.npy").string(), {n, static_cast<std::int64_t>(d)}, vectors.data());
    index.save((fs::path(o.out) / "index.faiss").string());
    write_file_atomic((fs::path(o.out) / kImageListFile).string(), nlohmann::json(rel).dump(1) + "\n");
    Manifest m(ctx);
    m.parameters() = {{"embedder", "clip"}, {"images", root}, {"factory", o.factory}, {"nprobe", o.nprobe}, {"ef_search", o.ef_search}};
    m.extra()["kind"] = "image";
    m.extra()["embedder"] = emb.to_json();
    m.extra()["images"] = {{"root", root}, {"count", n}, {"fingerprint", images_fingerprint(root, rel)}};
    m.extra()["index"] = {{"factory", fitted}, {"factory_asked", factory}, {"nlist", nlist}, {"nprobe", nlist > 0 ? nprobe : 0},
                          {"ef_search", o.ef_search}, {"note", note}, {"vectors", n}, {"dim", d}, {"metric", "inner_product"}};
    m.add_output(o.out, "embeddings.npy");
    m.add_output(o.out, "index.faiss");
    m.add_output(o.out, kImageListFile);
    m.write(o.out);
    log_info("wrote " + o.out + ": " + std::to_string(n) + " images, vectors of dimension " + std::to_string(d) + ", index " + fitted);
}

std::string ImageIndexFolder::path(std::int64_t row) const { return (fs::path(root) / images.at(static_cast<std::size_t>(row))).string(); }

ImageIndexFolder image_index_open(const std::string& dir, int nprobe, int ef_search, bool verify) {
    index_check_search_options(nprobe, ef_search);
    ImageIndexFolder f;
    f.dir = dir;
    f.manifest = manifest_read(dir);
    const std::string mp = (fs::path(dir) / "manifest.json").string();
    if (f.manifest.value("tool", "") != "retro-index") user_error_in(mp, "was not written by retro-index");
    if (f.manifest.value("kind", "") != "image") user_error_in(mp, "is not an image index (retro-index --images)");
    const auto& im = f.manifest.value("images", nlohmann::json::object());
    if (!im.contains("root") || !im["root"].is_string()) user_error_in(mp, "records no image folder", "rebuild the index with retro-index --images");
    f.root = im["root"].get<std::string>();
    const std::string list = (fs::path(dir) / kImageListFile).string();
    if (!fs::exists(list)) user_error_in(list, "missing (the image paths of the index)", "rebuild the index with retro-index --images");
    nlohmann::json j = json_read_file(list);
    if (!j.is_array()) user_error_in(list, "is not a JSON array of paths", "rebuild the index with retro-index --images");
    for (const auto& p : j) {
        if (!p.is_string()) user_error_in(list, "holds something other than a path", "rebuild the index with retro-index --images");
        f.images.push_back(p.get<std::string>());
    }
    const int dim = f.manifest.value("index", nlohmann::json::object()).value("dim", 0);
    if (verify) manifest_verify_outputs(dir, {"index.faiss"});
    f.index = std::make_unique<FaissIndex>(FaissIndex::load((fs::path(dir) / "index.faiss").string()));
    if (f.index->dim() != dim) user_error_in((fs::path(dir) / "index.faiss").string(), cat("has dimension ", f.index->dim(), ", the manifest says ", dim));
    if (f.index->size() != static_cast<std::int64_t>(f.images.size()))
        user_error_in(list, cat("lists ", f.images.size(), " images, index.faiss holds ", f.index->size(), " vectors"),
                      "rebuild the index with retro-index --images");
    index_apply_search_options(*f.index, nprobe, ef_search, (fs::path(dir) / "index.faiss").string());
    return f;
}

}  // namespace retro
