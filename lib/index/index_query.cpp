// Implementation of index_query.h.
#include "index/index_query.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/std_streams.h"
#include "text/stdin_text.h"
#include "core/terminal_text.h"
#include "data/chunk_db.h"
#include "embed/clip_embedder.h"
#include "embed/embedder.h"
#include "embed/st_modules.h"
#include "index/bm25_params.h"
#include "index/bm25_search.h"
#include "index/image_index.h"
#include "index/index_folder.h"
#include "text/tokenizer.h"
#include "text/tokenizer_folder.h"
#include "text/utf8.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

std::string db_dir(const IndexQueryOptions& o) { return o.db.empty() ? index_folder_recorded_db(o.index) : o.db; }

// The query vector of a CLIP embedder: its text tower on the text, or its vision tower on the image.
std::vector<float> clip_query(const ClipEmbedder& e, const IndexQueryOptions& o) {
    std::vector<float> q(static_cast<std::size_t>(e.dim()));
    if (!o.image.empty()) e.embed_images({o.image}, q.data());
    else e.embed_texts({o.text}, q.data());
    return q;
}

std::vector<IndexQueryHit> image_index_search(const IndexQueryOptions& o) {
    if (!o.db.empty() || !o.tokenizer.empty())
        user_error_in(o.db.empty() ? "--tokenizer" : "--db", "does not apply to an image index (it has no chunk database)", "drop it");
    ImageIndexFolder f = image_index_open(o.index, o.nprobe, o.ef_search, o.verify);
    auto emb = make_clip_embedder_from_json(f.manifest.at("embedder"), nullptr);
    const std::vector<float> q = clip_query(*emb, o);
    const int k = static_cast<int>(std::min<std::int64_t>(o.k, f.index->size()));
    std::vector<std::int64_t> found(static_cast<std::size_t>(k), -1);
    std::vector<float> scores(static_cast<std::size_t>(k));
    f.index->search(1, q.data(), k, found.data(), scores.data());
    std::vector<IndexQueryHit> hits;
    for (int r = 0; r < k; ++r) {
        if (found[static_cast<std::size_t>(r)] < 0) continue;
        IndexQueryHit h;
        h.chunk = found[static_cast<std::size_t>(r)];
        h.score = scores[static_cast<std::size_t>(r)];
        h.image = f.path(h.chunk);
        hits.push_back(std::move(h));
    }
    return hits;
}

}  // namespace

std::string index_query_prompt(const nlohmann::json& embedder, const IndexQueryOptions& o) {
    if (o.prompt) return *o.prompt;
    const std::string model = embedder.value("model", std::string());
    if (!model.empty()) {
        if (const auto query = st_named_prompt(model, "query")) return *query;
    }
    return embedder.contains("prompt") && embedder["prompt"].is_string() ? embedder["prompt"].get<std::string>() : std::string();
}

