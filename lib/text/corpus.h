// Corpus walking, shared by retro-tokenizer and retro-chunk. An input is a folder (files matching
// a glob, default "**/*.txt", sorted by path, one document per file), a .jsonl / .jsonl.gz /
// .jsonl.zst file (one JSON object per line; the document is its `text_key` string) or a .parquet file (a row a
// document: its `text_key` column, text/parquet_text.h); in a folder, .jsonl and .parquet files are read so too. Empty
// documents are skipped and counted; invalid UTF-8 is replaced (U+FFFD) and counted; a whole file holding a NUL
// byte (binary, or UTF-16) is refused, or skipped and counted as malformed under OnError::SKIP. A folder inside a
// corpus folder that a RetroKit tool made (a tokenizer, a database: core/output_folder.h's folder_owner) is skipped.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace retro {

enum class OnError { FAIL, SKIP };

struct CorpusOptions {
    std::string glob = "**/*.txt";
    std::string text_key = "text";
    OnError on_error = OnError::FAIL;
};

struct CorpusFile {
    std::string path;
    bool jsonl = false;     // one JSON object a line
    bool parquet = false;   // a Parquet file: a row a document (its text_key column); neither: the whole file is one
};

struct Document {
    std::string text;
    std::string source;          // file path
    std::int64_t line = 0;       // 1-based line for jsonl (row for Parquet), 0 for whole files
    std::int64_t byte_offset = 0;
};

struct CorpusCounts {
    std::int64_t files = 0, documents = 0, bytes = 0;
    std::int64_t empty_skipped = 0, malformed_skipped = 0, invalid_utf8_replaced = 0;
    void merge(const CorpusCounts& o);
};

// True when `relative` (a '/'-separated path) matches `glob`: '*' and '?' stay within a path
// component; '**' as a whole component ('**/' or a trailing '/**') matches zero or more whole components,
// elsewhere it is two '*'. Time O(|glob| x |relative|^2) at worst, whatever the stars.
bool glob_match(const std::string& glob, const std::string& relative);

// Whether `path` names a Parquet file (read a row a document: text/corpus_parquet.h).
bool corpus_is_parquet(const std::string& path);

// Expands inputs (folders and files) into the sorted list of files to read. A folder with no
// matching file, or a missing path, is a UserError naming it. A file reached twice (named twice, through a
// link, by overlapping folders) is listed once, with a warning.
std::vector<CorpusFile> corpus_list_files(const std::vector<std::string>& inputs, const CorpusOptions& opts);

// What differs between `files` and the corpus inputs a finished folder's manifest `done` records (retro-chunk's and
// retro-tokenizer's --resume), as a refusal names it; "" for the same files. The same files reached another way (a
// linked folder) are the same; a file whose size changed is named as changed since `made` ("the database") was made
// (its bytes are not read again: a corpus can be hundreds of GB).
std::string corpus_inputs_difference(const nlohmann::json& done, const std::vector<CorpusFile>& files, const std::string& made);

// Calls fn for every non-empty document of one file, in order. Malformed jsonl lines fail with
// "FILE:LINE: ..." or are skipped and counted, per opts.on_error.
void corpus_read_file(const CorpusFile& file, const CorpusOptions& opts, CorpusCounts& counts,
                      const std::function<void(Document&)>& fn);

}  // namespace retro
