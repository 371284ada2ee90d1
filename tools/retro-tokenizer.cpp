// retro-tokenizer: train / encode / decode a sentencepiece model (pad=0 unk=1 bos=2 eos=3).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.h"
#include "core/std_streams.h"
#include "text/tokenizer_folder.h"
#include "text/tokenizer_stream.h"

#include "tool_main.h"

int main(int argc, char** argv) {
    return retro::tool_main(
        "retro-tokenizer", "Train, encode and decode the sentencepiece tokenizer shared by the LM and the database.",
        argc, argv, [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
            app.require_subcommand(1);
            static std::vector<std::string> inputs;
            static std::string out_dir = "tok", model;
            static retro::CorpusOptions corpus;
            static retro::TokenizerTrainOptions train_opts;
            static retro::EncodeOptions enc;
            static bool force = false;
            static bool resume = false;
            static std::string on_error = "fail";

            // before the subcommand too, as in the other tools (`retro-tokenizer --threads 1 encode ...`)
            app.add_option("--threads", ctx.threads, "Threads for train and encode (0 = all cores)");
            auto* train = app.add_subcommand("train", "Train a tokenizer on a corpus; writes OUT/tok.model and OUT/manifest.json");
            train->add_option("corpus", inputs, "Folders (files matching --glob), text files, .jsonl/.jsonl.gz/.jsonl.zst files (a document a line) or .parquet files (a document a row)")->required();
            train->add_option("--out", out_dir, "Output folder");
            train->add_option("--vocab-size", train_opts.vocab_size, "Vocabulary size (an upper bound on small corpora)");
            train->add_option("--model-type", train_opts.model_type, "unigram or bpe")->check(CLI::IsMember({"unigram", "bpe"}));
            train->add_option("--max-sentences", train_opts.max_sentences, "Train on a uniform sample of at most this many lines");
            train->add_option("--character-coverage", train_opts.character_coverage, "Share of characters the vocabulary covers");
            train->add_option("--glob", corpus.glob, "Which files of a folder to read")->type_name("PATTERN");
            train->add_option("--text-key", corpus.text_key, "JSON key holding the text in .jsonl inputs, and the text's column in .parquet inputs")->type_name("KEY");
            train->add_option("--on-error", on_error, "A malformed .jsonl line, a binary (NUL-holding) file or an unreadable .parquet file: fail or skip")->check(CLI::IsMember({"fail", "skip"}));
            train->add_option("--seed", train_opts.seed, "Seed of the sampling and the trainer")->transform(retro::non_negative_integer());
            train->add_option("--threads", ctx.threads, "Threads (0 = all cores)");
            train->add_flag("--force", force, "Replace an existing tokenizer in --out");
            train->add_flag("--resume", resume, "Keep a finished tokenizer in --out made by this same command (a "
                                                "pipeline run again); refused where its corpus or options differ");

            static std::vector<std::string> files;
            auto* encode = app.add_subcommand("encode", "Encode FILEs or stdin (one document per line) to ids on stdout");
            // (--tokenizer too, as retro-chunk, retro-index and retro-train name it, for encode and decode: `encode
            // --tokenizer tok` said "--model is required")
            encode->add_option("--model,--tokenizer", model, "tok.model, or the folder holding it")->required();
            encode->add_option("files", files, "Text files, in order (default, or -: standard input)");
            encode->add_flag("--pieces", enc.pieces, "Print pieces instead of ids");
            encode->add_flag("--bos-eos", enc.bos_eos, "Wrap each line in bos ... eos");
            encode->add_option("--threads", ctx.threads, "Threads (0 = all cores)");

            auto* decode = app.add_subcommand("decode", "Decode lines of ids in FILEs or on stdin to text on stdout");
            decode->add_option("--model,--tokenizer", model, "tok.model, or the folder holding it")->required();
            decode->add_option("files", files, "Files of ids, in order (default, or -: standard input)");

            return [&ctx, train, encode, decode] {
                if (*train) {
                    corpus.on_error = on_error == "skip" ? retro::OnError::SKIP : retro::OnError::FAIL;
                    train_opts.threads = ctx.threads;
                    retro::tokenizer_train_to_folder(ctx, inputs, corpus, train_opts, out_dir, force, resume);
                    return;
                }
                if (files.empty()) files.push_back("-");
                const bool from_stdin = std::find(files.begin(), files.end(), "-") != files.end();
                if (from_stdin && retro::std_stream_was_closed(0))   // (`<&-`: it printed nothing, exit 0)
                    retro::user_error_in("standard input", "is closed: there are no lines to read",
                                         "give the lines on standard input, or a file");
                for (const auto& f : files)   // every file before the first line is written (not half an output)
                    if (std::error_code ec; f != "-" && (std::filesystem::is_directory(f, ec) || !std::filesystem::exists(f, ec)))
                        retro::user_error_in(f, std::filesystem::is_directory(f, ec) ? "is a folder, not a text file" : "no such file");
                retro::std_output_required(*encode ? "the ids" : "the text");
                retro::Tokenizer tok(retro::tokenizer_resolve_path(model));
                std::ios::sync_with_stdio(false);
                for (const auto& f : files) {
                    std::ifstream file;
                    if (f != "-") {
                        file.open(f, std::ios::binary);
                        if (!file) retro::user_error_in(f, std::string("cannot be opened: ") + std::strerror(errno));
                    }
                    std::istream& in = f == "-" ? std::cin : file;
                    const std::string name = f == "-" ? "standard input" : f;
                    if (*encode) retro::tokenizer_encode_stream(tok, in, std::cout, enc, name);
                    else retro::tokenizer_decode_stream(tok, in, std::cout, name);
                }
            };
        });
}
