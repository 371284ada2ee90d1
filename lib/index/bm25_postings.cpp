// Implementation of bm25_postings.h. The arithmetic is Xapian 1.4's BM25Weight (weight/bm25weight.cc, with
// k2 = 0, no relevance set and a query factor of 1), expression for expression, so that each term's share of a
// score has the bits Xapian gives it; the shares are then added exactly (as integers of a fine unit), where Xapian
// adds doubles in its OR tree's order.
#include "index/bm25_postings.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <xapian.h>

#include "core/error.h"
#include "core/lfs_pointer.h"

namespace retro {

namespace {

constexpr std::int64_t kMaxWdf = std::numeric_limits<std::uint16_t>::max();

[[noreturn]] void unreadable(const std::string& path, const Xapian::Error& e) {
    refuse_lfs_pointer_file(path);
    user_error_in(path, "corrupt or unreadable Xapian database (" + e.get_description() + ")",
                  "rebuild the index with retro-index --kind bm25");
}

// The token id of a term "t<id>" (bm25_term); -1 for anything else.
std::int64_t term_token(const std::string& term) {
    if (term.size() < 2 || term.size() > 11 || term[0] != 't') return -1;
    std::int64_t id = 0;
    for (std::size_t i = 1; i < term.size(); ++i) {
        if (term[i] < '0' || term[i] > '9') return -1;
        id = id * 10 + (term[i] - '0');
    }
    if ((term[1] == '0' && term.size() > 2) || id > std::numeric_limits<std::int32_t>::max()) return -1;
    return id;
}

// The worse of two candidates: the lower score, or on equal scores the higher chunk id (Xapian's relevance order
// with ascending docids ranks it after).
bool ranks_after(const std::pair<std::int64_t, std::int64_t>& a, const std::pair<std::int64_t, std::int64_t>& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
}

}  // namespace

std::string bm25_postings_unfit(std::int64_t chunks, int chunk_size, const Bm25Params& params) {
    if (chunks >= (std::int64_t(1) << 32)) return cat("the in-memory postings hold 32-bit chunk rows; this database has ", chunks, " chunks");
    if (chunk_size > kMaxWdf) return cat("the in-memory postings count at most 65,535 tokens a chunk; this database's chunks hold ", chunk_size);
    if (!(params.k1 <= 1e100)) return cat("k1 ", params.k1, " is beyond what the in-memory postings score (1e100)");
    return "";
}

double bm25_postings_bytes(std::int64_t chunks, std::int64_t total_length, int threads) {
    // postings (a chunk row, 4 bytes, and its share of the denominator, 8; a wdf of 2 while reading) and the chunks'
    // lengths and denominators while reading (16); per thread an accumulator (8) and the list of chunks reached (4)
    return 14.0 * static_cast<double>(total_length) + 16.0 * static_cast<double>(chunks) +
           12.0 * static_cast<double>(chunks) * std::max(1, threads);
}

std::int64_t bm25_total_length(const std::string& path) {
    try {
        return static_cast<std::int64_t>(Xapian::Database(path).get_total_length());
    } catch (const Xapian::Error& e) {
        unreadable(path, e);
    }
}

Bm25Postings::Bm25Postings(const std::string& path, const Bm25Params& params, std::int64_t chunks) : params_(params) {
    std::vector<std::int64_t> length(static_cast<std::size_t>(chunks), 0);   // each chunk's indexed tokens: the sum of its wdfs
    std::int64_t total = 0;
    try {
        Xapian::Database db(path);
        if (static_cast<std::int64_t>(db.get_doccount()) != chunks || static_cast<std::int64_t>(db.get_lastdocid()) != chunks)
            user_error_in(path, cat("holds ", db.get_doccount(), " documents, the database ", chunks, " chunks"),
                          "pass the --db the index was built from, or rebuild the index");
        const auto total_length = static_cast<std::int64_t>(db.get_total_length());
        doc_.reserve(static_cast<std::size_t>(total_length));
        wdf_.reserve(static_cast<std::size_t>(total_length));
        for (auto t = db.allterms_begin(); t != db.allterms_end(); ++t) {
            const std::string term = *t;
            const std::int64_t token = term_token(term);
            if (token < 0 || !bm25_indexes(static_cast<std::int32_t>(token)))
                user_error_in(path, "holds the term '" + term.substr(0, 40) + "', which a RetroKit bm25 index does not",
                              "rebuild the index with retro-index --kind bm25");
            Term tm{static_cast<std::int32_t>(token), static_cast<std::int64_t>(doc_.size()), 0, 0.0};
            for (auto p = db.postlist_begin(term); p != db.postlist_end(term); ++p) {
                const std::int64_t row = static_cast<std::int64_t>(*p) - 1;
                const std::int64_t wdf = p.get_wdf();
                if (row < 0 || row >= chunks || wdf < 1 || wdf > kMaxWdf)   // (a chunk holds at most 65,535 tokens: bm25_postings_unfit)
                    user_error_in(path, cat("is corrupt: term ", term, " has a posting in document ", row + 1, " with wdf ", wdf,
                                            " (documents 1 to ", chunks, ", wdf 1 to a chunk's length)"),
                                  "rebuild the index with retro-index --kind bm25");
                doc_.push_back(static_cast<std::uint32_t>(row));
                wdf_.push_back(static_cast<std::uint16_t>(wdf));
                length[static_cast<std::size_t>(row)] += wdf;
                total += wdf;
            }
            tm.end = static_cast<std::int64_t>(doc_.size());
            // BM25Weight::init: tw = (N - tf + 0.5) / (tf + 0.5), and tw / 2 + 1 where tw < 2
            const auto tf = static_cast<Xapian::doccount>(tm.end - tm.begin);
            double tw = (static_cast<Xapian::doccount>(chunks) - tf + 0.5) / (tf + 0.5);
            if (tw < 2) tw = tw * 0.5 + 1;
            tm.log_tw = std::log(tw);
            terms_.push_back(tm);
        }
        if (total != total_length)
            user_error_in(path, cat("holds postings of ", total, " tokens, its statistics say ", total_length),
                          "rebuild the index with retro-index --kind bm25");
    } catch (const Xapian::Error& e) {
        unreadable(path, e);
    }
    std::sort(terms_.begin(), terms_.end(), [](const Term& a, const Term& b) { return a.token < b.token; });
    // BM25Weight::init's len_factor (1 / the average length, 0 where the length cannot matter or all chunks are
    // empty) and get_sumpart's denominator k1 (normlen b + (1 - b)) + wdf without its wdf
    double len_factor = 0;
    if (!(params_.k2 == 0 && (params_.b == 0 || params_.k1 == 0))) {
        len_factor = chunks > 0 ? static_cast<double>(total) / static_cast<double>(chunks) : 0.0;
        if (len_factor != 0) len_factor = 1 / len_factor;
    }
    std::vector<double> base(static_cast<std::size_t>(chunks));
    for (std::int64_t c = 0; c < chunks; ++c) {
        const Xapian::termcount len = static_cast<Xapian::termcount>(length[static_cast<std::size_t>(c)]);
        const double normlen = std::max(len * len_factor, params_.min_normlen);
        base[static_cast<std::size_t>(c)] = params_.k1 * (normlen * params_.b + (1 - params_.b));
    }
    // each posting's wdf / (k1 (normlen b + (1 - b)) + wdf), the double get_sumpart multiplies the term weight by: the
    // search then multiplies and adds (a division a posting was half its time)
    part_.resize(doc_.size());
    for (std::size_t j = 0; j < doc_.size(); ++j) {
        const double wdf_double = wdf_[j];
        part_[j] = wdf_double / (base[doc_[j]] + wdf_double);
    }
    std::vector<std::uint16_t>().swap(wdf_);
    chunks_ = chunks;
}

Bm25PostingsSearcher::Bm25PostingsSearcher(const Bm25Postings& postings)
    : p_(postings), acc_(static_cast<std::size_t>(postings.chunks()), 0) {
    touched_.reserve(acc_.size());
}

void Bm25PostingsSearcher::search(const std::int32_t* tokens, int n, int k, const std::int64_t* docs, std::int64_t skip_doc,
                                  std::int64_t* ids, float* scores) {
    counts_.clear();
    for (int i = 0; i < n; ++i)
        if (bm25_indexes(tokens[i])) ++counts_[tokens[i]];
    const Bm25Params& prm = p_.params_;
    // each query term's weight (BM25Weight::init: log(tw) * factor (1), times the wqf saturation where k3 != 0, times
    // k1 + 1), for the terms some chunk holds
    weights_.clear();
    auto term = p_.terms_.begin();
    double bound = 0;   // no score reaches the sum of the weights (a chunk's share of a term is below its weight)
    for (const auto& [token, count] : counts_) {   // ascending token ids, as the terms
        term = std::lower_bound(term, p_.terms_.end(), token,
                                [](const Bm25Postings::Term& t, std::int32_t id) { return t.token < id; });
        if (term == p_.terms_.end()) break;
        if (term->token != token) continue;   // a query term no chunk holds (a --queries database's)
        double termweight = term->log_tw;
        if (prm.k3 != 0) {
            const double wqf_double = count;
            termweight *= (prm.k3 + 1) * wqf_double / (prm.k3 + wqf_double);
        }
        termweight *= (prm.k1 + 1);
        weights_.emplace_back(static_cast<std::size_t>(term - p_.terms_.begin()), termweight);
        bound += termweight;
    }
    // Each share (get_sumpart's value, in double as Xapian computes it) is added as an integer of 2^-e units, e the
    // largest that keeps the query's bound under 2^61: integer sums do not depend on the order of the shares, so two
    // chunks whose shares are the same numbers have the same score and tie (by chunk id), which a double sum in
    // another order can break by an ulp (Xapian's own OR tree does). The rounding is below 2^-58 of the bound.
    RETRO_CHECK(std::isfinite(bound), "bm25 postings: a query's score bound ", bound, " is not finite (bm25_postings_unfit)");
    const int e = bound > 0 ? 60 - std::ilogb(bound) : 0;
    const double scale = std::ldexp(1.0, e);
    const std::uint32_t* doc = p_.doc_.data();
    const double* part = p_.part_.data();
    std::int64_t* acc = acc_.data();
    touched_.clear();
    for (const auto& [t, termweight] : weights_) {
        const Bm25Postings::Term& tm = p_.terms_[t];
        // get_sumpart's termweight * (wdf / denom) in units of 2^-e: the power of two taken into the weight first
        // changes no bit of the product (an exact scaling), and saves a multiplication a posting
        const double scaled = termweight * scale;
        for (std::int64_t j = tm.begin; j < tm.end; ++j) {
            const std::uint32_t c = doc[j];
            if (acc[c] == 0) touched_.push_back(c);
            acc[c] += std::max<std::int64_t>(1, static_cast<std::int64_t>(scaled * part[j] + 0.5));   // (never 0: "reached")
        }
    }
    // the k best (score desc, id asc) among the chunks reached, outside the query's document
    heap_.clear();
    // a max-heap of the candidates by how far they rank after: its front is the worst kept
    const auto worse_first = [](const auto& a, const auto& b) { return ranks_after(b, a); };
    for (const std::uint32_t c : touched_) {
        const std::pair<std::int64_t, std::int64_t> cand{acc[c], static_cast<std::int64_t>(c)};   // (in the query's unit)
        acc[c] = 0;
        if (docs && docs[c] == skip_doc) continue;
        if (static_cast<int>(heap_.size()) < k) {
            heap_.push_back(cand);
            std::push_heap(heap_.begin(), heap_.end(), worse_first);
        } else if (k > 0 && ranks_after(heap_.front(), cand)) {
            std::pop_heap(heap_.begin(), heap_.end(), worse_first);
            heap_.back() = cand;
            std::push_heap(heap_.begin(), heap_.end(), worse_first);
        }
    }
    std::sort(heap_.begin(), heap_.end(), [](const auto& a, const auto& b) { return ranks_after(b, a); });
    int got = 0;
    for (; got < static_cast<int>(heap_.size()); ++got) {
        ids[got] = heap_[static_cast<std::size_t>(got)].second;
        scores[got] = static_cast<float>(std::ldexp(static_cast<double>(heap_[static_cast<std::size_t>(got)].first), -e));
    }
    for (; got < k; ++got) {
        ids[got] = -1;
        scores[got] = -std::numeric_limits<float>::infinity();
    }
}

}  // namespace retro
