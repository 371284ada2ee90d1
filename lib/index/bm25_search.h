// One BM25 searcher over a bm25 index folder's Xapian database (bm25_params.h): a chunk's token ids
// become an OR query of their terms (each term's within-query frequency its wqf), scored by
// Xapian::BM25Weight with the folder's parameters; the best k chunks come back by (score desc, chunk
// id asc), chunks of one excluded document rejected inside the search (a Xapian::MatchDecider), so a
// row is -1-padded only when fewer than k chunks outside that document share a term with the query.
// A Xapian::Database is not thread-safe: one searcher per thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "index/bm25_params.h"

namespace retro {

class Bm25Searcher {
public:
    // Opens `path` read-only; UserError naming it when unreadable or when it does not hold `chunks` documents.
    Bm25Searcher(const std::string& path, const Bm25Params& params, std::int64_t chunks);
    ~Bm25Searcher();
    Bm25Searcher(const Bm25Searcher&) = delete;
    Bm25Searcher& operator=(const Bm25Searcher&) = delete;

    // Searches the n tokens of one query chunk (pad/bos/eos ignored) for k chunks; when `docs` is not
    // null, chunks c with docs[c] == skip_doc are never returned. ids/scores hold k entries, padded with -1 / -inf.
    void search(const std::int32_t* tokens, int n, int k, const std::int64_t* docs, std::int64_t skip_doc,
                std::int64_t* ids, float* scores);

private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace retro
