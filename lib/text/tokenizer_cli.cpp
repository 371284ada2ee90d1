// Implementation of tokenizer_cli.h.
#include "text/tokenizer_cli.h"

#include <filesystem>
#include <istream>
#include <ostream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/threads.h"

namespace fs = std::filesystem;

namespace retro {

std::string tokenizer_resolve_path(const std::string& model) {
    std::error_code ec;
    if (fs::is_directory(model, ec)) return (fs::path(model) / "tok.model").string();
    return model;
}

void tokenizer_train_to_folder(const ToolContext& ctx, const std::vector<std::string>& inputs,
                               const CorpusOptions& corpus, const TokenizerTrainOptions& opts,
                               const std::string& out_dir, bool force) {
    std::string model_path = (fs::path(out_dir) / "tok.model").string();
    if (fs::exists(model_path) && !force)
        user_error_in(out_dir, "already holds a tokenizer", "pass --force to replace it, or choose another --out");
    auto files = corpus_list_files(inputs, corpus);
    TokenizerTrainResult r = tokenizer_train(files, corpus, opts);
    fs::create_directories(out_dir);
    fs::remove(fs::path(out_dir) / "manifest.json");   // the folder is incomplete until it is rewritten
    write_file_atomic(model_path, r.model_bytes);
    Manifest m(ctx);
    m.parameters() = {{"vocab_size", opts.vocab_size},       {"model_type", opts.model_type},
                      {"max_sentences", opts.max_sentences}, {"character_coverage", opts.character_coverage},
                      {"byte_fallback", opts.byte_fallback}, {"seed", opts.seed},
                      {"glob", corpus.glob},                 {"text_key", corpus.text_key},
                      {"special_ids", {{"pad", 0}, {"unk", 1}, {"bos", 2}, {"eos", 3}}}};
    for (const auto& f : files) m.add_input("corpus", f.path);
    m.extra()["corpus"] = {{"files", r.counts.files},
                           {"documents", r.counts.documents},
                           {"bytes", r.counts.bytes},
                           {"empty_skipped", r.counts.empty_skipped},
                           {"malformed_skipped", r.counts.malformed_skipped},
                           {"invalid_utf8_replaced", r.counts.invalid_utf8_replaced},
                           {"sentences_seen", r.sentences_seen},
                           {"sentences_used", r.sentences_used}};
    m.extra()["vocab_size"] = r.vocab_size;
    m.add_output(out_dir, "tok.model");
    m.write(out_dir);
    log_info("wrote " + model_path + " (vocabulary " + std::to_string(r.vocab_size) + ", " +
             std::to_string(r.counts.documents) + " documents, " + std::to_string(r.counts.empty_skipped) +
             " empty skipped, " + std::to_string(r.counts.invalid_utf8_replaced) + " invalid UTF-8 sequences replaced)");
}

namespace {
constexpr std::size_t kBatch = 4096;

// Reads up to kBatch lines.
bool read_batch(std::istream& in, std::vector<std::string>& lines) {
    lines.clear();
    std::string line;
    while (lines.size() < kBatch && std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(std::move(line));
    }
    return !lines.empty();
}
}  // namespace

void tokenizer_encode_stream(const Tokenizer& tok, std::istream& in, std::ostream& out, const EncodeOptions& opts) {
    std::vector<std::string> lines, encoded;
    while (read_batch(in, lines)) {
        encoded.assign(lines.size(), std::string());
        parallel_for(static_cast<std::int64_t>(lines.size()), [&](std::int64_t i) {
            std::string& o = encoded[static_cast<std::size_t>(i)];
            const std::string& text = lines[static_cast<std::size_t>(i)];
            auto sep = [&] { if (!o.empty()) o += ' '; };
            if (opts.bos_eos) o += opts.pieces ? tok.piece(TOKEN_BOS) : std::to_string(TOKEN_BOS);
            if (opts.pieces) {
                for (const auto& p : tok.encode_pieces(text)) sep(), o += p;
            } else {
                for (int id : tok.encode(text)) sep(), o += std::to_string(id);
            }
            if (opts.bos_eos) sep(), o += opts.pieces ? tok.piece(TOKEN_EOS) : std::to_string(TOKEN_EOS);
        });
        for (const auto& e : encoded) out << e << '\n';
        out.flush();
    }
}

void tokenizer_decode_stream(const Tokenizer& tok, std::istream& in, std::ostream& out) {
    std::vector<std::string> lines;
    std::int64_t line_no = 0;
    while (read_batch(in, lines)) {
        for (const auto& line : lines) {
            ++line_no;
            std::vector<int> ids;
            const char* p = line.c_str();
            while (*p) {
                while (*p == ' ' || *p == '\t' || *p == ',') ++p;
                if (!*p) break;
                char* end = nullptr;
                long v = std::strtol(p, &end, 10);
                if (end == p || (*end && *end != ' ' && *end != '\t' && *end != ',') || v < 0 || v >= tok.vocab_size())
                    user_error_in("<stdin>:" + std::to_string(line_no),
                                  "'" + std::string(p, std::min<std::size_t>(std::strcspn(p, " \t,"), 20)) +
                                      "' is not a token id in [0, " + std::to_string(tok.vocab_size()) + ")");
                ids.push_back(static_cast<int>(v));
                p = end;
            }
            out << tok.decode(ids) << '\n';
        }
        out.flush();
    }
}

}  // namespace retro
