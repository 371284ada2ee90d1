// retro-bench embed on the tiny golden BERT, with a shell script standing in for the Python peer (it
// counts its calls, records its arguments and reports 10, 20, 30 ... chunks/s): --rounds runs the
// peer once a round, each round's ratio is RetroKit's chunks/s over that round's peer figure, the
// reported ratio is the median of the rounds', and --peer-sorted reaches the peer as
// --sort-by-length. Then --embedder clip on the tiny golden CLIP: synthetic images (written, kept,
// decodable, deterministic) or a folder, the JSON fields, and the same rounds with a fake peer.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/clip_embed_bench.h"
#include "core/error.h"
#include "embed/image_decode.h"
#include "embed/image_encode.h"
#include "test_util.h"

using namespace retro;
using namespace retro::test;
namespace fs = std::filesystem;

namespace {

std::string fake_peer(const TempDir& dir) {
    const auto script = dir / "peer.sh";
    const std::string d = dir.path.string();
    write_text(script, "n=$(cat '" + d + "/count' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '" + d +
                           "/count'\n"
                           "echo \"$@\" >> '" + d + "/args'\n"
                           "c=$((n * 10))\n"
                           "echo '{\"impl\": \"fake peer\", \"chunks\": 6, \"tokens_per_chunk\": 14.0, \"batch\": 4, "
                           "\"max_length\": 32, \"threads\": 1, \"seconds\": 1.0, \"cpu_seconds\": 1.0, "
                           "\"tokenize_seconds\": 0.01, \"chunks_per_s\": '$c', \"chunks_per_cpu_s\": '$c'}'\n");
    return script.string();
}

}  // namespace

TEST_CASE("embed bench: --rounds alternates with the peer and reports the median of the per-round ratios") {
    const std::string model = (source_dir() / "tests/reference/golden/bert_tiny").string();
    for (int rounds : {3, 4}) {   // odd: the middle ratio; even: the mean of the two middle ones
        CAPTURE(rounds);
        TempDir dir("embed-bench");
        const std::string peer = fake_peer(dir);
        auto r = run_tool("retro-bench", "--threads 1 embed --model " + model +
                                             " --chunks 6 --tokens 12 --batch 4 --max-length 32 --repeats 1 --rounds " +
                                             std::to_string(rounds) + " --peer-sorted --python sh --peer " + peer +
                                             " --json " + (dir / "embed.json").string());
        CAPTURE(r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(read_text(dir / "count") == std::to_string(rounds) + "\n");
        CHECK(read_text(dir / "args").find("--sort-by-length") != std::string::npos);
        const auto j = nlohmann::json::parse(read_text(dir / "embed.json"));
        CHECK(j["stamp"]["tool"] == "retro-bench embed");   // the shared envelope: stamp (the subcommand named), machine beside "cpu"
        CHECK(j["machine"]["cpu"] == j["cpu"]);
        REQUIRE(j["rounds"].size() == static_cast<std::size_t>(rounds));
        std::vector<double> ratios;
        for (int i = 0; i < rounds; ++i) {
            const auto& round = j["rounds"][i];
            CHECK(round["peer_chunks_per_s"].get<double>() == doctest::Approx(10.0 * (i + 1)));
            CHECK(round["ratio"].get<double>() == doctest::Approx(round["retrokit_chunks_per_s"].get<double>() /
                                                                  round["peer_chunks_per_s"].get<double>()));
            ratios.push_back(round["ratio"].get<double>());
        }
        std::sort(ratios.begin(), ratios.end());
        const double median = rounds % 2 ? ratios[rounds / 2] : 0.5 * (ratios[rounds / 2 - 1] + ratios[rounds / 2]);
        CHECK(j["ratio"].get<double>() == doctest::Approx(median));
        // the peer's row is its median round by chunks/s (the upper middle one for an even count)
        CHECK(j["peer"]["chunks_per_s"].get<double>() == doctest::Approx(10.0 * (rounds / 2 + 1)));
        CHECK(j["retrokit"]["chunks"] == 6);
        CHECK(r.out.find("medians of " + std::to_string(rounds) + " rounds") != std::string::npos);
    }
}

TEST_CASE("embed bench: a peer that cannot run is skipped visibly, and RetroKit's row is kept") {
    const std::string model = (source_dir() / "tests/reference/golden/bert_tiny").string();
    TempDir dir("embed-bench-skip");
    write_text(dir / "broken.sh", "echo 'No module named transformers' >&2; exit 1\n");
    auto r = run_tool("retro-bench", "--threads 1 embed --model " + model + " --chunks 6 --tokens 12 --batch 4 " +
                                         "--max-length 32 --repeats 1 --rounds 3 --python sh --peer " +
                                         (dir / "broken.sh").string() + " --json " + (dir / "embed.json").string());
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);   // (exit 2 and no table, no JSON before)
    CHECK(r.out.find("retrokit bert") != std::string::npos);
    CHECK(r.err.find("peer skipped: ") != std::string::npos);
    const auto j = nlohmann::json::parse(read_text(dir / "embed.json"));
    CHECK(j["retrokit"]["chunks_per_s"].get<double>() > 0);
    CHECK(j["peer"]["skipped"].get<std::string>().find("broken.sh printed no JSON result") != std::string::npos);
    CHECK_FALSE(j.contains("ratio"));
}

