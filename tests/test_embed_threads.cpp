// The dense embedders do not depend on the thread count: the same packed batch embedded on 1, 2 and 3 threads gives
// the same float bytes (memcmp), for every family the tests hold a tiny model of (BERT, DistilBERT, ELECTRA, RoBERTa,
// XLM-R, MPNet, ModernBERT, T5 v1.0 and v1.1, CLIP's text and image towers) and a wider random BERT (hidden 256, FFN
// 1,024: GEMMs of real depth), mean and CLS pooling, each with the AVX-512 packed layers and with the cblas_sgemm path
// of a CPU without AVX-512 (nn::PackedLinear::set_avx512_allowed(false), the attention's cblas path with it). Until
// 2026-12-04 each thread ran its dense layers over its own range of the batch's rows on both paths, so which rows
// shared a GEMM call followed the thread count, and OpenBLAS's sgemm sums a row by the call's row count: on the cblas
// path CLS pooling (BERT, DistilBERT, ELECTRA, RoBERTa, XLM-R) and CLIP's texts and images gave other bits at 2 and 3
// threads than at 1 (near-tied neighbours could swap between `retro-index --threads 1` and `--threads 2`); the packed
// kernel, whose rows do not depend on the call, was invariant already. Now the cblas path cuts the rows into blocks
// the row count alone fixes, each taken whole by one thread (embed/row_blocks.h).
// The batches: sequences of random lengths (1 to the model's limit, ~2,500-3,500 rows: several 192-row and 128-row
// blocks). ctest runs these cases once more with RETRO_GEMV=blas (the pooled rows' attention through OpenBLAS:
// CMakeLists.txt).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/threads.h"
#include "embed/bert_attention.h"
#include "embed/bert_model.h"
#include "embed/clip_model.h"
#include "embed/packed_batches.h"
#include "embed/t5_model.h"
#include "nn/packed_linear.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace retro;

namespace {

fs::path golden(const std::string& name) { return test::source_dir() / "tests/reference/golden" / name; }

// packed = false: every dense layer built in the scope takes the cblas_sgemm path, and attention its cblas path
struct KernelScope {
    explicit KernelScope(bool packed) {
        nn::PackedLinear::set_avx512_allowed(packed);
        bert_attention_set_fused(packed);
    }
    ~KernelScope() {
        nn::PackedLinear::set_avx512_allowed(true);
        bert_attention_set_fused(true);
    }
};

const char* kernel_name(bool packed) {
    return packed ? (nn::PackedLinear::avx512_supported() ? "AVX-512 packed" : "packed (cblas: no AVX-512F)") : "cblas";
}

// `count` sequences of random lengths in [1, max_len] packed back to back, ids in [min_id, vocab)
struct Batch {
    std::vector<std::int32_t> ids;
    std::vector<std::int64_t> offsets{0};
    int count() const { return static_cast<int>(offsets.size()) - 1; }
};

Batch random_batch(int count, int max_len, int min_id, int vocab, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> length(1, max_len), id(min_id, vocab - 1);
    Batch b;
    for (int s = 0; s < count; ++s) {
        const int len = length(rng);
        for (int t = 0; t < len; ++t) b.ids.push_back(id(rng));
        b.offsets.push_back(static_cast<std::int64_t>(b.ids.size()));
    }
    return b;
}

// embed() at 1, 2 and 3 threads: CHECKs that 2 and 3 give the 1-thread bytes, naming how many floats differ
void check_thread_invariant(const std::string& what, const std::function<std::vector<float>()>& embed) {
    std::vector<float> one;
    {
        test::ThreadCountScope t(1);
        one = embed();
    }
    REQUIRE(!one.empty());
    for (int threads : {2, 3}) {
        test::ThreadCountScope t(threads);
        const std::vector<float> got = embed();
        REQUIRE(got.size() == one.size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &one[i], sizeof(float)) != 0;
        CHECK_MESSAGE(differ == 0, what, ": ", threads, " threads give ", differ, " of ", got.size(),
                      " floats other bits than 1 thread");
    }
}

// A random BertModel folder with GEMMs of real depth (hidden 256, FFN 1,024, 4 heads, 1 layer).
void write_wide_bert(const fs::path& dir) {
    constexpr int V = 120, P = 256, H = 256, I = 1024;
    nlohmann::json c = {{"model_type", "bert"},       {"vocab_size", V},          {"hidden_size", H},
                        {"num_hidden_layers", 1},     {"num_attention_heads", 4}, {"intermediate_size", I},
                        {"max_position_embeddings", P}, {"type_vocab_size", 2},   {"hidden_act", "gelu"},
                        {"layer_norm_eps", 1e-12}};
    test::write_text(dir / "config.json", c.dump(1));
    std::mt19937 rng(48);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::vector<float>> store;
    std::vector<TensorToWrite> tensors;
    auto add = [&](const std::string& name, std::vector<std::int64_t> shape, float scale, float offset) {
        std::int64_t n = 1;
        for (auto d : shape) n *= d;
        std::vector<float> v(static_cast<std::size_t>(n));
        for (auto& x : v) x = offset + scale * normal(rng);
        store.push_back(std::move(v));
        tensors.push_back({name, DType::F32, shape, nullptr});
    };
    add("embeddings.word_embeddings.weight", {V, H}, 0.5f, 0.0f);
    add("embeddings.position_embeddings.weight", {P, H}, 0.5f, 0.0f);
    add("embeddings.token_type_embeddings.weight", {2, H}, 0.5f, 0.0f);
    add("embeddings.LayerNorm.weight", {H}, 0.1f, 1.0f);
    add("embeddings.LayerNorm.bias", {H}, 0.1f, 0.0f);
    const std::string p = "encoder.layer.0.";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
        add(p + m + ".weight", {H, H}, 1.0f / 16, 0.0f);
        add(p + m + ".bias", {H}, 0.1f, 0.0f);
    }
    add(p + "attention.output.LayerNorm.weight", {H}, 0.1f, 1.0f);
    add(p + "attention.output.LayerNorm.bias", {H}, 0.1f, 0.0f);
    add(p + "intermediate.dense.weight", {I, H}, 1.0f / 16, 0.0f);
    add(p + "intermediate.dense.bias", {I}, 0.1f, 0.0f);
    add(p + "output.dense.weight", {H, I}, 1.0f / 32, 0.0f);
    add(p + "output.dense.bias", {H}, 0.1f, 0.0f);
    add(p + "output.LayerNorm.weight", {H}, 0.1f, 1.0f);
    add(p + "output.LayerNorm.bias", {H}, 0.1f, 0.0f);
    for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].data = store[i].data();
    safetensors_save((dir / "model.safetensors").string(), tensors);
}

