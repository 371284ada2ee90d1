// Implementation of tokenizer_stream.h.
#include "text/tokenizer_stream.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/std_streams.h"
#include "core/log.h"
#include "core/threads.h"
#include "text/utf8.h"

namespace retro {
namespace {
constexpr std::size_t kBatch = 4096;

// Reads up to kBatch lines.
bool read_batch(std::istream& in, std::vector<std::string>& lines, const std::string& name) {
    lines.clear();
    std::string line;
    while (lines.size() < kBatch && std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(std::move(line));
    }
    // a read that failed (standard input a folder: EISDIR) is not the end of the text: exit 0 with nothing written
    // hid it, where `cat` says "Is a directory"
    if (in.bad()) user_error_in(name, "cannot be read (a folder, or a read error)", "give a text file, or the text on standard input");
    return !lines.empty();
}
}  // namespace

namespace {
// Each batch is flushed (a pipe's reader sees it at once); one that cannot be written (a full disk) ends the run with
// the reason, which the end-of-run check no longer knew ("standard output: write failed" alone).
void flush_checked(std::ostream& out) {
    errno = 0;
    out.flush();
    if (!out) user_error_in("standard output", stdout_write_failed(errno));
}
// A line written, and the reason at once where it could not be: a batch larger than the stream's buffer writes
// while it is put, and by the batch's flush the failed write's errno was gone (a helper's docs walk, session 67:
// 6 MB of text encoded to /dev/full said "write failed" alone, where a small text said "No space left on device").
void put_line_checked(std::ostream& out, const std::string& line) {
    errno = 0;
    out << line << '\n';
    if (!out) user_error_in("standard output", stdout_write_failed(errno));
}
}  // namespace

void tokenizer_encode_stream(const Tokenizer& tok, std::istream& in, std::ostream& out, const EncodeOptions& opts,
                             const std::string& name) {
    std::vector<std::string> lines, encoded;
    std::atomic<std::int64_t> replaced{0};
    while (read_batch(in, lines, name)) {
        encoded.assign(lines.size(), std::string());
        parallel_for(static_cast<std::int64_t>(lines.size()), [&](std::int64_t i) {
            std::string& o = encoded[static_cast<std::size_t>(i)];
            std::string& text = lines[static_cast<std::size_t>(i)];
            // invalid UTF-8 replaced as retro-chunk replaces it (each maximal invalid sequence by one U+FFFD), so that the
            // ids are those a database of the same text holds: sentencepiece alone replaced each byte of a cut-short
            // character (`\xe2\x82` gave two U+FFFD, the database one)
            if (!utf8_valid(text)) replaced += utf8_sanitize(text);
            auto sep = [&] { if (!o.empty()) o += ' '; };
            if (opts.bos_eos) o += opts.pieces ? tok.piece(TOKEN_BOS) : std::to_string(TOKEN_BOS);
            if (opts.pieces) {
                for (const auto& p : tok.encode_pieces(text)) sep(), o += p;
            } else {
                for (int id : tok.encode(text)) sep(), o += std::to_string(id);
            }
            if (opts.bos_eos) sep(), o += opts.pieces ? tok.piece(TOKEN_EOS) : std::to_string(TOKEN_EOS);
        });
        for (const auto& e : encoded) put_line_checked(out, e);
        flush_checked(out);
    }
    if (replaced > 0)
        log_warn(cat(name, ": ", replaced.load(), replaced == 1 ? " invalid UTF-8 sequence" : " invalid UTF-8 sequences",
                     " replaced by U+FFFD, as retro-chunk replaces them"));
}

void tokenizer_decode_stream(const Tokenizer& tok, std::istream& in, std::ostream& out, const std::string& name) {
    std::vector<std::string> lines;
    std::int64_t line_no = 0;
    while (read_batch(in, lines, name)) {
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
                    user_error_in((name == "standard input" ? std::string("<stdin>") : name) + ":" + std::to_string(line_no),
                                  "'" + std::string(p, std::min<std::size_t>(std::strcspn(p, " \t,"), 20)) +
                                      "' is not a token id in [0, " + std::to_string(tok.vocab_size()) + ")");
                ids.push_back(static_cast<int>(v));
                p = end;
            }
            put_line_checked(out, tok.decode(ids));
        }
        flush_checked(out);
    }
}

}  // namespace retro
