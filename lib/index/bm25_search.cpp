// Implementation of bm25_search.h over Xapian 1.4 (Enquire, BM25Weight, MatchDecider).
#include "index/bm25_search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include <xapian.h>

#include "core/error.h"
#include "core/lfs_pointer.h"

namespace retro {
namespace {

// Rejects the chunks of one document: docid = chunk row + 1.
class SkipDocument : public Xapian::MatchDecider {
public:
    SkipDocument(const std::int64_t* docs, std::int64_t doc) : docs_(docs), doc_(doc) {}
    bool operator()(const Xapian::Document& d) const override {
        return docs_[static_cast<std::int64_t>(d.get_docid()) - 1] != doc_;
    }

private:
    const std::int64_t* docs_;
    std::int64_t doc_;
};

}  // namespace

struct Bm25Searcher::State {
    std::string path;
    Xapian::Database db;
    Xapian::Enquire enquire;
    std::map<std::int32_t, unsigned> counts;   // the query's token ids and their counts
    std::vector<Xapian::Query> terms;
    explicit State(const std::string& p) : path(p), db(p), enquire(db) {}
};

Bm25Searcher::Bm25Searcher(const std::string& path, const Bm25Params& p, std::int64_t chunks) {
    try {
        s_ = std::make_unique<State>(path);
        s_->enquire.set_weighting_scheme(Xapian::BM25Weight(p.k1, p.k2, p.k3, p.b, p.min_normlen));
        s_->enquire.set_docid_order(Xapian::Enquire::ASCENDING);   // ties: lower chunk id first
    } catch (const Xapian::Error& e) {
        refuse_lfs_pointer_file(path);   // bm25.glass from a clone without git-lfs
        user_error_in(path, "corrupt or unreadable Xapian database (" + e.get_description() + ")",
                      "rebuild the index with retro-index --kind bm25");
    }
    const auto docs = static_cast<std::int64_t>(s_->db.get_doccount());
    if (docs != chunks || static_cast<std::int64_t>(s_->db.get_lastdocid()) != chunks)
        user_error_in(path, cat("holds ", docs, " documents, the database ", chunks, " chunks"),
                      "pass the --db the index was built from, or rebuild the index");
}

Bm25Searcher::~Bm25Searcher() = default;

void Bm25Searcher::search(const std::int32_t* tokens, int n, int k, const std::int64_t* docs, std::int64_t skip_doc,
                          std::int64_t* ids, float* scores) {
    auto& s = *s_;
    s.counts.clear();
    for (int i = 0; i < n; ++i)
        if (bm25_indexes(tokens[i])) ++s.counts[tokens[i]];
    s.terms.clear();
    for (const auto& [token, count] : s.counts) s.terms.emplace_back(bm25_term(token), count);
    int got = 0;
    try {
        if (!s.terms.empty()) {
            s.enquire.set_query(Xapian::Query(Xapian::Query::OP_OR, s.terms.begin(), s.terms.end()));
            SkipDocument skip(docs, skip_doc);
            Xapian::MSet m = s.enquire.get_mset(0, static_cast<Xapian::doccount>(k), nullptr, docs ? &skip : nullptr);
            for (auto it = m.begin(); it != m.end() && got < k; ++it, ++got) {
                ids[got] = static_cast<std::int64_t>(*it) - 1;
                scores[got] = static_cast<float>(it.get_weight());
            }
        }
    } catch (const Xapian::Error& e) {
        user_error_in(s.path, "corrupt or unreadable Xapian database (" + e.get_description() + ")",
                      "rebuild the index with retro-index --kind bm25");
    }
    for (; got < k; ++got) {
        ids[got] = -1;
        scores[got] = -std::numeric_limits<float>::infinity();
    }
}

}  // namespace retro