// A BertModel's mean and CLS embeddings of `b`, each kernel
void check_bert(const std::string& name, const fs::path& dir, int count, unsigned seed) {
    for (bool packed : {true, false}) {
        KernelScope kernel(packed);
        const BertModel m(dir.string());
        const BertConfig& c = m.config();
        const Batch b = random_batch(count, c.max_tokens(), 5, c.vocab_size, seed);
        const std::size_t size = static_cast<std::size_t>(b.count()) * c.hidden;
        const std::string what = name + " (" + kernel_name(packed) + ", " + std::to_string(b.offsets.back()) + " rows)";
        check_thread_invariant(what + " mean", [&] {
            std::vector<float> out(size);
            m.forward_mean(b.ids.data(), b.offsets.data(), b.count(), out.data());
            return out;
        });
        check_thread_invariant(what + " CLS", [&] {
            std::vector<float> out(size);
            m.forward_cls(b.ids.data(), b.offsets.data(), b.count(), out.data());
            return out;
        });
    }
}

}  // namespace

TEST_CASE("embed threads: the BERT family embeds the same bytes on 1, 2 and 3 threads") {
    for (const char* name : {"bert_tiny", "distilbert_tiny", "electra_tiny", "roberta_tiny", "xlmr_tiny", "mpnet_tiny"})
        check_bert(name, golden(name), 45, 1);
    test::TempDir dir("embed-threads");
    write_wide_bert(dir.path);
    check_bert("wide random BERT", dir.path, 24, 2);
}

TEST_CASE("embed threads: ModernBERT embeds the same bytes on 1, 2 and 3 threads") {
    check_bert("modernbert_tiny", golden("modernbert_tiny"), 30, 3);   // up to 505 tokens: the banded local attention too
}

TEST_CASE("embed threads: T5 embeds the same bytes on 1, 2 and 3 threads") {
    for (const char* version : {"v1_0", "v1_1"})
        for (bool packed : {true, false}) {
            KernelScope kernel(packed);
            const T5Model m((golden("t5_tiny") / version).string());
            const Batch b = random_batch(40, 150, 2, m.config().vocab_size, 4);
            check_thread_invariant(std::string("t5 ") + version + " (" + kernel_name(packed) + ") mean", [&] {
                std::vector<float> out(static_cast<std::size_t>(b.count()) * m.config().d_model);
                m.forward_mean(b.ids.data(), b.offsets.data(), b.count(), out.data());
                return out;
            });
        }
}

TEST_CASE("embed threads: CLIP embeds the same text and image bytes on 1, 2 and 3 threads") {
    for (const char* variant : {"tiny", "gelu"})
        for (bool packed : {true, false}) {
            KernelScope kernel(packed);
            const ClipModel m((golden("clip_tiny") / variant).string());
            const ClipConfig& c = m.config();
            const std::string what = std::string("clip ") + variant + " (" + kernel_name(packed) + ")";
            const Batch b = random_batch(70, c.text.max_position, 0, c.text.vocab_size, 5);
            check_thread_invariant(what + " texts", [&] {
                std::vector<float> out(static_cast<std::size_t>(b.count()) * c.projection_dim);
                m.encode_texts(b.ids.data(), b.offsets.data(), b.count(), out.data());
                return out;
            });
            const int images = 150;   // x 17 rows (16 patches and the class token)
            const std::size_t image_floats = static_cast<std::size_t>(c.vision.channels) * c.vision.image_size * c.vision.image_size;
            std::vector<float> pixels(images * image_floats);
            std::mt19937 rng(6);
            std::normal_distribution<float> normal(0.0f, 1.0f);
            for (auto& x : pixels) x = normal(rng);
            check_thread_invariant(what + " images", [&] {
                std::vector<float> out(static_cast<std::size_t>(images) * c.projection_dim);
                m.encode_images(pixels.data(), images, out.data());
                return out;
            });
        }
}

