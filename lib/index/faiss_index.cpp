// Implementation of faiss_index.h over Debian's libfaiss 1.7.3 (faiss::Index::idx_t; no faiss::idx_t).
#include "index/faiss_index.h"

#include <faiss/AutoTune.h>
#include <faiss/Index.h>
#include <faiss/IVFlib.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <regex>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_stamps.h"
#include "core/lfs_pointer.h"
#include "core/log.h"
#include "core/stderr_capture.h"
#include "index/fast_flat_storage.h"
#include "index/hnsw_build.h"

namespace retro {

using idx_t = faiss::Index::idx_t;

std::int64_t index_ivf_nlist(std::int64_t n) {
    const auto target = static_cast<std::int64_t>(4.0 * std::sqrt(static_cast<double>(std::max<std::int64_t>(n, 1))));
    std::int64_t nlist = 1;
    while (nlist * 2 <= target) nlist *= 2;
    return nlist;
}

std::string index_default_factory(std::int64_t n) {
    if (n < kIndexFlatBelow) return "Flat";
    const std::string nlist = std::to_string(index_ivf_nlist(n));
    if (n < 20'000'000) return "IVF" + nlist + ",Flat";
    return "OPQ64_256,IVF" + nlist + "_HNSW32,PQ64";
}

std::int64_t index_factory_nlist(const std::string& factory) {
    std::smatch m;
    static const std::regex ivf("IVF([0-9]+)");
    if (std::regex_search(factory, m, ivf)) return std::stoll(m[1].str());
    return 0;
}

std::int64_t index_training_count(const std::string& factory, std::int64_t n) {
    const std::int64_t nlist = index_factory_nlist(factory);
    return std::min<std::int64_t>(n, nlist > 0 ? std::max<std::int64_t>(256 * nlist, 65536) : n);
}

void index_check_factory(const std::string& factory) {
    const std::string q = "'" + factory + "'";
    static const std::regex zero("(^|[^0-9])0+($|[^0-9])");
    std::size_t begin = 0;
    while (begin <= factory.size()) {
        const std::size_t end = std::min(factory.find(',', begin), factory.size());
        const std::string part = factory.substr(begin, end - begin);
        if (std::regex_search(part, zero))
            user_error_in("--index", q + ": " + part + " has a size of 0", "give each number of the factory string a positive value");
        if (part.find("NSG") != std::string::npos)
            user_error_in("--index", q + ": NSG graphs are not supported (FAISS crashed or did not finish building them)",
                          "use HNSW32 (or IVFn_HNSW32,Flat beyond a few million chunks)");
        begin = end + 1;
    }
}

std::string index_fit_factory(const std::string& factory, std::int64_t n_train, std::string& note) {
    index_check_factory(factory);
    note.clear();
    std::int64_t nlist = index_factory_nlist(factory);
    if (nlist == 0 || n_train >= 39 * nlist) return factory;
    std::int64_t fitted = std::max<std::int64_t>(1, n_train / 39);
    std::string out = std::regex_replace(factory, std::regex("IVF[0-9]+"), "IVF" + std::to_string(fitted),
                                         std::regex_constants::format_first_only);
    note = "lowered nlist from " + std::to_string(nlist) + " to " + std::to_string(fitted) + ": " +
           std::to_string(n_train) + " training points give fewer than 39 per centroid";
    return out;
}

void index_check_trainable(const std::string& factory, std::int64_t n_train) {
    std::smatch m;
    static const std::regex pq("PQ([0-9]+)(x([0-9]+))?");
    if (!std::regex_search(factory, m, pq)) return;
    int nbits = m[3].matched ? std::stoi(m[3].str()) : 8;
    std::int64_t need = 39 * (std::int64_t(1) << std::min(nbits, 24));
    if (n_train < need)
        user_error_in("--index", "too few chunks to train '" + factory + "': " + std::to_string(n_train) +
                                     " vectors, its PQ codebooks need at least " + std::to_string(need),
                      "use --index Flat (or IVFn,Flat) for a database this small (retro-bench knn: --ivf-nlist 0)");
}

int index_default_nprobe(std::int64_t nlist) { return static_cast<int>(std::max<std::int64_t>(1, nlist / 4)); }

void index_check_search_options(int nprobe, int ef_search) {
    if (nprobe < 0) user_error_in("--nprobe", "must not be negative (got " + std::to_string(nprobe) + ")", "0 keeps the default");
    if (ef_search < 0)
        user_error_in("--ef-search", "must not be negative (got " + std::to_string(ef_search) + ")", "0 keeps the default");
}

void index_apply_search_options(FaissIndex& index, int nprobe, int ef_search, const std::string& path) {
    if (nprobe > 0 && !index.set_nprobe(index_fit_nprobe(nprobe, index.nlist())))
        log_warn(cat("--nprobe ", nprobe, ": ", path, " has no inverted lists (not an IVF index); ignored"));
    if (ef_search > 0 && !index.set_ef_search(ef_search)) {
        log_warn(cat("--ef-search ", ef_search, ": ", path, " has no HNSW graph; ignored"));
    } else if (const std::int64_t nodes = index.nlist() > 0 ? index.nlist() : index.size(); ef_search > 0 && nodes > 0 && ef_search > nodes) {
        // an efSearch above the graph's node count visits the whole graph at the cost of a far longer candidate list
        // (--ef-search 1000000 over 4,740 vectors took 162 s against 0.3 s: a helper's pass, session 54); the graph:
        // the index's own, or an IVF's HNSW quantizer over its nlist centroids
        log_warn(cat("--ef-search ", ef_search, " is more than the ", nodes, " nodes of ", path, "'s graph: searching with ", nodes,
                     " (the whole graph: --exact compares every vector faster)"));
        index.set_ef_search(static_cast<int>(nodes));
    }
}

int index_fit_nprobe(int nprobe, std::int64_t nlist) {
    if (nlist <= 0 || nprobe <= nlist) return nprobe;
    log_warn("--nprobe " + std::to_string(nprobe) + " is more than the index's " + std::to_string(nlist) +
             " lists: searching all " + std::to_string(nlist));
    return static_cast<int>(nlist);
}

FaissIndex::FaissIndex(const std::string& factory, int dim) : where_("--index " + factory) {
    try {
        index_.reset(faiss::index_factory(dim, factory.c_str(), faiss::METRIC_INNER_PRODUCT));
        install_batched_hnsw(index_);   // HNSW graphs built the same at any thread count (index/hnsw_build.h)
        install_fast_flat_storage(index_.get());   // HNSW graphs are built with SIMD distances
        // Polysemous training (the factory's default for IVF-PQ and for a flat PQ, behind OPQ too) reorders the
        // PQ centroids by simulated annealing, ~10x the training time, and only serves polysemous filtering,
        // which no search here turns on (docs/index.md).
        if (auto* ivfpq = dynamic_cast<faiss::IndexIVFPQ*>(faiss::ivflib::try_extract_index_ivf(index_.get())))
            ivfpq->do_polysemous_training = false;
        faiss::Index* inner = index_.get();
        while (auto* pre = dynamic_cast<faiss::IndexPreTransform*>(inner)) inner = pre->index;
        if (auto* pq = dynamic_cast<faiss::IndexPQ*>(inner)) pq->do_polysemous_training = false;
    } catch (const faiss::FaissException& e) {
        user_error_in("--index", "FAISS does not understand '" + factory + "'",
                      "use a factory string such as Flat, IVF1024,Flat or OPQ64_256,IVF4096_HNSW32,PQ64");
    }
}

FaissIndex FaissIndex::load(const std::string& path) {
    if (!std::filesystem::is_regular_file(path)) user_error_in(path, "no such index file");
    FaissIndex out;
    out.where_ = path;
    refuse_lfs_pointer_file(path);
    const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rbe"), &std::fclose);
    if (!file) user_error_in(path, std::string("cannot be opened: ") + std::strerror(errno));
    input_stamp_file(path, file.get());   // the index read, for the run's record (core/input_stamps.h)
    try {
        faiss::FileIOReader reader(file.get());   // (not its owner: `file` closes it)
        reader.name = path;                        // as FAISS's own open names it, in its errors
        out.index_.reset(faiss::read_index(&reader));
    } catch (const faiss::FaissException& e) {
        std::string what = e.what();
        auto nl = what.find('\n');
        user_error_in(path, "corrupt or unreadable FAISS index (" + what.substr(0, nl) + ")",
                      "rebuild it with retro-index");
    }
    return out;
}

FaissIndex::FaissIndex(FaissIndex&&) noexcept = default;
FaissIndex& FaissIndex::operator=(FaissIndex&&) noexcept = default;
FaissIndex::~FaissIndex() = default;

bool FaissIndex::needs_training() const { return !index_->is_trained; }

void FaissIndex::train(std::int64_t n, const float* x) {
    try {
        // k-means warns on stderr by itself when the training set is small for its centroids: through the log
        // instead, so that --quiet silences it
        pass_on_library_lines("FAISS", capture_stderr([&] { index_->train(static_cast<idx_t>(n), x); }));
    } catch (const faiss::FaissException& e) {
        std::string what = e.what();
        user_error_in(where_, "training failed with " + std::to_string(n) + " points: " + what.substr(0, what.find('\n')),
                      "use --index Flat for a small database, or a smaller IVF/PQ setting");
    }
}

void FaissIndex::add(std::int64_t n, const float* x) { index_->add(static_cast<idx_t>(n), x); }

const AnnSearcher* FaissIndex::searcher() const {
    if (faiss_only_) return nullptr;
    if (!ann_made_) {
        ann_ = ann_searcher_for(*index_, ann_why_, ann_options_);
        ann_made_ = true;
    }
    return ann_.get();
}

const float* FaissIndex::flat_vectors() const {
    const AnnSearcher* s = searcher();
    if (!s || s->name() != "flat") return nullptr;
    return static_cast<const faiss::IndexFlat*>(index_.get())->get_xb();
}

bool FaissIndex::filters_inside() const { return searcher() != nullptr; }

std::string FaissIndex::search_method() const {
    if (const AnnSearcher* s = searcher()) return s->name();
    return faiss_only_ ? "faiss" : "faiss (" + ann_why_ + ")";
}

void FaissIndex::search(std::int64_t m, const float* q, int k, std::int64_t* ids, float* scores,
                        const AnnFilter& filter) const {
    static_assert(sizeof(idx_t) == sizeof(std::int64_t));
    if (m <= 0) return;
    if (const AnnSearcher* s = searcher()) {
        s->search(m, q, k, filter, ids, scores);
        return;
    }
    index_->search(static_cast<idx_t>(m), q, k, scores, reinterpret_cast<idx_t*>(ids));
}

bool FaissIndex::set_nprobe(int nprobe) {
    auto* ivf = faiss::ivflib::try_extract_index_ivf(index_.get());
    if (ivf) ivf->nprobe = static_cast<std::size_t>(nprobe);
    return ivf != nullptr;
}

std::int64_t FaissIndex::nlist() const {
    const faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(static_cast<const faiss::Index*>(index_.get()));
    return ivf ? static_cast<std::int64_t>(ivf->nlist) : 0;
}

bool FaissIndex::set_ef_search(int ef) {
    faiss::ParameterSpace ps;
    for (const char* name : {"efSearch", "quantizer_efSearch"}) {
        try {
            ps.set_index_parameter(index_.get(), name, ef);
            return true;
        } catch (const faiss::FaissException&) {
        }
    }
    return false;
}

namespace {
// FAISS's serialiser writing through an AtomicFile: every write checked (write_all: "PATH.tmp: write failed: No space
// left on device"), fsynced, renamed into place by commit. faiss::write_index to a path ignored the error of the final
// flush at fclose: a disk filled within its last buffered block left a cut-short index.faiss under a manifest, exit 0
// (a helper's disk-full campaign, session 56); a failure earlier was FAISS's assertion text.
// Small items (an IVF index's list sizes, one at a time) are gathered into 1 MB writes.
struct AtomicFileIOWriter final : faiss::IOWriter {
    AtomicFile& file;
    std::string pending;
    explicit AtomicFileIOWriter(AtomicFile& f) : file(f) { name = f.path(); }
    std::size_t operator()(const void* ptr, std::size_t size, std::size_t nitems) override {
        const std::size_t n = size * nitems;
        if (pending.size() + n > kGather) flush();
        if (n >= kGather) file.write(ptr, n);
        else pending.append(static_cast<const char*>(ptr), n);
        return nitems;
    }
    void flush() {
        file.write(pending.data(), pending.size());
        pending.clear();
    }
    static constexpr std::size_t kGather = std::size_t(1) << 20;
};
}  // namespace

void FaissIndex::save(const std::string& path) const {
    AtomicFile file(path);   // (removes its .tmp unless committed)
    AtomicFileIOWriter writer(file);
    try {
        faiss::write_index(index_.get(), &writer);
        writer.flush();
    } catch (const faiss::FaissException& e) {
        const std::string what = e.what();
        user_error_in(path, "cannot write the index: " + what.substr(0, what.find('\n')));
    }
    file.commit();
}

int FaissIndex::dim() const { return static_cast<int>(index_->d); }
std::int64_t FaissIndex::size() const { return static_cast<std::int64_t>(index_->ntotal); }

}  // namespace retro
