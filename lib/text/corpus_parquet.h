// A Parquet corpus file read as corpus.h reads a .jsonl file: each row of the `text_key` column a document (its row,
// from 1, as the document's line; its page's file offset as its byte offset), nulls and blank texts skipped and
// counted, invalid UTF-8 and NUL bytes replaced and counted; a file that cannot be read (damaged, a codec or encoding
// RetroKit does not read, no such column) refused in one line or, under OnError::SKIP, skipped from there with a word.
// provides: corpus_read_parquet, corpus_replace_nul_bytes
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "text/corpus.h"

namespace retro {

void corpus_read_parquet(const CorpusFile& file, const CorpusOptions& opts, CorpusCounts& counts,
                         const std::function<void(Document&)>& fn);

// Each NUL byte of `text` as U+FFFD; returns how many there were (corpus.cpp).
std::int64_t corpus_replace_nul_bytes(std::string& text);

}  // namespace retro
