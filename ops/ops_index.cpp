// Exact search in the registry (lib/index/exact_search.h; kernels/exact_search_cuda.cu): the k best
// inner products per query with the same-document filter, on integer-valued vectors so that every
// score is exact in float whatever the summation order (ids then compare exactly, ties by id). The
// reference is a brute-force loop in double; outputs are ids and scores (as doubles). The perf
// shape is retro-bench knn's (1M x 256 base, 4096 queries, k 10; a tenth of it on the CPU).
#include <algorithm>
#include <memory>
#include <random>
#include <sstream>

#include "core/cuda_device.h"
#include "index/exact_search.h"
#include "index/exact_search_cuda.h"
#include "op_registry.h"

namespace retro::ops {
namespace {

class ExactSearchCase : public Case {
public:
    ExactSearchCase(std::int64_t n, std::int64_t m, int d, int k, std::uint64_t seed) : n_(n), m_(m), d_(d), k_(k) {
        std::mt19937 rng(static_cast<unsigned>(seed));
        base_.resize(static_cast<std::size_t>(n * d));
        queries_.resize(static_cast<std::size_t>(m * d));
        for (auto* v : {&base_, &queries_})
            for (auto& e : *v) e = static_cast<float>(static_cast<int>(rng() % 5) - 2);
        docs_.resize(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) docs_[static_cast<std::size_t>(i)] = i / 7;
        qdocs_.resize(static_cast<std::size_t>(m));
        for (std::int64_t i = 0; i < m; ++i) qdocs_[static_cast<std::size_t>(i)] = (i * 13) % (n / 7 + 1);
    }
    std::string shape() const override {
        std::ostringstream o;
        o << "n" << n_ << " m" << m_ << " d" << d_ << " k" << k_;
        return o.str();
    }
    double flops() const override { return 2.0 * double(n_) * double(m_) * d_; }
    double bytes() const override { return 4.0 * double(n_ + m_) * d_; }
    bool supports(Backend b, DType d) const override { return d == DType::F32 || (b == Backend::CPU && d == DType::F64); }
    std::vector<std::string> outputs() const override { return {"ids", "scores"}; }
    std::vector<std::vector<double>> run(Backend b, DType d) override {
        std::vector<std::int64_t> ids(static_cast<std::size_t>(m_ * k_));
        std::vector<float> sc(ids.size());
        if (b == Backend::CPU && d == DType::F64) return oracle();
        if (b == Backend::CPU) {
            ExactSearchOptions o;
            o.k = k_;
            o.query_docs = qdocs_.data();
            o.base_docs = docs_.data();
            exact_search_ip(queries_.data(), m_, base_.data(), n_, d_, o, ids.data(), sc.data());
        } else {
            cuda_require("ops", "the op registry");
            if constexpr (kCudaBuilt) {
                if (!gpu_) {
                    stream_ = std::make_unique<CudaStreamOwner>();
                    gpu_ = CudaExactSearch::upload(base_.data(), n_, d_, docs_.data(), stream_->get());
                }
                gpu_->search(queries_.data(), m_, qdocs_.data(), k_, ids.data(), sc.data(), stream_->get());
            }
        }
        return {std::vector<double>(ids.begin(), ids.end()), std::vector<double>(sc.begin(), sc.end())};
    }

private:
    // every score in double, rows by (score desc, id asc), other documents only, -1 / -inf padding
    std::vector<std::vector<double>> oracle() const {
        std::vector<double> ids, sc;
        for (std::int64_t i = 0; i < m_; ++i) {
            std::vector<std::pair<double, std::int64_t>> all;
            for (std::int64_t j = 0; j < n_; ++j) {
                if (docs_[static_cast<std::size_t>(j)] == qdocs_[static_cast<std::size_t>(i)]) continue;
                double s = 0;
                for (int t = 0; t < d_; ++t)
                    s += double(queries_[static_cast<std::size_t>(i * d_ + t)]) * base_[static_cast<std::size_t>(j * d_ + t)];
                all.push_back({-s, j});
            }
            std::sort(all.begin(), all.end());
            for (int r = 0; r < k_; ++r) {
                const bool have = r < static_cast<int>(all.size());
                ids.push_back(have ? double(all[static_cast<std::size_t>(r)].second) : -1.0);
                sc.push_back(have ? -all[static_cast<std::size_t>(r)].first : -1e300);
            }
        }
        return {ids, sc};
    }
    std::int64_t n_, m_;
    int d_, k_;
    std::vector<float> base_, queries_;
    std::vector<std::int64_t> docs_, qdocs_;
    std::unique_ptr<CudaStreamOwner> stream_;   // gpu_'s stream (declared first: destroyed last)
    std::unique_ptr<CudaExactSearch> gpu_;
};

}  // namespace

void register_index(std::vector<OpInfo>& out) {
    OpInfo op;
    op.name = "index.exact_search";
    op.cpu = "lib/index/exact_search.h";
    op.cuda = "kernels/exact_search_cuda.cu";
    op.tests = {"tests/test_exact_search.cpp: knn: exact search equals the brute-force oracle - ties broken by id",
                "tests/test_exact_search.cpp: knn: CUDA exact search equals the CPU exact search on random data",
                "tests/test_exact_self_join.cpp: exact self-join equals exact search of the base against itself, bit for bit"};
    op.bound_f32 = 0;   // integer data: exact
    op.test_seeds = 2;
    op.test_case = [](std::uint64_t seed) -> std::unique_ptr<Case> {
        return std::make_unique<ExactSearchCase>(seed == 1 ? 500 : 1301, seed == 1 ? 40 : 77, seed == 1 ? 24 : 256, 7, seed);
    };
    op.perf_case = [](Backend b) -> std::unique_ptr<Case> {
        return b == Backend::CUDA ? std::make_unique<ExactSearchCase>(1'000'000, 4096, 256, 10, 1)
                                  : std::make_unique<ExactSearchCase>(100'000, 1024, 256, 10, 1);
    };
    out.push_back(std::move(op));
}

}  // namespace retro::ops