TEST_CASE("embed bench: without --peer a single run is timed and no ratio is reported") {
    TempDir dir("embed-bench-alone");
    const std::string model = (source_dir() / "tests/reference/golden/bert_tiny").string();
    auto r = run_tool("retro-bench", "--threads 1 embed --model " + model +
                                         " --chunks 5 --tokens 10 --repeats 1 --rounds 4 --json " +
                                         (dir / "embed.json").string());
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(read_text(dir / "embed.json"));
    CHECK(j["retrokit"]["chunks_per_s"].get<double>() > 0);
    CHECK_FALSE(j.contains("ratio"));
    CHECK_FALSE(j.contains("rounds"));
}

TEST_CASE("embed bench: MPNet, XLM-R and RoBERTa models cut texts of --tokens of their own tokenizer's pieces") {
    // (it took WordPiece's for every model, and stopped on XLM-R's and RoBERTa's, which have none)
    for (const char* name : {"mpnet_tiny", "xlmr_tiny", "roberta_tiny"}) {
        CAPTURE(name);
        TempDir dir("embed-bench-families");
        const std::string model = (source_dir() / "tests/reference/golden" / name).string();
        auto r = run_tool("retro-bench", "--threads 1 embed --model " + model + " --chunks 6 --tokens 20 --repeats 1 --json " +
                                             (dir / "embed.json").string());
        CAPTURE(r.err);
        REQUIRE(r.exit_code == 0);
        const auto j = nlohmann::json::parse(read_text(dir / "embed.json"));
        // about 20 pieces a text, with its two specials (texts end at word boundaries, so a little over or under)
        CHECK(j["retrokit"]["tokens_per_chunk"].get<double>() > 16);
        CHECK(j["retrokit"]["tokens_per_chunk"].get<double>() < 26);
    }
}

TEST_CASE("embed bench: PNG and JPEG writers round-trip through the decoder, synthetic images are deterministic and odd-sized") {
    TempDir dir("image-encode");
    const RgbImage a = bench::synthetic_image(7, 3), b = bench::synthetic_image(7, 3), c = bench::synthetic_image(8, 3);
    CHECK(a.rgb == b.rgb);
    CHECK(a.rgb != c.rgb);
    CHECK(a.width % 2 == 1);
    CHECK(a.height % 2 == 1);
    image_write_png((dir / "a.png").string(), a);
    const RgbImage p = image_decode((dir / "a.png").string());
    CHECK(p.width == a.width);
    CHECK(p.height == a.height);
    CHECK(p.rgb == a.rgb);
    image_write_jpeg((dir / "a.jpg").string(), a, 90);
    const RgbImage j = image_decode((dir / "a.jpg").string());
    REQUIRE(j.rgb.size() == a.rgb.size());
    double mean_abs = 0;
    for (std::size_t i = 0; i < a.rgb.size(); ++i) mean_abs += std::abs(int(a.rgb[i]) - int(j.rgb[i]));
    mean_abs /= static_cast<double>(a.rgb.size());
    CHECK(mean_abs < 6.0);   // quality 90 on mild noise
    CHECK_THROWS_AS(image_write_png((dir / "no/such/folder/x.png").string(), a), UserError);
}