TEST_CASE("embed threads: a sequence embeds the same bytes whatever batch it is packed in") {
    // the GELU of a feed-forward over the call's rows * intermediate floats at once computed the floats of the loop's
    // remainder in other bits: ModernBERT's GLU (intermediate 24 here, not a multiple of the vector width) gave a
    // sequence other embeddings at 3 threads and with another --batch (a helper's campaign, session 56); every
    // activation now runs row by row
    // (the AVX-512 packed kernels only: OpenBLAS's sgemm, the path without them, sums a row by the call's row count,
    // so there the blocks of rows are fixed by the row count and a sequence's bits depend on its batch, as documented)
    if (!nn::PackedLinear::avx512_supported()) {
        MESSAGE("skipped: no AVX-512F (the cblas path is thread-invariant, not batch-invariant)");
        return;
    }
    for (const std::string name : {"modernbert_tiny", "bert_tiny", "mpnet_tiny"}) {
        {
            CAPTURE(name);
            KernelScope kernel(true);
            const BertModel m(golden(name).string());
            const BertConfig& c = m.config();
            const Batch b = random_batch(13, std::min(c.max_tokens(), 60), 5, c.vocab_size, 9);
            const std::size_t H = static_cast<std::size_t>(c.hidden);
            std::vector<float> whole(static_cast<std::size_t>(b.count()) * H);
            m.forward_mean(b.ids.data(), b.offsets.data(), b.count(), whole.data());
            // the same sequences in batches of 1, 2, 3, ... sequences
            int at = 0, size = 1;
            std::int64_t differ = 0;
            while (at < b.count()) {
                const int n = std::min(size++, b.count() - at);
                std::vector<std::int64_t> offsets;
                for (int s = at; s <= at + n; ++s) offsets.push_back(b.offsets[static_cast<std::size_t>(s)] - b.offsets[static_cast<std::size_t>(at)]);
                std::vector<float> part(static_cast<std::size_t>(n) * H);
                m.forward_mean(b.ids.data() + b.offsets[static_cast<std::size_t>(at)], offsets.data(), n, part.data());
                for (std::size_t i = 0; i < part.size(); ++i) differ += part[i] != whole[static_cast<std::size_t>(at) * H + i];
                at += n;
            }
            CHECK(differ == 0);
        }
    }
}

// docs (embed/packed_batches.h): sequences packed longest first, each pooled row L2-normalised back into its own
// position, and an empty sequence a zero row at its own position. A stand-in forward pools a sequence to
// (sum of ids, length, 1); the expected rows are computed here by hand from that, position by position.
TEST_CASE("embed: packed batches put each row at its own position - empty sequences give zero rows in theirs") {
    const std::vector<std::vector<int>> seqs = {{3, 4}, {}, {7}, {}, {1, 2, 6}, {5}};
    const int dim = 3;
    const auto forward = [](const std::int32_t* ids, const std::int64_t* offsets, int count, float* pooled) {
        for (int s = 0; s < count; ++s) {
            float sum = 0;
            for (std::int64_t t = offsets[s]; t < offsets[s + 1]; ++t) sum += static_cast<float>(ids[t]);
            pooled[s * 3 + 0] = sum;
            pooled[s * 3 + 1] = static_cast<float>(offsets[s + 1] - offsets[s]);
            pooled[s * 3 + 2] = 1.0f;
        }
    };
    for (const int batch : {1, 2, 4, 8}) {
        CAPTURE(batch);
        std::vector<float> out(seqs.size() * dim, std::nanf(""));
        embed_packed_batches(seqs, batch, dim, forward, out.data());
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            CAPTURE(i);
            float sum = 0;
            for (int id : seqs[i]) sum += static_cast<float>(id);
            const float len = static_cast<float>(seqs[i].size());
            const double norm = std::sqrt(double(sum) * sum + double(len) * len + 1.0);
            const float want[3] = {seqs[i].empty() ? 0.0f : static_cast<float>(sum / norm),
                                   seqs[i].empty() ? 0.0f : static_cast<float>(len / norm),
                                   seqs[i].empty() ? 0.0f : static_cast<float>(1.0 / norm)};
            for (int j = 0; j < dim; ++j) CHECK(out[i * dim + j] == doctest::Approx(want[j]).epsilon(1e-6));
        }
    }
}
