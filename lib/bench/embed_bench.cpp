// Implementation of embed_bench.h. Texts are cut from a source (a file, or synthetic words) so that
// each holds about `tokens` model tokens (the bert model's own tokenizer: WordPiece, XLM-R's sentencepiece or RoBERTa's
// BPE; spiece pieces for t5; CLIP's BPE for clip-text); RetroKit embeds them with BertEmbedder / T5Embedder /
// ClipEmbedder::embed_texts (tokenisation included in the time), the peer
// reads the same texts from --texts-out.
#include "bench/embed_bench.h"

#include <algorithm>
#include <functional>
#include <random>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/bench_util.h"
#include "bench/clip_embed_bench.h"
#include "bench/side_by_side.h"
#include "core/atomic_file.h"
#include "core/cuda_device.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "core/output_folder.h"
#include "core/log.h"
#include "core/shell_quote.h"
#include "core/threads.h"
#include "data/synthetic_text.h"
#include "embed/bert_embedder.h"
#include "embed/clip_embedder.h"
#include "embed/model_folder.h"
#include "embed/t5_embedder.h"
#include "text/utf8.h"

namespace retro::bench {

namespace {

std::vector<std::string> split_words(const std::string& text) {
    std::vector<std::string> words;
    std::istringstream in(text);
    std::string w;
    while (in >> w) words.push_back(w);
    return words;
}

// The embedder under test, seen through what the benchmark needs of it.
struct BenchEmbedder {
    std::unique_ptr<Embedder> owner;
    std::function<int(const std::string&)> count;               // model tokens of a word
    std::function<std::size_t(const std::string&)> tokenize;    // model tokens of a text, specials included, truncated
    std::function<void(const std::vector<std::string>&, float*)> embed_texts;
    int max_length = 0;   // tokens a text at most as the embedder takes them (what the peer is given)
};

BenchEmbedder make_bench_embedder(const EmbedBenchOptions& o) {
    BenchEmbedder b;
    b.max_length = o.max_length;
    if (o.embedder == "clip-text") {   // CLIP's text tower: BPE, the tower to the first end-of-text token, projection
        auto e = std::make_unique<ClipEmbedder>(ClipEmbedderOptions{o.model, o.max_length, o.batch});
        if (!e->model().has_text())
            user_error_in(e->model().weights_path(), "holds no text tower (a vision-only CLIP checkpoint)",
                          "give a CLIPModel checkpoint with text_model");
        const ClipEmbedder* clip = e.get();
        b.max_length = clip->max_length();   // 77 where --max-length asks for more (the embedder warns)
        b.count = [clip](const std::string& w) { return static_cast<int>(clip->tokenizer().encode(w, 1 << 20).size()) - 2; };
        b.tokenize = [clip](const std::string& t) { return clip->tokenizer().encode(t, clip->max_length()).size(); };
        b.embed_texts = [clip](const std::vector<std::string>& t, float* out) { clip->embed_texts(t, out); };
        b.owner = std::move(e);
        return b;
    }
    if (o.embedder == "t5") {
        if (o.device != "cpu") user_error_in("--device " + o.device, "the t5 embedder runs on the CPU only", "drop --device");
        auto e = std::make_unique<T5Embedder>(T5EmbedderOptions{o.model, o.max_length, o.batch}, nullptr);
        const T5Embedder* t5 = e.get();
        b.count = [t5](const std::string& w) { return static_cast<int>(t5->tokenizer().encode(w, 1 << 20).size()) - 1; };
        b.tokenize = [t5, &o](const std::string& t) { return t5->tokenizer().encode(t, o.max_length).size(); };
        b.embed_texts = [t5](const std::vector<std::string>& t, float* out) { t5->embed_texts(t, out); };
        b.owner = std::move(e);
        return b;
    }
    if (o.embedder != "bert") user_error_in("--embedder", "must be bert, t5 or clip, not '" + o.embedder + "'");
    BertEmbedderOptions eo;
    eo.model_dir = o.model;
    eo.batch = o.batch;
    eo.max_length = o.max_length;
    eo.device = o.device;
    eo.prompt = "";   // no prompt, whatever the folder's default: the peer (hf_embed.py) embeds the texts as they are
    auto e = std::make_unique<BertEmbedder>(eo, nullptr);
    const BertEmbedder* bert = e.get();
    b.count = [bert](const std::string& w) { return static_cast<int>(bert->text_tokenizer().tokenize_ids(w).size()); };
    b.tokenize = [bert](const std::string& t) { return bert->encode_text(t).size(); };   // the prompt's ids included
    b.embed_texts = [bert](const std::vector<std::string>& t, float* out) { bert->embed_texts(t, out); };
    b.owner = std::move(e);
    return b;
}

// N texts of about `tokens` model tokens, taken from the word stream in order (wrapping).
std::vector<std::string> make_texts(const EmbedBenchOptions& o, const std::function<int(const std::string&)>& count) {
    std::string source;
    if (!o.texts.empty()) {
        if (std::error_code ec; std::filesystem::is_directory(o.texts, ec))   // (an ifstream opens a folder and reads nothing)
            user_error_in(o.texts, "is a folder, not a text file", "give one UTF-8 text file");
        std::ifstream in(o.texts, std::ios::binary);
        if (!in) user_error_in(o.texts, "cannot read the source text", "give a readable UTF-8 text file");
        std::stringstream ss;
        ss << in.rdbuf();
        source = ss.str();
        std::string valid = source;
        if (const std::int64_t bad = utf8_sanitize(valid); bad > 0)   // (the texts reach the peer as JSON strings)
            user_error_in(o.texts, cat("is not valid UTF-8 (", bad, " bad byte sequences)"),
                          "convert it to UTF-8 (iconv -f LATIN1 -t UTF-8 FILE)");
    } else {
        source = synthetic_text(o.seed, static_cast<std::size_t>(o.chunks) * o.tokens * 8 + 4096);
    }
    std::vector<std::string> words = split_words(source);
    if (words.empty()) user_error_in(o.texts, "holds no words", "give a text file");
    std::vector<int> counts(words.size());
    parallel_for(static_cast<std::int64_t>(words.size()),
                 [&](std::int64_t i) { counts[i] = count(words[i]); });
    std::vector<std::string> texts;
    std::size_t cursor = 0, guard = 0;
    std::mt19937_64 rng(o.seed);
    const int lo = o.min_tokens > 0 ? std::min(o.min_tokens, o.tokens) : o.tokens;
    while (static_cast<std::int64_t>(texts.size()) < o.chunks) {
        std::string t;
        int n = 0;
        const int target = lo + static_cast<int>(rng() % static_cast<std::uint64_t>(o.tokens - lo + 1));
        while (n < target) {
            if (counts[cursor] > 0) {
                if (!t.empty()) t += ' ';
                t += words[cursor];
                n += counts[cursor];
            }
            cursor = (cursor + 1) % words.size();
            if (++guard > words.size() * 4 + static_cast<std::size_t>(o.chunks) * o.tokens * 4)
                user_error_in(o.texts, "gives no model tokens", "give ordinary text");
        }
        texts.push_back(std::move(t));
    }
    return texts;
}

nlohmann::json run_peer(const EmbedBenchOptions& o, const std::string& texts_path, int threads, int max_length) {
    return run_peer_script(o.python, o.peer,
                           "--model " + shell_quote(o.model) + " --texts " + shell_quote(texts_path) + " --threads " +
                               std::to_string(threads) + " --batch " + std::to_string(o.batch) + " --max-length " +
                               std::to_string(max_length) + " --repeats " + std::to_string(o.repeats) + " --device " +
                               o.device + (o.peer_sorted ? " --sort-by-length" : ""));
}

// An output option naming an input of the run (the model folder, --texts, --images) or a path inside one: refused
// before anything is written (--texts-out into the model folder replaced its vocab.txt).
void refuse_outputs_over_inputs(const EmbedBenchOptions& o) {
    bench_refuse_outputs_over_inputs({{"--texts-out", o.texts_out}, {"--json", o.json}, {"--images-out", o.images_out}},
                                     {{"the --model folder", o.model}, {"--texts", o.texts}, {"--images", o.images}});
}

}  // namespace

void run_embed_bench(const EmbedBenchOptions& given, const std::string& command_line) {
    // --model as the folder read (a Hub id or cache folder as its snapshot), after the options' own checks: the
    // peer is given the same folder
    EmbedBenchOptions o = given;
    const auto resolve_model = [&] { o.model = embedder_model_folder(o.embedder == "clip-text" ? "clip" : o.embedder, o.model); };
    if (o.embedder == "clip") {
        if (!o.model.empty()) resolve_model();
        refuse_outputs_over_inputs(o);
        return run_clip_embed_bench(o, command_line);
    }
    if (!o.images.empty() || !o.images_out.empty())
        user_error_in("--images/--images-out", "apply to --embedder clip only", "drop them, or pass --embedder clip");
    if (o.model.empty()) user_error_in("--model", "retro-bench embed needs a BERT, T5 or CLIP model folder", "pass --model DIR");
    if (o.embedder == "clip-text") {   // (before --device cuda asks for a CUDA build: none would help)
        if (o.device != "cpu") user_error_in("--device " + o.device, "the clip embedder runs on the CPU only", "drop --device");
        if (o.peer_sorted)
            user_error_in("--peer-sorted", "does not apply to --embedder clip-text (its peer batches the texts in the given order)",
                          "drop it");
    }
    if (o.chunks < 1 || o.tokens < 1 || o.repeats < 1)
        user_error_in("--chunks/--tokens/--repeats", "must be positive");
    if (o.min_tokens < 0 || o.min_tokens > o.tokens)
        user_error_in("--min-tokens", cat("is ", o.min_tokens, ": the shortest text's tokens, from 0 to --tokens (", o.tokens, ")"),
                      "give a --min-tokens of at most --tokens");
    // the texts: the source (~8 bytes a token), its words (a std::string and a count each), the cut texts and their
    // embeddings — ~64 bytes a token
    memory_require("--chunks", double(o.chunks) * (double(o.tokens) * 64 + 4096),
                   cat("the texts and embeddings of ", o.chunks, " chunks of ", o.tokens, " tokens"),
                   "a smaller --chunks or --tokens");
    if (o.device == "cuda") cuda_require("--device cuda", "retro-bench");
    resolve_model();
    if (o.embedder == "clip-text") embedder_folder_kind_check("clip", o.model, "clip-text");   // (it said "--embedder clip")
    refuse_outputs_over_inputs(o);
    BenchEmbedder bench = make_bench_embedder(o);
    const Embedder& emb = *bench.owner;
    const int threads = thread_count();
    // texts longer than the embedder takes are cut (their specials included): say so, as clip-text's 77 is said
    if (o.tokens + 2 > bench.max_length)
        log_warn(cat("--tokens ", o.tokens, " with the specials is more than --max-length ", bench.max_length,
                     ": the texts are cut there (the timed tokens a text are at most ", bench.max_length, ")"));
    std::vector<std::string> texts = make_texts(o, bench.count);

    std::vector<std::int64_t> lengths(texts.size());
    double tok_ms = median_ms(
        [&] {
            parallel_for(static_cast<std::int64_t>(texts.size()), [&](std::int64_t i) {
                lengths[i] = static_cast<std::int64_t>(bench.tokenize(texts[i]));
            });
        },
        o.repeats);
    double mean_len = 0;
    for (auto l : lengths) mean_len += static_cast<double>(l);
    mean_len /= static_cast<double>(lengths.size());
    std::vector<float> out(texts.size() * emb.dim());
    auto ours_json = [&](double secs, double cpu_secs) {
        return nlohmann::json{{"impl", "retrokit " + emb.name() + (o.embedder == "clip-text" ? " (text)" : "") +
                                           (o.device == "cuda" ? " (cuda)" : "")},
                              {"model", emb.to_json()["model"]},
                              {"chunks", static_cast<std::int64_t>(texts.size())},
                              {"tokens_per_chunk", mean_len},
                              {"batch", o.batch},
                              {"max_length", bench.max_length},
                              {"threads", threads},
                              {"seconds", secs},
                              {"cpu_seconds", cpu_secs},
                              {"tokenize_seconds", tok_ms / 1e3},
                              {"chunks_per_s", static_cast<double>(texts.size()) / secs},
                              {"chunks_per_cpu_s", static_cast<double>(texts.size()) / cpu_secs}};
    };

    std::string texts_path = o.texts_out;
    ScratchPath scratch;
    if (texts_path.empty() && !o.peer.empty()) texts_path = scratch.make("embed", ".jsonl");
    if (!texts_path.empty()) {
        std::string lines;
        for (const auto& t : texts) lines += nlohmann::json(t).dump() + "\n";
        write_file_atomic(texts_path, lines);
    }

    // Rounds: RetroKit and the peer side by side, alternating which goes first.
    const SideBySide sbs = run_side_by_side(
        o.rounds, "chunks",
        [&] {
            const WallCpu t = median_wall_cpu([&] { bench.embed_texts(texts, out.data()); }, o.repeats);
            return ours_json(t.wall, t.cpu);
        },
        o.peer.empty() ? std::function<nlohmann::json()>() : [&] { return run_peer(o, texts_path, threads, bench.max_length); });
    const nlohmann::json& ours = sbs.ours;
    const nlohmann::json& peer = sbs.peer;

    std::vector<std::vector<std::string>> rows = {
        {"impl", "chunks", "tokens/chunk", "batch", "threads", "tokenize s", "total s", "cpu s", "chunks/s",
         "chunks/cpu-s"}};
    for (const auto* r : {&ours, &peer}) {
        if (r->is_null() || r->contains("skipped")) continue;   // (a skipped peer: its reason is in the JSON and the log)
        rows.push_back({(*r)["impl"].get<std::string>(), std::to_string((*r)["chunks"].get<std::int64_t>()),
                        format_fixed((*r)["tokens_per_chunk"].get<double>(), 1), std::to_string((*r)["batch"].get<int>()),
                        std::to_string((*r)["threads"].get<int>()), format_fixed((*r)["tokenize_seconds"].get<double>(), 3),
                        format_fixed((*r)["seconds"].get<double>(), 3), format_fixed((*r)["cpu_seconds"].get<double>(), 3),
                        format_fixed((*r)["chunks_per_s"].get<double>(), 1), format_fixed((*r)["chunks_per_cpu_s"].get<double>(), 1)});
    }
    std::printf("retro-bench embed: %s, model %s (%sdim %d), %s\n", cpu_model().c_str(),
                ours["model"].get<std::string>().c_str(), o.embedder == "clip-text" ? "clip text tower, " : "", emb.dim(),
                (o.texts.empty() ? std::string("synthetic words") : "text of " + o.texts).c_str());
    std::printf("%s", format_table(rows).c_str());
    nlohmann::json result = {{"stamp", stamp("retro-bench embed", command_line)}, {"cpu", cpu_model()}, {"retrokit", ours}};
    side_by_side_report(sbs, "chunks", result);
    if (!o.json.empty()) bench_json_write(o.json, result, "retro-bench embed", command_line);
}

}  // namespace retro::bench