TEST_CASE("embed bench: --embedder clip times the vision path on synthetic images and writes the JSON fields") {
    TempDir dir("embed-bench-clip");
    const std::string model = (source_dir() / "tests/reference/golden/clip_tiny/tiny").string();
    auto r = run_tool("retro-bench", "--threads 1 embed --embedder clip --model " + model +
                                         " --image-count 4 --batch 3 --repeats 1 --images-out " + (dir / "imgs").string() +
                                         " --json " + (dir / "clip.json").string());
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("images/s") != std::string::npos);
    const auto j = nlohmann::json::parse(read_text(dir / "clip.json"));
    const auto& k = j["retrokit"];
    CHECK(k["impl"] == "retrokit clip");
    CHECK(k["images"] == 4);
    CHECK(k["batch"] == 3);
    CHECK(k["threads"] == 1);
    CHECK(k["image_size"] == 32);
    CHECK(k["mean_width"].get<double>() >= 321);
    CHECK(k["mean_height"].get<double>() <= 479);
    for (const char* f : {"seconds", "cpu_seconds", "images_per_s", "images_per_cpu_s"}) CHECK(k[f].get<double>() > 0);
    CHECK(k["preprocess_seconds"].get<double>() >= 0);
    CHECK_FALSE(j.contains("ratio"));
    // three of four JPEG, the fourth PNG, kept in --images-out
    for (const char* name : {"img_00000.jpg", "img_00001.jpg", "img_00002.jpg", "img_00003.png"}) {
        CAPTURE(name);
        CHECK(image_decode((dir / "imgs" / name).string()).width % 2 == 1);
    }
    // text options are refused with clip, --images with bert
    auto bad = run_tool("retro-bench", "embed --embedder clip --model " + model + " --texts-out " + (dir / "t.jsonl").string());
    CHECK(bad.exit_code == 2);
    bad = run_tool("retro-bench", "embed --model " + (source_dir() / "tests/reference/golden/bert_tiny").string() +
                                      " --images " + (dir / "imgs").string());
    CHECK(bad.exit_code == 2);
}

TEST_CASE("embed bench: --embedder clip on an image folder beside a peer: the file list, rounds and ratio") {
    TempDir dir("embed-bench-clip-peer");
    const std::string model = (source_dir() / "tests/reference/golden/clip_tiny/tiny").string();
    const auto script = dir / "peer.sh";
    const std::string d = dir.path.string();
    // records its arguments and the file list it was given; reports 10, 20, 30 images/s
    write_text(script, "n=$(cat '" + d + "/count' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '" + d +
                           "/count'\n"
                           "echo \"$@\" >> '" + d + "/args'\n"
                           "while [ $# -gt 0 ]; do [ \"$1\" = --files ] && cp \"$2\" '" + d + "/files'; shift; done\n"
                           "c=$((n * 10))\n"
                           "echo '{\"impl\": \"fake peer\", \"images\": 8, \"mean_width\": 40, \"mean_height\": 40, "
                           "\"image_size\": 32, \"batch\": 4, \"threads\": 1, \"seconds\": 1.0, \"cpu_seconds\": 1.0, "
                           "\"preprocess_seconds\": 0.01, \"images_per_s\": '$c', \"images_per_cpu_s\": '$c'}'\n");
    auto r = run_tool("retro-bench", "--threads 1 embed --embedder clip --model " + model + " --images " +
                                         (source_dir() / "tests/reference/golden/clip_tiny/images").string() +
                                         " --batch 4 --repeats 1 --rounds 3 --python sh --peer " + script.string() +
                                         " --json " + (dir / "clip.json").string());
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(read_text(dir / "count") == "3\n");
    CHECK(read_text(dir / "args").find("--batch 4") != std::string::npos);
    const std::string files = read_text(dir / "files");
    CHECK(std::count(files.begin(), files.end(), '\n') == 8);
    CHECK(files.find("alpha_disc.png") < files.find("tiny.png"));   // sorted, as retro-index --images
    const auto j = nlohmann::json::parse(read_text(dir / "clip.json"));
    CHECK(j["retrokit"]["images"] == 8);
    REQUIRE(j["rounds"].size() == 3);
    std::vector<double> ratios;
    for (const auto& round : j["rounds"]) {
        CHECK(round["ratio"].get<double>() ==
              doctest::Approx(round["retrokit_images_per_s"].get<double>() / round["peer_images_per_s"].get<double>()));
        ratios.push_back(round["ratio"].get<double>());
    }
    std::sort(ratios.begin(), ratios.end());
    CHECK(j["ratio"].get<double>() == doctest::Approx(ratios[1]));
    CHECK(j["peer"]["images_per_s"].get<double>() == doctest::Approx(20.0));
    CHECK(r.out.find("medians of 3 rounds") != std::string::npos);
}