std::vector<IndexQueryHit> index_query_search(const IndexQueryOptions& o) {
    if (o.k < 1) user_error_in("--k", cat("is ", o.k, ", needs at least 1"));
    if (!o.image.empty() && !o.text.empty()) user_error_in("query", "give a query text or --image FILE, not both");
    if (o.image.empty() && o.text.empty())   // nothing given at all: the usage, not an "empty" text
        user_error_in("query", "no query given", "retro-index query INDEX \"some words\" (or --image FILE)");
    if (o.image.empty() && o.text.find_first_not_of(" \t\r\n") == std::string::npos) user_error_in("query", "the query text is empty", "give some words");
    if (std::string valid = o.text; o.image.empty() && utf8_sanitize(valid) != 0)   // (as --prompt: the JSON output needs UTF-8)
        user_error_in("query", "the query text is not valid UTF-8", "give the text in UTF-8");
    if (std::error_code ec; !fs::exists(o.index, ec) && o.image.empty() && fs::exists(fs::path(o.text) / "manifest.json", ec))
        user_error_in(o.index, "no such folder, and the query text " + o.text + " is a folder of a tool's",
                      "the index comes first: retro-index query INDEX \"some words\"");
    if (index_folder_kind(o.index) == "image") {
        if (o.prompt) user_error_in("--prompt", "puts a text before a bert index's queries; this is an image index", "drop --prompt");
        return image_index_search(o);
    }
    if (o.prompt && index_folder_kind(o.index) == "bm25")
        user_error_in("--prompt", "puts a text before a bert index's queries; this is a bm25 index", "drop --prompt");
    ChunkDb db(db_dir(o));
    Tokenizer tok(db.tokenizer_checked(o.tokenizer), db.tokenizer_fingerprint());
    std::vector<int> ids = o.image.empty() ? tok.encode(o.text) : std::vector<int>{};
    if (o.image.empty() && ids.empty()) user_error_in("query", "the query text gives no tokens", "give some words");
    const std::vector<std::int32_t> chunk(ids.begin(), ids.end());
    const int k = static_cast<int>(std::min<std::int64_t>(o.k, db.chunk_count()));

    IndexFolderOptions fo;
    fo.load_index = index_folder_kind(o.index) != "bm25";
    fo.nprobe = o.nprobe;
    fo.ef_search = o.ef_search;
    fo.verify = o.verify;
    IndexFolder folder = index_folder_open(o.index, db, fo);
    std::vector<std::int64_t> found(static_cast<std::size_t>(k), -1);
    std::vector<float> scores(static_cast<std::size_t>(k));
    if (folder.kind == "bm25") {
        if (!o.image.empty()) user_error_in("--image", "a bm25 index cannot be searched with an image", "give a query text");
        if (o.nprobe || o.ef_search) user_error_in(o.nprobe ? "--nprobe" : "--ef-search", "applies to FAISS indices, not to a bm25 index", "drop it");
        const Bm25Params params = bm25_params_from_json(folder.manifest.value("bm25", nlohmann::json()), folder.file("manifest.json"));
        Bm25Searcher searcher(folder.file(kBm25DbFile), params, db.chunk_count());
        searcher.search(chunk.data(), static_cast<int>(chunk.size()), k, nullptr, -1, found.data(), scores.data());
    } else {
        nlohmann::json record = folder.embedder();
        if (record.value("name", std::string()) == "bert") record["prompt"] = index_query_prompt(record, o);
        else if (o.prompt) user_error_in("--prompt", "puts a text before a bert index's queries; this index's embedder is " + record.value("name", std::string("unknown")), "drop --prompt");
        auto embedder = embedder_from_json(record, o.index, &tok);
        if (embedder->dim() != folder.dim)
            user_error_in(folder.file("manifest.json"), cat("records dimension ", folder.dim, ", its embedder gives ", embedder->dim()),
                          "rebuild the index with retro-index");
        // the manifest's settings must give the vectors the index holds (an edited bow seed answered with other hits,
        // exit 0, where retro-knn --queries and retro-generate refuse it); a bert query prompt other than the
        // passages' embeds otherwise by design: not compared
        if (record == folder.embedder()) index_folder_check_embedder(folder, db, *embedder);
        std::vector<float> q(static_cast<std::size_t>(embedder->dim()));
        if (!o.image.empty()) {
            const auto* clip = dynamic_cast<const ClipEmbedder*>(embedder.get());
            if (!clip) user_error_in("--image", "the index was built with the " + embedder->name() + " embedder, which does not embed images",
                                     "query an image index, or one built with --embedder clip");
            q = clip_query(*clip, o);
        } else {
            embedder->embed(chunk.data(), 1, static_cast<int>(chunk.size()), q.data());
        }
        double norm = 0;
        for (float x : q) norm += double(x) * x;
        if (norm == 0) user_error_in("query", "the " + embedder->name() + " embedder gives the query text no vector (no token it knows)", "give other words");
        folder.index->search(1, q.data(), k, found.data(), scores.data());
    }
    std::vector<IndexQueryHit> hits;
    std::vector<std::int32_t> row;
    for (int r = 0; r < k; ++r) {
        if (found[static_cast<std::size_t>(r)] < 0) continue;
        IndexQueryHit h;
        h.chunk = found[static_cast<std::size_t>(r)];
        h.doc = db.doc_of_checked(h.chunk);
        h.score = scores[static_cast<std::size_t>(r)];
        row.clear();
        db.rows(h.chunk, h.chunk + 1, row);
        chunk_text(tok, row.data(), db.chunk_size(), h.text);
        hits.push_back(std::move(h));
    }
    // fewer hits than asked is said (a JSON consumer got a short list and no word of why)
    if (static_cast<std::int64_t>(hits.size()) < o.k) {
        const nlohmann::json index = folder.manifest.value("index", nlohmann::json::object());
        const std::int64_t nlist = index.is_object() ? index.value("nlist", std::int64_t{0}) : 0;
        std::string why;
        if (o.k > db.chunk_count()) why = cat("the database holds ", db.chunk_count(), " chunks");
        else if (folder.kind == "bm25") why = "no more chunks share a term with the query";
        else if (nlist > 0)
            why = cat("the inverted lists searched held no more (", o.nprobe > 0 ? o.nprobe : index.value("nprobe", 0),
                      " of ", nlist, "): a larger --nprobe searches more");
        else why = "the index's search found no more (a larger --ef-search searches further in an HNSW graph)";
        log_warn(cat("found ", hits.size(), " of the ", o.k, " results asked: ", why));
    }
    return hits;
}

