// Implementation of corpus_parquet.h over text/parquet_text.h.
#include "text/corpus_parquet.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/log.h"
#include "text/parquet_text.h"
#include "text/utf8.h"

namespace retro {
namespace {
// A Git LFS pointer in place of the file (a dataset cloned without git-lfs: the Hugging Face hub keeps its Parquet
// files in LFS) is named as such, not as "not a Parquet file".
bool lfs_pointer_file(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rbe");
    if (!f) return false;
    unsigned char head[1024];
    const std::size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    return is_lfs_pointer(head, n);
}

std::string joined(const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "none" : out;
}
}  // namespace

void corpus_read_parquet(const CorpusFile& file, const CorpusOptions& opts, CorpusCounts& counts,
                         const std::function<void(Document&)>& fn) {
    counts.files++;
    Document doc;
    doc.source = file.path;
    std::int64_t rows_read = 0;
    std::vector<std::string> columns;
    try {
        const ParquetTextFile parquet(file.path);
        columns = parquet.column_names();
        parquet.read_column(opts.text_key, [&](std::int64_t row, const std::string_view* text, std::int64_t page_offset) {
            rows_read = row + 1;
            if (!text) {   // a null: no text in this row
                counts.empty_skipped++;
                return;
            }
            counts.bytes += static_cast<std::int64_t>(text->size());
            doc.text.assign(*text);
            if (!utf8_valid(doc.text)) counts.invalid_utf8_replaced += utf8_sanitize(doc.text);
            if (doc.text.find('\0') != std::string::npos) counts.invalid_utf8_replaced += corpus_replace_nul_bytes(doc.text);
            if (doc.text.find_first_not_of(" \t\r\n") == std::string::npos) {
                counts.empty_skipped++;
                return;
            }
            doc.line = row + 1;
            doc.byte_offset = page_offset;
            counts.documents++;
            fn(doc);
        });
    } catch (const ParquetMalformed& e) {
        const bool column = dynamic_cast<const ParquetColumnProblem*>(&e) != nullptr;
        if (!column && rows_read == 0 && lfs_pointer_file(file.path)) {
            if (opts.on_error == OnError::FAIL) refuse_lfs_pointer_file(file.path);
            log_warn(file.path + ": is a Git LFS pointer (a clone without git-lfs): skipped; fetch the file with `git lfs pull`");
            counts.malformed_skipped++;
            return;
        }
        const std::string problem = column ? std::string(e.what()) : std::string("cannot be read as Parquet: ") + e.what();
        const std::string where = rows_read > 0 ? cat(file.path, " (after row ", rows_read, ")") : file.path;
        if (opts.on_error == OnError::FAIL)
            user_error_in(where, problem,
                          column ? "pass --text-key with the column that holds the text; its columns: " + joined(columns)
                                 : "leave it out, write it again (pyarrow's default pq.write_table, for one, writes what "
                                   "RetroKit reads), or skip such files with --on-error skip");
        log_warn(where + ": " + problem + (rows_read > 0 ? "; the rest of the file is skipped" : "; skipped"));
        counts.malformed_skipped++;
    }
}

}  // namespace retro