TEST_CASE("embed bench: --embedder clip-text times the text path, texts of CLIP BPE pieces, the peer given 77 tokens") {
    TempDir dir("embed-bench-clip-text");
    const std::string model = (source_dir() / "tests/reference/golden/clip_tiny/tiny").string();
    const std::string peer = fake_peer(dir);
    // --max-length 128 is past the model's 77 text positions: the embedder takes 77, and so is the peer told
    auto r = run_tool("retro-bench", "--threads 1 embed --embedder clip-text --model " + model +
                                         " --chunks 6 --tokens 20 --max-length 128 --batch 4 --repeats 1 --python sh --peer " +
                                         peer + " --json " + (dir / "clip-text.json").string());
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("clip text tower") != std::string::npos);
    const std::string args = read_text(dir / "args");
    CHECK(args.find("--max-length 77") != std::string::npos);
    CHECK(args.find("--batch 4") != std::string::npos);
    const auto j = nlohmann::json::parse(read_text(dir / "clip-text.json"));
    const auto& k = j["retrokit"];
    CHECK(k["impl"] == "retrokit clip (text)");
    CHECK(k["chunks"] == 6);
    CHECK(k["max_length"] == 77);
    // about 20 BPE pieces a text and its two specials (texts end at word boundaries)
    CHECK(k["tokens_per_chunk"].get<double>() > 18);
    CHECK(k["tokens_per_chunk"].get<double>() < 28);
    CHECK(k["chunks_per_s"].get<double>() > 0);
    CHECK(j["ratio"].get<double>() == doctest::Approx(k["chunks_per_s"].get<double>() / 10.0));
    // texts longer than the model takes are cut at 77 ids: tokens_per_chunk says so
    // (without --max-length: the model's 77, no warning)
    auto longer = run_tool("retro-bench", "--threads 1 embed --embedder clip-text --model " + model +
                                              " --chunks 3 --tokens 200 --repeats 1 --json " + (dir / "long.json").string());
    REQUIRE(longer.exit_code == 0);
    CHECK(longer.err.find("text positions") == std::string::npos);   // (no --max-length lowered)
    CHECK(longer.err.find("--tokens 200 with the specials is more than --max-length 77: the texts are cut there") != std::string::npos);
    CHECK(nlohmann::json::parse(read_text(dir / "long.json"))["retrokit"]["tokens_per_chunk"].get<double>() == 77.0);
    // refused in one line: the GPU (before asking for a CUDA build), the peer's length sort, the image count
    auto cuda = run_tool("retro-bench", "embed --embedder clip-text --device cuda --model " + model);
    CHECK(cuda.exit_code == 2);
    CHECK(cuda.err.find("runs on the CPU only") != std::string::npos);
    auto sorted = run_tool("retro-bench", "embed --embedder clip-text --peer-sorted --model " + model);
    CHECK(sorted.exit_code == 2);
    CHECK(sorted.err.find("--peer-sorted") != std::string::npos);
    auto images = run_tool("retro-bench", "embed --embedder clip-text --image-count 5 --model " + model);
    CHECK(images.exit_code == 2);
    CHECK(images.err.find("--image-count") != std::string::npos);
}

TEST_CASE("embed bench: an output over an input, texts that are not UTF-8, and impossible counts are refused in one line") {
    TempDir dir("embed-bench-refusals");
    fs::copy(source_dir() / "tests/reference/golden/bert_tiny", dir / "m", fs::copy_options::recursive);
    const std::string model = (dir / "m").string(), vocab = read_text(dir / "m" / "vocab.txt");
    write_text(dir / "source.txt", "some words to cut into texts for the bench\n");
    const auto refused = [&](const std::string& args, const std::string& named) {
        const auto r = run_tool("retro-bench", "--threads 1 embed --model " + model + " --chunks 2 --tokens 8 --repeats 1 " + args);
        CAPTURE(args);
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(named) != std::string::npos, r.err);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    };
    // --texts-out into the model folder replaced its vocab.txt; over --texts it replaced the source
    refused("--texts-out " + (dir / "m" / "vocab.txt").string(), "--texts-out: is " + (dir / "m" / "vocab.txt").string() + ", inside the --model folder");
    refused("--texts " + (dir / "source.txt").string() + " --texts-out " + (dir / "source.txt").string(), "writing it would replace an input");
    refused("--texts " + (dir / "source.txt").string() + " --json " + (dir / "source.txt").string(), "--json: is ");
    CHECK(read_text(dir / "m" / "vocab.txt") == vocab);
    CHECK(read_text(dir / "source.txt") == "some words to cut into texts for the bench\n");
    // texts that are not UTF-8 name the file (they were an internal error when written for the peer)
    write_text(dir / "latin1.txt", std::string("caf\xe9 au lait ") + "and more words here\n");
    refused("--texts " + (dir / "latin1.txt").string() + " --texts-out " + (dir / "t.jsonl").string(),
            (dir / "latin1.txt").string() + ": is not valid UTF-8");
    CHECK_FALSE(fs::exists(dir / "t.jsonl"));
    refused("--min-tokens 9", "--min-tokens: is 9");
    // a folder where the file goes was "holds no words" (its bytes read as none)
    refused("--texts " + dir.path.string(), dir.path.string() + ": is a folder, not a text file (fix: give one UTF-8 text file)");
    // a folder of another embedder's kind is named as such (a t5 folder was "vocab.txt: missing")
    refused("--texts-out " + (dir / "x.jsonl").string() + " --model " + (source_dir() / "tests/reference/golden/t5_tiny/v1_1").string(),
            "is a \"t5\" checkpoint (its model_type), which --embedder bert does not read (fix: pass --embedder t5)");
    refused("--min-tokens -5", "--min-tokens: is -5");
    refused("--tokens 100000000 --chunks 100000000", "of memory available");
    // clip: more synthetic images than it writes, and options that --images replaces
    const std::string clip = (source_dir() / "tests/reference/golden/clip_tiny/tiny").string(),
                      images = (source_dir() / "tests/reference/golden/clip_tiny/images").string();
    auto r = run_tool("retro-bench", "embed --embedder clip --model " + clip + " --image-count 100000000");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--image-count: is 100000000") != std::string::npos);
    r = run_tool("retro-bench", "embed --embedder clip --model " + clip + " --images " + images + " --image-count 5");
    CHECK(r.exit_code == 2);
    r = run_tool("retro-bench", "embed --embedder clip --model " + clip + " --images " + images + " --images-out " + (dir / "o").string());
    CHECK(r.exit_code == 2);
    CHECK_FALSE(fs::exists(dir / "o"));
}