void index_query(const IndexQueryOptions& given) {
    std_output_required("the hits");
    IndexQueryOptions o = given;
    if (o.image.empty() && o.text == "-")   // `-`: the query from standard input, as retro-generate's prompt (it searched "-")
        o.text = stdin_text_read("query", "give the query as an argument");
    const auto hits = index_query_search(o);
    const std::string kind = index_folder_kind(o.index);
    std::string prompt;   // the bert query's prompt, shown with the results
    if (kind != "image" && kind != "bm25") {
        const nlohmann::json m = manifest_read(o.index);
        if (m.contains("embedder") && m["embedder"].value("name", std::string()) == "bert") prompt = index_query_prompt(m["embedder"], o);
    }
    if (o.json) {
        nlohmann::json j = {{"index", o.index}, {"kind", kind}, {"results", nlohmann::json::array()}};
        if (o.image.empty()) j["query"] = o.text;
        else j["query_image"] = o.image;
        if (!prompt.empty()) j["prompt"] = prompt;
        for (std::size_t r = 0; r < hits.size(); ++r) {
            if (kind == "image")
                j["results"].push_back({{"rank", r + 1}, {"row", hits[r].chunk}, {"score", hits[r].score}, {"image", hits[r].image}});
            else
                j["results"].push_back({{"rank", r + 1}, {"chunk", hits[r].chunk}, {"doc", hits[r].doc},
                                        {"score", hits[r].score}, {"text", hits[r].text}});
        }
        std::printf("%s\n", json_line(j).c_str());
        return;
    }
    if (!prompt.empty()) std::printf("prompt: %s\n", terminal_text(prompt, true).c_str());
    if (o.image.empty()) std::printf("query: %s\n", terminal_text(o.text, true).c_str());
    else std::printf("query image: %s\n", terminal_text(o.image, true).c_str());
    if (kind == "image") {
        for (std::size_t r = 0; r < hits.size(); ++r)
            std::printf("%zu. %s (score %.4f)\n", r + 1, terminal_text(hits[r].image, true).c_str(), static_cast<double>(hits[r].score));
        return;
    }
    for (std::size_t r = 0; r < hits.size(); ++r)
        std::printf("%zu. chunk %lld (document %lld, score %.4f):\n    %s\n", r + 1, static_cast<long long>(hits[r].chunk),
                    static_cast<long long>(hits[r].doc), static_cast<double>(hits[r].score), terminal_text(hits[r].text).c_str());
    if (hits.empty()) std::printf("(no chunk shares a term with the query)\n");
}

}  // namespace retro
