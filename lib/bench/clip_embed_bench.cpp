// Implementation of clip_embed_bench.h. The image paths reach the peer as a file of JSON strings,
// one a line (absolute paths), so that both sides embed the same files in the same order and batches.
#include "bench/clip_embed_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/side_by_side.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "core/shell_quote.h"
#include "core/splitmix.h"
#include "core/threads.h"
#include "embed/clip_embedder.h"
#include "embed/image_encode.h"
#include "index/image_index.h"

namespace retro::bench {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMaxSyntheticImages = 100000;   // (~150 KB each: 15 GB)

std::uint8_t clamp8(double v) { return static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0)); }

void refuse_text_options(const EmbedBenchOptions& o) {
    if (o.device != "cpu") user_error_in("--device " + o.device, "the clip embedder runs on the CPU only", "drop --device");
    if (!o.texts.empty() || !o.texts_out.empty() || o.peer_sorted)
        user_error_in("--texts/--texts-out/--peer-sorted", "do not apply to --embedder clip (it embeds images)",
                      "drop them; --images DIR or --image-count N choose the images");
    if (o.batch < 1 || o.repeats < 1 || o.image_count < 1) user_error_in("--batch/--repeats/--image-count", "must be positive");
    if (o.image_count > kMaxSyntheticImages)
        user_error_in("--image-count", cat("is ", o.image_count, ", more than the ", kMaxSyntheticImages,
                                           " synthetic images this bench writes to disk before timing them"),
                      "give --images DIR for more");
    if (!o.images.empty() && !o.images_out.empty())
        user_error_in("--images-out", "writes synthetic images, which --images DIR replaces", "drop one of them");
}

}  // namespace

RgbImage synthetic_image(std::uint64_t seed, std::int64_t i) {
    SplitMix64 rng(splitmix64(seed) ^ splitmix64(0x636c6970ULL + static_cast<std::uint64_t>(i)));
    RgbImage img;
    img.width = 321 + 2 * static_cast<int>(rng.next() % 160);    // odd, 321 .. 639
    img.height = 241 + 2 * static_cast<int>(rng.next() % 120);   // odd, 241 .. 479
    const int w = img.width, h = img.height;
    img.rgb.resize(static_cast<std::size_t>(w) * h * 3);
    double base[3], dx[3], dy[3];
    for (int c = 0; c < 3; ++c) {
        base[c] = 40 + 170 * rng.uniform();
        dx[c] = (rng.uniform() - 0.5) * 160.0 / w;
        dy[c] = (rng.uniform() - 0.5) * 160.0 / h;
    }
    struct Shape { bool disc; double x0, y0, x1, y1; double col[3]; };
    std::vector<Shape> shapes(4 + rng.next() % 5);
    for (auto& s : shapes) {
        s.disc = rng.next() % 2;
        s.x0 = rng.uniform() * w;
        s.y0 = rng.uniform() * h;
        s.x1 = 10 + rng.uniform() * w / 3;   // rectangle: size; disc: radius x, y
        s.y1 = 10 + rng.uniform() * h / 3;
        for (double& c : s.col) c = 255 * rng.uniform();
    }
    for (int y = 0; y < h; ++y) {
        std::uint8_t* row = img.rgb.data() + static_cast<std::size_t>(y) * w * 3;
        for (int x = 0; x < w; ++x) {
            double px[3] = {base[0] + dx[0] * x + dy[0] * y, base[1] + dx[1] * x + dy[1] * y, base[2] + dx[2] * x + dy[2] * y};
            for (const auto& s : shapes) {
                const bool in = s.disc ? ((x - s.x0) * (x - s.x0) / (s.x1 * s.x1) + (y - s.y0) * (y - s.y0) / (s.y1 * s.y1) <= 1)
                                       : (x >= s.x0 && x < s.x0 + s.x1 && y >= s.y0 && y < s.y0 + s.y1);
                if (in) std::copy(s.col, s.col + 3, px);
            }
            const std::uint64_t noise = rng.next();
            for (int c = 0; c < 3; ++c) row[x * 3 + c] = clamp8(px[c] + static_cast<double>((noise >> (8 * c)) & 15) - 7.5);
        }
    }
    return img;
}

std::vector<std::string> write_synthetic_images(const std::string& dir, std::int64_t count, std::uint64_t seed) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!fs::is_directory(dir)) user_error_in(dir, "cannot be made as a folder", "give a writable path");
    std::vector<std::string> paths(static_cast<std::size_t>(count));
    parallel_for(count, [&](std::int64_t i) {
        char name[32];
        const bool png = i % 4 == 3;
        std::snprintf(name, sizeof name, "img_%05lld.%s", static_cast<long long>(i), png ? "png" : "jpg");
        const std::string p = (fs::absolute(dir) / name).lexically_normal().string();
        const RgbImage img = synthetic_image(seed, i);
        if (png) image_write_png(p, img);
        else image_write_jpeg(p, img, 90);
        paths[static_cast<std::size_t>(i)] = p;
    });
    return paths;
}

