// BM25 search for many queries against one bm25 index (retro-knn's self-join): every posting of the
// index's Xapian database read once into memory, then each query scored term at a time into a dense
// accumulator — the scores of Xapian's BM25Weight (each term's share computed with its expression, in
// double, the shares added exactly) and its order (score desc, chunk id asc; the same-document filter; -1
// padding), where two chunks whose shares are the same numbers always tie.
//
// Why not Xapian's own matcher for this: it is made for short queries. A chunk used as a query holds
// ~50 distinct terms of which several are in most chunks (`▁`, newline, `.`), and its document-at-a-time
// OR tree then visits most of the database for every query, merging posting lists as it goes (docs/index.md
// "BM25": 69 queries/s on 56k chunks). Summing each term's postings straight into an array does the same
// arithmetic without the merging. Xapian stays the index format, the reader of these postings, the searcher of
// retro-generate and `retro-index query`, and the fallback where the postings do not fit in memory
// (`RETRO_BM25_SEARCH=xapian` forces it, for checks).
// provides: Bm25Postings, Bm25PostingsSearcher, bm25_postings_bytes, bm25_total_length
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "index/bm25_params.h"

namespace retro {

class Bm25Postings {
public:
    // Reads every term's postings of the Xapian database at `path` (`chunks` documents, docid = row + 1).
    // UserError naming the file as Bm25Searcher's, and where a posting is not one a bm25 index of `chunks` chunks of
    // at most 65,535 tokens can hold (bm25_postings_bytes says where the compact form fits).
    Bm25Postings(const std::string& path, const Bm25Params& params, std::int64_t chunks);
    std::int64_t chunks() const { return chunks_; }
    std::int64_t postings() const { return static_cast<std::int64_t>(doc_.size()); }

private:
    friend class Bm25PostingsSearcher;
    struct Term {
        std::int32_t token;
        std::int64_t begin, end;   // [begin, end) of doc_ / part_
        double log_tw;             // ln r_t after Xapian's r < 2 rule
    };
    Bm25Params params_;
    std::vector<Term> terms_;           // sorted by token
    std::vector<std::uint32_t> doc_;    // chunk rows, ascending within a term
    std::vector<double> part_;          // wdf / (k1 (normlen b + (1 - b)) + wdf) of the term in that chunk
    std::vector<std::uint16_t> wdf_;    // the term's count in that chunk, while reading
    std::int64_t chunks_ = 0;
};

// The bytes a Bm25Postings and `threads` searchers over a database of `chunks` documents and `total_length`
// indexed tokens take at most (a posting per distinct term of a chunk: at most one per token).
double bm25_postings_bytes(std::int64_t chunks, std::int64_t total_length, int threads);
// Why the postings search cannot take a database of `chunks` chunks of `chunk_size` tokens under `params` ("" where
// it can): 2^32 chunks or more (32-bit rows), chunks of more than 65,535 tokens (16-bit counts while reading), a k1
// so large that the score bound is not a finite double.
std::string bm25_postings_unfit(std::int64_t chunks, int chunk_size, const Bm25Params& params);
// The indexed tokens of the Xapian database at `path` (its statistics); UserError naming it when unreadable.
std::int64_t bm25_total_length(const std::string& path);

// One thread's searcher over shared postings (its own accumulator: 12 bytes a chunk).
class Bm25PostingsSearcher {
public:
    explicit Bm25PostingsSearcher(const Bm25Postings& postings);
    // Bm25Searcher::search's contract: the n tokens of one query chunk (pad/bos/eos ignored), the best k chunks by
    // (score desc, chunk id asc), chunks c with docs[c] == skip_doc left out when docs is not null, padded with
    // -1 / -inf.
    void search(const std::int32_t* tokens, int n, int k, const std::int64_t* docs, std::int64_t skip_doc,
                std::int64_t* ids, float* scores);

private:
    const Bm25Postings& p_;
    std::vector<std::int64_t> acc_;        // each chunk's score so far in the query's fixed-point unit; 0 = not reached
    std::vector<std::pair<std::size_t, double>> weights_;   // the query's terms (index into terms_) and their weights
    std::vector<std::uint32_t> touched_;   // the chunks reached, to select from and to clear
    std::map<std::int32_t, unsigned> counts_;
    std::vector<std::pair<std::int64_t, std::int64_t>> heap_;   // (score in the query's unit, chunk)
};

}  // namespace retro
