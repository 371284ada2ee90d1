// Implementation of chunk_merge.h.
#include "data/chunk_merge.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/interrupt_note.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/output_folder.h"
#include "data/chunk_db.h"
#include "data/chunk_db_writer.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

struct Shard {
    std::unique_ptr<ChunkDb> db;
    std::unique_ptr<ChunkSourcesReader> sources;
    DocSource next;          // lookahead
    bool has_next = false;
    std::int64_t doc = 0;    // index of `next` in this shard
    int index = 0;
};

// Parameters that must agree between shards (everything but the shard index). The inputs by their contents and
// order (role, size, fingerprint), not their paths: a shard run on a node that reaches the corpus by another path (a
// linked folder, another mount) is the same job (it was refused as "other inputs": a helper's pass, session 54).
nlohmann::json shared_params(const nlohmann::json& m) {
    nlohmann::json p = m.at("parameters");
    p.erase("shard_index");
    p.erase("on_error");
    nlohmann::json inputs = m.at("inputs");
    if (inputs.is_array())
        for (auto& in : inputs)
            if (in.is_object()) in.erase("path"), in.erase("mtime_ns");
    return {{"parameters", p}, {"inputs", inputs}, {"corpus", m.value("corpus", nlohmann::json())}};
}

// What a finished database in --out differs in from the merge of `shards` (sorted by shard index), for --resume: the
// shards its manifest records, by their fingerprints in shard order ("" for the same merge). A database made by one
// unsharded run of the same job (the same inputs by contents, tokenizer and parameters) is the merge byte for byte
// (docs/chunk.md): complete too, as retro-index and retro-knn merges take an unsharded run's output (it was refused as
// "made by one run": two reviews, session 55).
std::string merged_difference(const nlohmann::json& done, const std::vector<Shard>& shards) {
    std::vector<std::string> was;
    if (const auto it = done.find("inputs"); it != done.end() && it->is_array())
        for (const auto& in : *it)
            if (in.is_object() && in.value("role", std::string()) == "shard") was.push_back(in.value("fingerprint", std::string()));
    if (was.empty()) {
        const auto job = [](const nlohmann::json& m) {   // (the shard count aside: one run, or n shards of it)
            nlohmann::json j = shared_params(m);
            j["parameters"].erase("shard_count");
            return j;
        };
        if (!done.contains("parameters") || !done.contains("inputs")) return "it records no parameters or inputs";
        const std::string d = json_first_difference(job(done), job(shards[0].db->manifest()), "", "the folder's");
        return d.empty() ? std::string() : "its database, made by one retro-chunk run, is of another job: " + d;
    }
    if (was.size() != shards.size()) return cat("it merged ", was.size(), " shards, not these ", shards.size());
    for (std::size_t i = 0; i < shards.size(); ++i)
        if (was[i] != folder_fingerprint(shards[i].db->manifest()))
            return cat("shard ", i, " (", shards[i].db->dir(), ") is not the one it merged (made again since, or of another run)");
    return "";
}

void prepare_out(const ToolContext& ctx, const MergeOptions& o) {
    std::error_code ec;
    for (const auto& s : o.shards)
        if (fs::equivalent(s, o.out, ec))
            user_error_in(o.out, "is also one of the shards being merged", "choose another --out");
    output_folder_guard(o.out, ctx.tool, {}, false);   // --force removes only the database's own files
    if (fs::is_directory(o.out, ec) && !fs::is_empty(o.out, ec)) {
        if (!o.force)
            user_error_in(o.out, "already exists and is not empty",
                          "pass --force to replace it, --resume where it is this merge's (a finished one is kept), or "
                          "choose another --out");
        fs::remove(fs::path(o.out) / "manifest.json");   // first: a stopped --force leaves no finished-looking folder
        for (const auto& n : ChunkDbWriter::output_names()) {
            fs::remove(fs::path(o.out) / n);
            fs::remove(fs::path(o.out) / (n + ".tmp"));
        }
    }
    fs::create_directories(o.out, ec);
    if (ec) user_error_in(o.out, "cannot create folder: " + ec.message());
}

}  // namespace

