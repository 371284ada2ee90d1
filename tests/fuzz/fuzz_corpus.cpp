// libFuzzer target: the corpus readers (text/corpus.h over text/line_reader.h) must turn any bytes into
// documents or a UserError, never a crash, a hang or a huge allocation (`make fuzz`). The first input byte picks
// the file kind (its low 3 bits: .txt, .txt.gz, .txt.zst, .jsonl, .jsonl.gz, .jsonl.zst, .parquet; bit 3: --on-error
// skip); the rest is the file, written to one temporary file per kind and process, since the readers take a
// path. Seeds: tests/fuzz/seeds/corpus (the same selector byte first).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "text/corpus.h"
#include "text/line_reader.h"
#include "text/utf8.h"

namespace {

const char* const kExtensions[] = {".txt", ".txt.gz", ".txt.zst", ".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet"};
constexpr int kKinds = sizeof(kExtensions) / sizeof(kExtensions[0]);

std::string kind_path(int kind) {
    static const std::string stem = "/tmp/retrokit-fuzz-" + std::to_string(getpid()) + "-corpus";
    return stem + kExtensions[kind];
}

void remove_files() {
    for (int k = 0; k < kKinds; ++k) std::remove(kind_path(k).c_str());
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_corpus: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const bool cleanup = (kind_path(0), std::atexit(remove_files) == 0);   // the stem outlives the handler
    (void)cleanup;
    if (size == 0) return 0;
    const int kind = (data[0] & 7) % kKinds;
    const std::string path = kind_path(kind);
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);

    retro::CorpusOptions opts;
    opts.on_error = (data[0] & 8) ? retro::OnError::SKIP : retro::OnError::FAIL;
    const retro::CorpusFile file{path, kind >= 3 && kind <= 5, kind == 6};
    retro::CorpusCounts counts;
    std::int64_t seen = 0;
    try {
        retro::corpus_read_file(file, opts, counts, [&](retro::Document& doc) {
            ++seen;
            if (doc.text.empty()) fail("an empty document");
            std::string copy = doc.text;
            if (retro::utf8_sanitize(copy) != 0) fail("a document that is not valid UTF-8");
            if (doc.source != path) fail("a document naming another file");
            if ((file.jsonl || file.parquet) && (doc.line < 1 || doc.byte_offset < 0)) fail("a document without its line");
        });
        if (seen != counts.documents || counts.files != 1) fail("counts that disagree with the documents");
    } catch (const retro::UserError&) {
    }
    // the line reader on its own: lines hold no '\n', offsets grow
    try {
        retro::LineReader reader(path);
        std::string line;
        std::int64_t last = -1;
        while (reader.next(line)) {
            if (line.find('\n') != std::string::npos) fail("a line holding '\\n'");
            if (reader.byte_offset() <= last && reader.line_number() > 1) fail("line offsets that do not grow");
            last = reader.byte_offset();
        }
    } catch (const retro::UserError&) {
    }
    return 0;
}