void run_clip_embed_bench(const EmbedBenchOptions& o, const std::string& command_line) {
    refuse_text_options(o);
    ClipEmbedder emb(ClipEmbedderOptions{o.model, 77, o.batch});
    if (!emb.model().has_vision())
        user_error_in(emb.model().weights_path(), "holds no vision tower (a text-only CLIP checkpoint)",
                      "give a CLIPModel checkpoint with vision_model");
    const int threads = thread_count();

    // The images: a folder's, or synthetic ones written to --images-out or a temp folder.
    ScratchPath scratch;
    std::vector<std::string> paths;
    std::string source;
    if (!o.images.empty()) {
        const std::string root = fs::absolute(o.images).lexically_normal().string();
        for (const auto& rel : image_folder_list(root)) paths.push_back((fs::path(root) / rel).string());
        source = "images of " + root;
    } else {
        const std::string dir = o.images_out.empty() ? scratch.make("clip") : o.images_out;
        paths = write_synthetic_images(dir, o.image_count, o.seed);
        source = cat("synthetic images (seed ", o.seed, ", 3/4 JPEG q90, 1/4 PNG) in ", dir);
    }
    const std::int64_t n = static_cast<std::int64_t>(paths.size());

    // Decode + preprocess alone (as embed_images does it, batch by batch), and the images' sizes.
    const int side = emb.model().config().vision.image_size;
    const std::size_t per = 3 * static_cast<std::size_t>(side) * side;
    std::vector<double> widths(paths.size()), heights(paths.size());
    std::vector<float> pixels;
    const double pre_ms = median_ms(
        [&] {
            for (std::int64_t b0 = 0; b0 < n; b0 += o.batch) {
                const std::int64_t b1 = std::min<std::int64_t>(n, b0 + o.batch);
                pixels.resize(static_cast<std::size_t>(b1 - b0) * per);
                parallel_for(b1 - b0, [&](std::int64_t i) {
                    const RgbImage img = image_decode(paths[b0 + i]);
                    widths[b0 + i] = img.width;
                    heights[b0 + i] = img.height;
                    clip_pixel_values(img, emb.image_config(), pixels.data() + i * per, paths[b0 + i]);
                });
            }
        },
        o.repeats);
    double mean_w = 0, mean_h = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        mean_w += widths[i] / static_cast<double>(n);
        mean_h += heights[i] / static_cast<double>(n);
    }

    std::vector<float> out(static_cast<std::size_t>(n) * emb.dim());
    auto ours = [&] {
        const WallCpu t = median_wall_cpu([&] { emb.embed_images(paths, out.data()); }, o.repeats);
        return nlohmann::json{{"impl", "retrokit clip"},
                              {"model", emb.to_json()["model"]},
                              {"images", n},
                              {"mean_width", mean_w},
                              {"mean_height", mean_h},
                              {"image_size", side},
                              {"batch", o.batch},
                              {"threads", threads},
                              {"seconds", t.wall},
                              {"cpu_seconds", t.cpu},
                              {"preprocess_seconds", pre_ms / 1e3},
                              {"images_per_s", static_cast<double>(n) / t.wall},
                              {"images_per_cpu_s", static_cast<double>(n) / t.cpu}};
    };
    ScratchPath list;
    std::function<nlohmann::json()> peer;
    if (!o.peer.empty()) {
        std::string lines;
        for (const auto& p : paths) lines += nlohmann::json(p).dump() + "\n";
        write_file_atomic(list.make("clip-files", ".jsonl"), lines);
        peer = [&] {
            return run_peer_script(o.python, o.peer,
                                   "--model " + shell_quote(o.model) + " --files " + shell_quote(list.path()) + " --threads " +
                                       std::to_string(threads) + " --batch " + std::to_string(o.batch) + " --repeats " +
                                       std::to_string(o.repeats));
        };
    }
    const SideBySide sbs = run_side_by_side(o.rounds, "images", ours, peer);

    std::vector<std::vector<std::string>> rows = {{"impl", "images", "mean size", "batch", "threads", "preprocess s",
                                                   "total s", "cpu s", "images/s", "images/cpu-s"}};
    for (const auto* r : {&sbs.ours, &sbs.peer}) {
        if (r->is_null() || r->contains("skipped")) continue;   // (a skipped peer: its reason is in the JSON and the log)
        rows.push_back({(*r)["impl"].get<std::string>(), std::to_string((*r)["images"].get<std::int64_t>()),
                        format_fixed((*r)["mean_width"].get<double>(), 0) + "x" + format_fixed((*r)["mean_height"].get<double>(), 0),
                        std::to_string((*r)["batch"].get<int>()), std::to_string((*r)["threads"].get<int>()),
                        format_fixed((*r)["preprocess_seconds"].get<double>(), 3), format_fixed((*r)["seconds"].get<double>(), 3),
                        format_fixed((*r)["cpu_seconds"].get<double>(), 3), format_fixed((*r)["images_per_s"].get<double>(), 2),
                        format_fixed((*r)["images_per_cpu_s"].get<double>(), 2)});
    }
    std::printf("retro-bench embed: %s, model %s (clip vision tower, %d x %d input, dim %d), %s\n", cpu_model().c_str(),
                sbs.ours["model"].get<std::string>().c_str(), side, side, emb.dim(), source.c_str());
    std::printf("%s", format_table(rows).c_str());
    nlohmann::json result = {{"stamp", stamp("retro-bench embed", command_line)}, {"cpu", cpu_model()}, {"retrokit", sbs.ours}};
    side_by_side_report(sbs, "images", result);
    if (!o.json.empty()) bench_json_write(o.json, result, "retro-bench embed", command_line);
}

}  // namespace retro::bench
