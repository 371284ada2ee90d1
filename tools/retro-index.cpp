// retro-index: chunk embeddings + FAISS index over a chunk database, or (--kind bm25) a Xapian BM25
// index; `--images DIR --embedder clip` an index over a folder of images; `merge` joins shards;
// `query` prints the chunks (or images) closest to a text or, with --image, to an image.
#include "core/dtype.h"
#include "core/error.h"
#include "index/index_build.h"
#include "index/image_index.h"
#include "index/index_query.h"

#include "tool_main.h"

int main(int argc, char** argv) {
    return retro::tool_main(
        "retro-index", "Embed every chunk of a database and build a FAISS index over the embeddings (or, with --kind bm25, a lexical BM25 index).", argc, argv,
        [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
            static retro::IndexBuildOptions o;
            static std::string dtype = "f32", shard = "0/1";
            static std::vector<std::string> shards;
            static std::string merge_out;
            static bool merge_force = false, merge_resume = false;
            app.add_option("db", o.db, "Chunk database folder (from retro-chunk)");
            static std::string images;
            app.add_option("--images", images, "Index a folder of JPEG / PNG images instead of a database (--embedder clip; docs/embedders.md)");
            app.add_option("--out", o.out, "Output folder (embeddings.npy, index.faiss, manifest.json; bm25: bm25.glass, manifest.json)");
            app.add_option("--kind", o.kind, "dense (an embedder + FAISS) or bm25 (token ids in a Xapian database, BM25 scores; docs/index.md)")
                ->check(CLI::IsMember({"dense", "bm25"}));
            app.add_option("--bm25-k1", o.bm25.k1, "bm25: wdf saturation k1");
            app.add_option("--bm25-b", o.bm25.b, "bm25: length normalisation b (0..1)");
            app.add_option("--bm25-k3", o.bm25.k3, "bm25: query-frequency saturation k3");
            app.add_option("--bm25-min-normlen", o.bm25.min_normlen, "bm25: floor of chunk length / average length");
            app.add_option("--embedder", o.embedder, "bow (no weights), bert, t5 or clip (--model DIR)")->check(CLI::IsMember({"bow", "bert", "t5", "clip"}));
            app.add_option("--dim", o.bow.dim, "bow: embedding dimension");
            app.add_option("--model", o.bert.model_dir, "bert, t5, clip: Hugging Face checkpoint folder, or a Hub id (ORG/NAME) in the local Hugging Face cache (never downloaded) (bert: BERT, DistilBERT, ELECTRA, MPNet, RoBERTa, XLM-RoBERTa, ModernBERT: config.json, model.safetensors (or its shards, or pytorch_model.bin), and vocab.txt or tokenizer.json (XLM-R: sentencepiece.bpe.model or tokenizer.json; RoBERTa: vocab.json + merges.txt or tokenizer.json), with a sentence-transformers folder's pooling (mean, max, CLS) and Dense modules; t5: spiece.model (or tokenizer.json) instead of vocab.txt, or a sentence-transformers folder; clip: a CLIPModel with vocab.json, merges.txt, preprocessor_config.json)");
            static std::string prompt;
            app.add_option("--prompt", prompt, "bert: text put before every chunk's, as sentence-transformers' prompts (e5: \"query: \" or \"passage: \"); default: the model's default prompt (config_sentence_transformers.json), \"\" for none")
                ->type_name("PROMPT");
            app.add_option("--max-length", o.bert.max_length, "bert, t5, clip: model tokens per chunk (WordPiece / sentencepiece / BPE); clip: its text positions (77) unless given, at most those");
            app.add_option("--batch,--batch-size", o.bert.batch, "bert, t5, clip: chunks per forward pass (--images: 32 images unless given)");
            app.add_option("--device", o.bert.device, "bert: where the encoder runs (cpu; cuda: cuBLAS on GPU 0, not for MPNet, ModernBERT or max pooling)")
                ->check(CLI::IsMember({"cpu", "cuda"}));
            app.add_option("--tokenizer", o.tokenizer, "bert, t5, clip: tokenizer to decode chunks with (default: the database's)");
            app.add_option("--index", o.factory, "FAISS factory string (default: chosen from the chunk count, see docs/index.md)")
                ->type_name("FACTORY");
            app.add_option("--nprobe", o.nprobe, "IVF lists searched by default (0 = nlist/4)");
            app.add_option("--ef-search", o.ef_search, "HNSW efSearch saved with the index (0 = FAISS default)");
            app.add_option("--embedding-dtype", dtype, "dtype of embeddings.npy")->check(CLI::IsMember({"f32", "f16"}));
            app.add_option("--block", o.block, "Chunks per resumable block");
            app.add_option("--shard", shard, "Embed only blocks b with b % n == i (i/n, or auto: i and n from srun/mpirun); join with merge")->type_name("I/N");
            app.add_option("--threads", ctx.threads, "Threads (0 = all cores)");
            retro::add_no_verify_flag(app, ctx.verify_inputs);
            app.add_flag("--resume", o.resume, "Continue an interrupted run in --out");
            app.add_flag("--force", o.force, "Replace an existing --out");
            auto* merge = app.add_subcommand("merge", "Join the folders of sharded runs and build the index");
            merge->add_option("shards", shards, "Shard output folders")->required();
            merge->add_option("--out", merge_out, "Output folder")->required();
            merge->add_flag("--force", merge_force, "Replace an existing --out");
            merge->add_flag("--resume", merge_resume, "Run again: keep a finished merge of these shards (--out complete), make an interrupted one again");
            static retro::IndexQueryOptions q;
            auto* query = app.add_subcommand("query", "Print the chunks (or images) of an index closest to a text or an image (dense: its embedder; bm25: BM25 scores)");
            query->add_option("index", q.index, "Index folder (from retro-index)")->required();
            query->add_option("text", q.text, "The query text (- reads it from standard input; or give --image)");
            retro::add_no_verify_flag(*query, q.verify);
            query->add_option("--image", q.image, "A query image (JPEG / PNG): an image index, or a dense index built with --embedder clip");
            query->add_option("--k,--neighbours", q.k, "How many chunks to print");
            query->add_flag("--json", q.json, "One JSON object: query (or query_image), index, kind, results [{rank, chunk, doc, score, text}] (image index: [{rank, row, score, image}])");
            query->add_option("--db", q.db, "The chunk database (default: the one the index records)");
            query->add_option("--tokenizer", q.tokenizer, "Tokenizer (default: the database's)");
            query->add_option("--nprobe", q.nprobe, "IVF lists to search (0 = the index's setting)");
            query->add_option("--ef-search", q.ef_search, "HNSW efSearch (0 = the index's setting)");
            static std::string query_prompt;
            auto* prompt_opt = query->add_option("--prompt", query_prompt,
                                                 "bert: text put before the query (default: the model's \"query\" prompt in config_sentence_transformers.json, "
                                                 "as sentence-transformers' encode_query, e5's \"query: \"; else the prompt the index's chunks were embedded with); \"\" for none")
                                     ->type_name("PROMPT");
            return [&ctx, &app, merge, query, prompt_opt] {
                if (*merge) return retro::index_merge(ctx, shards, merge_out, merge_force, merge_resume);
                if (*query) {
                    if (prompt_opt->count()) q.prompt = query_prompt;
                    return retro::index_query(q);
                }
                if (!images.empty()) {
                    if (!o.db.empty()) retro::user_error_in("--images", "indexes a folder of images; a database argument does not go with it", "drop one of them");
                    if (o.embedder != "clip") retro::user_error_in("--images", "needs --embedder clip", "add --embedder clip --model DIR");
                    for (const char* f : {"--kind", "--dim", "--device", "--tokenizer", "--prompt", "--embedding-dtype", "--block", "--shard", "--resume",
                                          "--bm25-k1", "--bm25-b", "--bm25-k3", "--bm25-min-normlen"})
                        if (app.count(f) > 0) retro::user_error_in(f, "does not apply to --images", "drop it");
                    retro::ImageIndexOptions io{images, o.out, {o.bert.model_dir, o.bert.max_length, o.bert.batch}, o.factory, o.nprobe, o.ef_search, o.force};
                    if (app.count("--max-length") == 0) io.clip.max_length = 0;   // the model's text positions
                    if (app.count("--batch") == 0) io.clip.batch = 32;
                    return retro::image_index_build(ctx, io);
                }
                if (o.embedder == "clip" && app.count("--max-length") == 0) o.bert.max_length = 0;   // the model's text positions
                if (app.count("--prompt") > 0) {
                    if (o.embedder != "bert") retro::user_error_in("--prompt", "applies to --embedder bert only", "drop it");
                    o.bert.prompt = prompt;
                }
                if (o.db.empty() || o.out.empty()) retro::refuse_usage(app, "retro-index DB --out DIR");
                for (const char* f : {"--embedder", "--dim", "--model", "--max-length", "--batch", "--device", "--tokenizer", "--prompt", "--index",
                                      "--nprobe", "--ef-search", "--embedding-dtype", "--block", "--shard"})
                    if (o.kind == "bm25" && app.count(f) > 0) retro::user_error_in(f, "does not apply to --kind bm25", "drop it");
                for (const char* f : {"--bm25-k1", "--bm25-b", "--bm25-k3", "--bm25-min-normlen"})
                    if (o.kind != "bm25" && app.count(f) > 0) retro::user_error_in(f, "applies to --kind bm25 only", "add --kind bm25, or drop it");
                // the options one embedder has and the others would silently ignore
                for (const char* f : {"--model", "--max-length", "--batch", "--tokenizer"})   // (--device: its own message)
                    if (o.kind != "bm25" && o.embedder == "bow" && app.count(f) > 0)
                        retro::user_error_in(f, "does not apply to --embedder bow", "drop it, or pass --embedder bert, t5 or clip");
                if (o.kind != "bm25" && o.embedder != "bow" && app.count("--dim") > 0)
                    retro::user_error_in("--dim", "applies to --embedder bow only (a model's dimension is its own)", "drop it");
                retro::dtype_from_name(dtype, o.embedding_dtype);
                o.shard = retro::shard_parse(shard);
                retro::index_build(ctx, o);
            };
        });
}
