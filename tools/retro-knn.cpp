// retro-knn: k nearest neighbours of every chunk in an index, same document excluded; `merge`
// joins shards.
#include "core/error.h"
#include "core/log.h"
#include "index/index_folder.h"
#include "index/knn_build.h"
#include "index/knn_show.h"

#include "tool_main.h"

int main(int argc, char** argv) {
    return retro::tool_main(
        "retro-knn", "Find the k nearest neighbours of every chunk, never from the chunk's own document.", argc, argv,
        [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
            static retro::KnnOptions o;
            static std::string shard = "0/1";
            static std::vector<std::string> shards;
            static std::string merge_out;
            static bool merge_force = false, merge_resume = false;
            app.add_option("index", o.index, "Index folder (from retro-index; a --kind bm25 folder is searched by BM25 scores, docs/index.md)");
            app.add_option("--db", o.db, "The chunk database the index was built from (default: the one the index records)");
            app.add_option("--queries", o.queries, "Another chunk database whose chunks to query (default: --db itself)");
            app.add_option("--out", o.out, "Output folder (neighbours.npy, distances.npy, manifest.json)");
            app.add_option("--neighbours,--k", o.k, "Neighbours per chunk (k)");
            app.add_option("--extra", o.extra, "Extra candidates searched to make up for dropped ones (only where FAISS searches: RetroKit's own searchers drop the query's document inside the search)");
            app.add_flag("--exact", o.exact, "Exact search by brute force (sgemm + top-k) instead of the index");
            app.add_option("--device", o.device, "Where --exact runs: cpu, or cuda (cuBLAS sgemm + a top-k kernel; a bert index also embeds --queries there)")
                ->check(CLI::IsMember({"cpu", "cuda"}));
            app.add_option("--nprobe", o.nprobe, "IVF lists to search (0 = the index's setting)");
            app.add_option("--ef-search", o.ef_search, "HNSW efSearch (0 = the index's setting)");
            app.add_flag("--faiss-search", o.faiss_search,
                         "Search with FAISS's own code instead of RetroKit's kernels (slow on Debian's scalar build; for comparison)");
            app.add_option("--measure-recall", o.measure_recall, "Report recall@k against exact search on this many queries (not for bm25: its search is exact)");
            app.add_option("--block", o.block, "Queries per resumable block");
            app.add_option("--shard", shard, "Search only blocks b with b % n == i (i/n, or auto: i and n from srun/mpirun); join with merge")->type_name("I/N");
            app.add_option("--threads", ctx.threads, "Threads (0 = all cores)");
            retro::add_no_verify_flag(app, ctx.verify_inputs);
            app.add_flag("--resume", o.resume, "Continue an interrupted run in --out");
            app.add_flag("--force", o.force, "Replace an existing --out");
            auto* merge = app.add_subcommand("merge", "Join the folders of sharded runs");
            merge->add_option("shards", shards, "Shard output folders")->required();
            merge->add_option("--out", merge_out, "Output folder")->required();
            merge->add_flag("--force", merge_force, "Replace an existing --out");
            merge->add_flag("--resume", merge_resume, "Run again: keep a finished merge of these shards (--out complete), make an interrupted one again");
            static retro::KnnShowOptions show_opts;
            auto* show = app.add_subcommand("show", "Print chunks' text beside their neighbours' text");
            show->add_option("knn", show_opts.knn, "Neighbours folder (from retro-knn)")->required();
            show->add_option("--db", show_opts.db, "The chunk database (default: the one the neighbours folder records)");
            show->add_option("--chunk", show_opts.chunk, "First chunk to show");
            show->add_option("--count", show_opts.count, "How many chunks");
            show->add_option("--tokenizer", show_opts.tokenizer, "Tokenizer (default: the database's)");
            show->add_flag("--json", show_opts.json, "One JSON object per chunk");
            show->add_option("--queries", show_opts.queries, "The --queries database of a retro-knn --queries run: its chunks are shown beside their neighbours in --db");
            retro::add_no_verify_flag(*show, show_opts.verify);
            return [&ctx, &app, merge, show] {
                if (*merge) return retro::knn_merge(ctx, shards, merge_out, merge_force, merge_resume);
                if (*show) return retro::knn_show(show_opts);
                if (o.index.empty())
                    retro::refuse_usage(app, "retro-knn INDEX [--db DB] --out DIR");
                if (o.out.empty()) retro::user_error_in("--out", "is required: the folder the neighbours go to", "add --out DIR");
                if (o.db.empty()) {   // the database the index was built from, as retro-index query takes it
                    o.db = retro::index_folder_recorded_db(o.index);
                    retro::log_debug("--db " + o.db + " (the database " + o.index + " records)");   // (--verbose)
                }
                o.shard = retro::shard_parse(shard);
                retro::knn_build(ctx, o);
            };
        });
}
