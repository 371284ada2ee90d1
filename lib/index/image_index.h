// `retro-index --images DIR --embedder clip --model M --out IDX`: an index over a folder of images,
// one vector per image (no chunk database). The images are the files below DIR (recursively)
// named *.jpg, *.jpeg or *.png (any case), in byte order of their paths relative to DIR; any other
// file is left out (and counted in the log). Each is embedded by CLIP's vision tower; the folder
// then holds embeddings.npy, index.faiss, images.json (the relative paths, row by row) and
// manifest.json ("kind": "image", the embedder, "images": {"root", "count"}), written last.
// Everything is decoded and embedded before the output folder is made, so a bad image (truncated,
// not an image, 0 pixels) or a checkpoint without a vision tower stops the run with one line and
// nothing written. `retro-index query` opens such a folder with image_index_open.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tool_context.h"
#include "embed/clip_embedder.h"
#include "index/faiss_index.h"

namespace retro {

inline constexpr const char* kImageListFile = "images.json";

struct ImageIndexOptions {
    std::string images, out;          // the image folder, the index folder
    ClipEmbedderOptions clip;
    std::string factory;              // "" = index_default_factory(n)
    int nprobe = 0, ef_search = 0;
    bool force = false;
};

// The image files of a folder, relative to it, sorted; UserError when it is not a folder or holds none.
std::vector<std::string> image_folder_list(const std::string& dir, std::int64_t* skipped = nullptr);

void image_index_build(const ToolContext& ctx, const ImageIndexOptions& opts);

struct ImageIndexFolder {
    std::string dir, root;            // the index folder; the image folder it was built from
    nlohmann::json manifest;
    std::vector<std::string> images;  // relative to root, one per vector
    std::unique_ptr<FaissIndex> index;
    std::string path(std::int64_t row) const;   // root/images[row]
};

// Checks the manifest (written by retro-index, kind image, a clip embedder) and that images.json
// and index.faiss agree with it; nprobe / efSearch applied when given.
// `verify`: re-hash index.faiss against the manifest before FAISS reads it.
ImageIndexFolder image_index_open(const std::string& dir, int nprobe = 0, int ef_search = 0, bool verify = false);

}  // namespace retro