void chunk_merge(const ToolContext& ctx, const MergeOptions& o) {
    merge_resume_force_refuse(o.resume, o.force);
    std::vector<Shard> shards(o.shards.size());
    // every folder opened before any is compared: a missing one is named as such, not as a count that differs
    for (std::size_t i = 0; i < o.shards.size(); ++i) shards[i].db = std::make_unique<ChunkDb>(o.shards[i], /*shard_ok=*/true);
    {   // the same folder twice is named (it said "shard 2 is missing or given twice" of another folder)
        std::map<std::string, std::string> seen;
        for (const auto& d : o.shards) {
            std::error_code ec;
            const std::string key = fs::weakly_canonical(d, ec).string();
            if (const auto it = seen.find(key); it != seen.end())
                user_error_in(d, "is given twice (as " + it->second + " too)", "pass every shard of the run once");
            seen.emplace(key, d);
        }
    }
    {   // shards of runs of two shard counts: named as such (the count check below named a shard "missing")
        const int count = shards[0].db->manifest().at("parameters").value("shard_count", 0);
        for (std::size_t j = 1; j < shards.size(); ++j)
            if (const auto& q = shards[j].db->manifest().at("parameters"); q.value("shard_count", 0) != count) {
                if (q.value("shard_count", 0) <= 1)   // (it said "is shard 0 of 1")
                    user_error_in(o.shards[j], "is a whole database, not a shard of a --shard run", "merge only the shards of one run");
                user_error_in(o.shards[j], cat("is shard ", q.value("shard_index", -1), " of ", q.value("shard_count", 0), ", ",
                                               o.shards[0], " of ", count, ": shards of two runs"),
                              "pass every shard of one run once");
            }
    }
    for (std::size_t i = 0; i < o.shards.size(); ++i) {
        const auto& p = shards[i].db->manifest().at("parameters");
        shards[i].index = p.value("shard_index", -1);
        const int count = p.value("shard_count", 0);
        if (count > static_cast<int>(o.shards.size())) {   // the first shard missing named, as retro-index and retro-knn do
            std::vector<bool> given(static_cast<std::size_t>(count), false);
            for (const auto& s : shards) {
                const int at = s.db->manifest().at("parameters").value("shard_index", -1);
                if (at >= 0 && at < count) given[static_cast<std::size_t>(at)] = true;
            }
            const auto missing = std::find(given.begin(), given.end(), false) - given.begin();
            user_error_in(cat("shard ", missing, "/", count),
                          cat("is missing: the folders given hold ", o.shards.size(), " of the ", count, " shards"),
                          cat("run retro-chunk with --shard ", missing, "/", count, " and pass every shard of the run once"));
        }
        if (count != static_cast<int>(o.shards.size()))
            user_error_in(o.shards[i], cat("is shard ", shards[i].index, " of ", count, ", but ", o.shards.size(),
                                           " folders were given"),
                          "pass every shard of the run once");
    }
    std::sort(shards.begin(), shards.end(), [](const Shard& a, const Shard& b) { return a.index < b.index; });
    for (std::size_t i = 0; i < shards.size(); ++i) {
        if (shards[i].index != static_cast<int>(i))
            user_error_in(shards[i].db->dir(), "shard " + std::to_string(i) + " is missing or given twice",
                          "pass every shard of the run once");
        if (const std::string d = json_first_difference(shared_params(shards[0].db->manifest()),
                                                        shared_params(shards[i].db->manifest()), "", "the first shard's");
            !d.empty())
            user_error_in(shards[i].db->dir(), "was made from other inputs, tokenizer or parameters than " +
                                                   shards[0].db->dir() + ": " + d,
                          "merge only the shards of one run");
    }
    const nlohmann::json& first = shards[0].db->manifest();
    const int chunk_size = shards[0].db->chunk_size();
    const int rows_per_seq = first.at("parameters").at("rows_per_seq").get<int>();
    MergeOptions out_opts = o;
    if (o.resume) {   // (after the shards' checks: a finished merge is held to shards that merge)
        std::vector<OutputInput> inputs;
        for (const auto& d : o.shards) inputs.push_back({"shard", d});
        const MergeResume r = merge_resume_check(
            ctx.tool, o.out, o.force, inputs, [&](const nlohmann::json& done) { return merged_difference(done, shards); },
            ChunkDbWriter::output_names());
        if (r == MergeResume::kDone) return;   // (compared by the manifests alone: no shard re-hashed for it)
        out_opts.force = r == MergeResume::kRemake;   // the interrupted merge's files removed, as --force does
    }
    for (auto& s : shards) {   // the merge copies every row
        if (ctx.verify_inputs) s.db->verify(ChunkDb::Verify::kAll);
        s.db->check_arrays();
    }
    NewOutputFolder made(o.out);   // a merge that fails below (a shard's sources.jsonl cut short) leaves no folder
    prepare_out(ctx, out_opts);
    interrupt_note_install_line(merge_interrupt_note(ctx.tool, o.out));   // (Ctrl-C said nothing)

    ChunkDbWriter writer(o.out, shards[0].db->token_dtype(), chunk_size, rows_per_seq, nullptr);
    for (auto& s : shards) {
        s.sources = std::make_unique<ChunkSourcesReader>(s.db->sources_path());
        s.has_next = s.sources->next(s.next);
    }
    const std::int64_t n = static_cast<std::int64_t>(shards.size());
    std::vector<std::int32_t> rows;
    for (std::int64_t b = 0;; ++b) {
        Shard& s = shards[static_cast<std::size_t>(b % n)];
        if (!s.has_next || s.next.block != b) {
            bool all_done = std::none_of(shards.begin(), shards.end(), [](const Shard& x) { return x.has_next; });
            if (all_done) break;
            user_error_in(s.db->sources_path(), "has no document of input block " + std::to_string(b) +
                                                    " although later blocks exist", "re-run this shard");
        }
        while (s.has_next && s.next.block == b) {
            if (s.doc >= s.db->doc_count())
                user_error_in(s.db->sources_path(), "lists more documents than doc_offsets.npy holds");
            std::int64_t a = s.db->doc_first(s.doc), e = s.db->doc_end(s.doc);
            rows.clear();
            s.db->rows(a, e, rows);
            std::int64_t tokens = std::count_if(rows.begin(), rows.end(), [](std::int32_t t) { return t != 0; });
            writer.append_document(rows.data(), e - a, tokens, s.next);
            ++s.doc;
            s.has_next = s.sources->next(s.next);
        }
        writer.flush();
    }
    for (const auto& s : shards)
        if (s.doc != s.db->doc_count())
            user_error_in(s.db->sources_path(), "lists fewer documents than doc_offsets.npy holds");
    writer.commit();

    Manifest m(ctx);
    m.parameters() = first.at("parameters");
    m.parameters()["shard_index"] = 0;
    m.parameters()["shard_count"] = 1;
    m.extra()["inputs"] = first.at("inputs");
    for (const auto& s : shards) m.add_input_folder("shard", s.db->dir());
    m.extra()["corpus"] = first.value("corpus", nlohmann::json());
    const ChunkDbCounts& k = writer.counts();
    m.extra()["stats"] = chunk_stats_json(k, chunk_size);
    for (const auto& name : ChunkDbWriter::output_names()) m.add_output(o.out, name);
    m.write(o.out);
    made.keep();
    log_info("merged " + std::to_string(n) + " shards into " + o.out + ": " + std::to_string(k.docs) + " documents, " +
             std::to_string(k.chunks) + " chunks");
}

}  // namespace retro
