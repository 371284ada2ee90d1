// The BERT encoder in the registry (lib/embed/bert_model.h; kernels/bert_cuda.cu): mean-pooled
// last hidden states of random WordPiece ids through the tiny random BertModel of the golden files
// (tests/reference/golden/bert_tiny; installed: share/retrokit/bert_tiny). BertModel has no double path: the CPU fp32 forward is the
// reference the GPU is compared with; both are held to Hugging Face transformers by tests/test_bert.cpp.
// The perf shape is 64 sequences of 64 tokens.
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda_device.h"
#include "core/error.h"
#include "core/shipped_data.h"
#include "embed/bert_cuda.h"
#include "embed/bert_model.h"
#include "op_registry.h"

namespace retro::ops {
namespace {

// The tiny BERT's folder: installed beside the tools (share/retrokit/bert_tiny) or the source tree's golden files.
std::string bert_tiny_folder() {
    const std::vector<std::filesystem::path> folders = shipped_data_folders(ShippedData::kBertTiny);
    if (folders.empty())
        user_error_in("embed.bert_encoder",
                      "the tiny BERT it times (share/retrokit/bert_tiny, or tests/reference/golden/bert_tiny in the "
                      "source tree) is not there",
                      "install RetroKit (make install), or run retro-bench from its build folder beside the source tree");
    return folders.front().string();
}

class BertCase : public Case {
public:
    BertCase(int count, int len, std::uint64_t seed)
        : model_(bert_tiny_folder()), count_(count) {
        std::mt19937 rng(static_cast<unsigned>(seed));
        // ordinary WordPiece ids of the tiny model's vocabulary (401 ids): past [CLS] 101 / [SEP] 102
        const auto first_word = 103u, words = static_cast<unsigned>(model_.config().vocab_size) - first_word;
        offsets_.push_back(0);
        for (int s = 0; s < count; ++s) {
            const int n = 2 + static_cast<int>(rng() % static_cast<unsigned>(len - 1));
            ids_.push_back(101);   // [CLS]
            for (int i = 1; i < n - 1; ++i) ids_.push_back(static_cast<std::int32_t>(first_word + rng() % words));
            ids_.push_back(102);   // [SEP]
            offsets_.push_back(static_cast<std::int64_t>(ids_.size()));
        }
    }
    std::string shape() const override {
        std::ostringstream o;
        o << "sequences " << count_ << " tokens " << ids_.size() << " hidden " << model_.config().hidden;
        return o.str();
    }
    double flops() const override {   // dense layers: 2 * tokens * (4 H^2 + 2 H I) per layer
        const auto& c = model_.config();
        return 2.0 * double(ids_.size()) * double(c.layers) * (4.0 * c.hidden * c.hidden + 2.0 * c.hidden * c.intermediate);
    }
    double bytes() const override { return 4.0 * double(ids_.size()) * model_.config().hidden * 2; }
    bool supports(Backend, DType d) const override { return d == DType::F32; }
    std::vector<std::string> outputs() const override { return {"mean"}; }
    std::vector<std::vector<double>> run(Backend b, DType) override {
        std::vector<float> out(static_cast<std::size_t>(count_) * static_cast<std::size_t>(model_.config().hidden));
        if (b == Backend::CPU) {
            model_.forward_mean(ids_.data(), offsets_.data(), count_, out.data());
        } else {
            cuda_require("ops", "the op registry");
            if constexpr (kCudaBuilt) {
                if (!gpu_) {
                    stream_ = std::make_unique<CudaStreamOwner>();
                    gpu_ = CudaBert::upload(model_, stream_->get());
                }
                gpu_->forward_mean(ids_.data(), offsets_.data(), count_, out.data(), stream_->get());
            }
        }
        return {std::vector<double>(out.begin(), out.end())};
    }
    std::vector<std::vector<double>> reference(DType) override { return run(Backend::CPU, DType::F32); }

private:
    BertModel model_;
    int count_;
    std::vector<std::int32_t> ids_;
    std::vector<std::int64_t> offsets_;
    std::unique_ptr<CudaStreamOwner> stream_;   // gpu_'s stream (declared first: destroyed last)
    std::unique_ptr<CudaBert> gpu_;
};

}  // namespace

void register_embed(std::vector<OpInfo>& out) {
    OpInfo op;
    op.name = "embed.bert_encoder";
    op.cpu = "lib/embed/bert_model.h";
    op.cuda = "kernels/bert_cuda.cu";
    op.tests = {"tests/test_bert.cpp: bert: embeddings of a tiny random BertModel match transformers (cosine >= 0.99999)",
                "tests/test_bert.cpp: bert: the CUDA encoder (--device cuda) matches transformers on the same golden files"};
    op.bound_f32 = 1e-5;   // GPU (cuBLAS fp32, pedantic) against the CPU's fp32: held on an H200 (2026-11-26)
    op.test_case = [](std::uint64_t seed) -> std::unique_ptr<Case> { return std::make_unique<BertCase>(5, 20, seed); };
    op.perf_case = [](Backend) -> std::unique_ptr<Case> { return std::make_unique<BertCase>(64, 64, 1); };
    out.push_back(std::move(op));
}

}  // namespace retro::ops