TEST_CASE("embed bench: a peer result the tables cannot read is skipped naming the field, not blamed on the model") {
    const std::string model = (source_dir() / "tests/reference/golden/bert_tiny").string();
    TempDir dir("embed-bench-bad-peer");
    const std::string good = "\"impl\": \"p\", \"chunks\": 6, \"tokens_per_chunk\": 14.0, \"batch\": 4, \"max_length\": 32, "
                             "\"threads\": 1, \"seconds\": 1.0, \"cpu_seconds\": 1.0, \"tokenize_seconds\": 0.01";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {good + ", \"chunks_per_s\": 0, \"chunks_per_cpu_s\": 5", "\"chunks_per_s\" is 0, not a positive rate"},
        {good + ", \"chunks_per_s\": -3, \"chunks_per_cpu_s\": 5", "\"chunks_per_s\" is -3, not a positive rate"},
        {good + ", \"chunks_per_s\": \"fast\", \"chunks_per_cpu_s\": 5", "\"chunks_per_s\" is \"fast\", not a number"},
        {"\"impl\": \"p\", \"chunks_per_s\": 5, \"chunks_per_cpu_s\": 5", "has no \"batch\""},
        // other work than ours: a peer that embedded 3 of the 6 texts stood beside ours with a ratio
        {"\"impl\": \"p\", \"chunks\": 3, \"tokens_per_chunk\": 14.0, \"batch\": 4, \"max_length\": 32, \"threads\": 1, "
         "\"seconds\": 1.0, \"cpu_seconds\": 1.0, \"tokenize_seconds\": 0.01, \"chunks_per_s\": 5, \"chunks_per_cpu_s\": 5",
         "its result says 3 chunks, not the 6 RetroKit ran"},
    };
    for (const auto& [fields, why] : cases) {
        CAPTURE(fields);
        write_text(dir / "peer.sh", "echo '{" + fields + "}'\n");
        auto r = run_tool("retro-bench", "--threads 1 embed --model " + model + " --chunks 6 --tokens 12 --batch 4 " +
                                             "--max-length 32 --repeats 1 --python sh --peer " + (dir / "peer.sh").string() +
                                             " --json " + (dir / "embed.json").string());
        CAPTURE(r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(r.err.find("peer skipped: its result") != std::string::npos);
        CHECK(r.err.find(why) != std::string::npos);
        CHECK(r.out.find("retrokit bert") != std::string::npos);
        CHECK_FALSE(nlohmann::json::parse(read_text(dir / "embed.json")).contains("ratio"));
    }
}

TEST_CASE("embed bench: a checkpoint of another family given to --embedder clip-text is named with that embedder") {
    // (it said "which --embedder clip does not read", an embedder the command did not name)
    const auto r = run_tool("retro-bench", "embed --embedder clip-text --model " +
                                               (source_dir() / "tests/reference/golden/bert_tiny").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("which --embedder clip-text does not read (fix: pass --embedder bert)") != std::string::npos);
}
