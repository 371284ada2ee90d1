// Generation: the KV-cached decoder equals a full recompute (RetroModel::forward) at every step, across
// chunk boundaries, with a prompt that ends mid-chunk and two sequences decoded together; the sampler's
// filters equal their brute-force definitions and its draws pass a chi-square test; retro-generate end to
// end (one seed gives one text, batch mode equals single prompts, neighbours shown) and its bad inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/stderr_capture.h"
#include "core/cuda_device.h"
#include "generate/backend_decoder.h"
#include "nn/decode_program.h"
#include "generate/cached_decoder.h"
#include "generate/sampler.h"
#include "model/params.h"
#include "nn/nn_backend_cuda.h"
#include "nn/nn_backend_host.h"
#include "nn/nn_backend_profiler.h"
#include "sampling_boundary.h"
#include "test_decode_fixtures.h"
#include "test_model_fixtures.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

using test::decode_config;
using test::decode_logits;
using test::rel_err;
using test::same_width_decode_config;

namespace {

// Logits of the full forward at position n-1 of ids[0..n) with the first floor(n/cs) chunks' neighbours.
template <typename T>
std::vector<T> full_logits(RetroModel<T>& model, const std::vector<std::int32_t>& ids, std::int64_t n,
                           const std::vector<std::int32_t>& retrieved, bool retrieval, std::int64_t row) {
    const auto& c = model.config();
    RetroBatch b;
    b.B = 1;
    b.n = n;
    b.seq.assign(ids.begin(), ids.begin() + n);
    b.seq.push_back(1);   // a label for the last position (unused)
    if (retrieval) {
        b.k = c.num_neighbours;
        b.r = c.retrieved_len();
        b.retrieved.assign(retrieved.begin(), retrieved.begin() + (n / c.chunk_size) * b.k * b.r);
    }
    model.forward(b);
    const auto& L = model.logits();
    return std::vector<T>(L.begin() + row * c.num_tokens, L.begin() + (row + 1) * c.num_tokens);
}

// Two sequences decoded together (prompts of 6 and 3 tokens, cs = 4), one token per step up to 23 and 17
// tokens; every step's logits against the full forward of that sequence alone. `make(model, retrieval)` gives the
// decoder under test (CachedDecoder, or BackendDecoder on a backend); `done(decoder)` runs at the end.
template <typename T, typename Make, typename Done>
void check_cached_equals_full(bool retrieval, double tol, Make make, const RetroConfig& c, Done done) {
    RetroModel<T> model(c);
    params_init(model.params(), model.layout(), 7);
    test::randomise_copy_head(model.params(), model.layout(), 7);   // config copy_head: gates that move the logits
    RetroModel<T> full(c);
    full.params() = model.params();
    std::mt19937 rng(11);
    const std::int64_t cs = c.chunk_size;
    const std::vector<std::int64_t> prompt = {6, 3}, end = {23, 17};
    std::vector<std::vector<std::int32_t>> ids(2), nb(2);
    for (int s = 0; s < 2; s++) {
        for (std::int64_t i = 0; i < end[s]; i++) ids[s].push_back(1 + static_cast<std::int32_t>(rng() % (c.num_tokens - 1)));
        for (std::int64_t u = 0; u < end[s] / cs; u++) {
            auto v = test::random_neighbours(c, rng);
            nb[s].insert(nb[s].end(), v.begin(), v.end());
        }
    }
    const std::int64_t KR = c.num_neighbours * c.retrieved_len();
    auto dec_ptr = make(model, retrieval);
    auto& dec = *dec_ptr;
    std::vector<std::int64_t> len = {0, 0};
    auto feed_to = [&](const std::vector<std::int64_t>& target, bool all) {
        std::vector<std::vector<std::int32_t>> feed(2);
        for (int s = 0; s < 2; s++) {
            if (retrieval)
                while (dec.neighbour_chunks(s) < target[s] / cs) dec.add_neighbours(s, nb[s].data() + dec.neighbour_chunks(s) * KR);
            feed[s].assign(ids[s].begin() + len[s], ids[s].begin() + target[s]);
        }
        dec.step(feed, all);
        for (int s = 0; s < 2; s++) len[s] = target[s];
    };
    // the prompts in one step, every row's logits checked
    feed_to(prompt, true);
    for (int s = 0; s < 2; s++) {
        const std::int64_t first_row = s == 0 ? 0 : prompt[0];
        for (std::int64_t p = 0; p < prompt[s]; p++) {
            INFO("prompt row s=" << s << " p=" << p);
            auto ref = full_logits(full, ids[s], prompt[s], nb[s], retrieval, p);
            CHECK(rel_err(dec.logits().data() + (first_row + p) * c.num_tokens, ref) <= tol);
        }
    }
    // then one token per step (sequence 1 stops earlier: it then sits out the steps)
    while (len[0] < end[0]) {
        std::vector<std::int64_t> target = {len[0] + 1, std::min(len[1] + 1, end[1])};
        const bool moves1 = target[1] > len[1];
        feed_to(target, false);
        for (int s = 0; s < 2; s++) {
            if (s == 1 && !moves1) {
                CHECK(dec.last_row(1) == -1);
                continue;
            }
            INFO("step s=" << s << " n=" << len[s]);
            auto ref = full_logits(full, ids[s], len[s], nb[s], retrieval, len[s] - 1);
            CHECK(rel_err(dec.logits().data() + dec.last_row(s) * c.num_tokens, ref) <= tol);
        }
    }
    CHECK(dec.length(0) == end[0]);
    CHECK(dec.length(1) == end[1]);
    done(dec);
}

template <typename T, typename Make>
void check_cached_equals_full(bool retrieval, double tol, Make make, const RetroConfig& c = decode_config()) {
    check_cached_equals_full<T>(retrieval, tol, make, c, [](const auto&) {});
}

template <typename T>
void check_cached_equals_full(bool retrieval, double tol) {
    check_cached_equals_full<T>(retrieval, tol, [](const RetroModel<T>& m, bool ret) {
        return std::make_unique<CachedDecoder<T>>(m, 2, ret);
    });
}

// The same check for BackendDecoder (generate/backend_decoder.h) on `be`, the weights uploaded there.
// With `graphs` the decode steps run as captured graphs (BackendDecoder::set_graphs): the same logits, and graphs were
// captured (one per chunk read, and again when a sequence stops) and replayed.
// With a decode program mode (nn/decode_program.h) the graph-eligible steps run from a recording where it takes them.
void check_backend_decoder_equals_full(nn::NnBackend& be, bool retrieval, double tol,
                                       const RetroConfig& c = decode_config(), bool graphs = false,
                                       nn::DecodeProgramMode program = nn::DecodeProgramMode::off) {
    std::unique_ptr<nn::BackendBuffer> weights;
    check_cached_equals_full<float>(
        retrieval, tol,
        [&](const RetroModel<float>& m, bool ret) {
            weights = std::make_unique<nn::BackendBuffer>(be, m.params().size() * sizeof(float));
            be.upload(weights->get(), m.params().data(), m.params().size() * sizeof(float));
            auto d = std::make_unique<BackendDecoder>(m.config(), weights->f(), be, 2, ret);
            d->set_graphs(graphs);
            d->set_decode_program(program);
            return d;
        },
        c,
        [&](const BackendDecoder& d) {
            if (program != nn::DecodeProgramMode::off) {
                MESSAGE("decode programs: " << d.program_steps() << " steps (" << d.fused_steps() << " fused), "
                        << d.graph_launches() << " graph launches; last fallback: " << d.program_fallback());
                if (program == nn::DecodeProgramMode::interpret && !c.copy_head) {
                    CHECK(d.program_steps() > 0);
                    CHECK(d.program_ops() > 0);
                    CHECK(d.program_barriers() < d.program_ops());
                    CHECK(d.graph_launches() == 0);   // every graph-eligible step recordable, CCA's zero rows too
                }
                if (c.copy_head) CHECK(d.program_steps() == 0);   // the copy head is not recordable
                return;
            }
            if (!graphs) {
                CHECK(d.graph_launches() == 0);
                return;
            }
            MESSAGE("graphs: " << d.graph_captures() << " captured, " << d.graph_launches() << " launched");
            CHECK(d.graph_captures() >= 2);
            CHECK(d.graph_launches() > d.graph_captures());
        });
}

RetroConfig copy_head_decode_config() {
    RetroConfig c = decode_config();
    c.copy_head = true;
    c.num_tokens = 6;   // a small vocabulary: the history matches the neighbours often, in several buckets
    return c;
}


}  // namespace

TEST_CASE("generate: cached decoding equals a full recompute at every step (fp32 1e-5)") {
    check_cached_equals_full<float>(true, 1e-5);
}

TEST_CASE("generate: cached decoding equals a full recompute without retrieval (fp32 1e-5)") {
    check_cached_equals_full<float>(false, 1e-5);
}

TEST_CASE("generate: cached decoding equals a full recompute in double (1e-12)") {
    check_cached_equals_full<double>(true, 1e-12);
}

TEST_CASE("generate: the copy head's cached logits equal a full recompute") {
    const RetroConfig c = copy_head_decode_config();
    auto cached = [](const RetroModel<double>& m, bool ret) { return std::make_unique<CachedDecoder<double>>(m, 2, ret); };
    check_cached_equals_full<double>(true, 1e-12, cached, c);
    check_cached_equals_full<double>(false, 1e-12, cached, c);
    nn::HostNnBackend be;   // the backend decoder (--device cuda's code) with the head, on the host's ops
    check_backend_decoder_equals_full(be, true, 1e-5, c);
}

TEST_CASE("generate: the backend decoder (host backend) equals a full recompute at every step (fp32 1e-5)") {
    nn::HostNnBackend be;
    check_backend_decoder_equals_full(be, true, 1e-5);
    check_backend_decoder_equals_full(be, false, 1e-5);
    check_backend_decoder_equals_full(be, true, 1e-5, same_width_decode_config());
}

TEST_CASE("generate: the backend decoder's decode steps as graphs (host backend's recorder) equal a full recompute") {
    // the recorder replays each op with the arguments it was captured with, and refuses uploads while capturing: a
    // value of the step left on the host, or an upload inside the step, fails here as it would on the GPU
    nn::HostNnBackend be;
    check_backend_decoder_equals_full(be, true, 1e-5, decode_config(), true);
    check_backend_decoder_equals_full(be, false, 1e-5, decode_config(), true);
    check_backend_decoder_equals_full(be, true, 1e-5, copy_head_decode_config(), true);
    check_backend_decoder_equals_full(be, true, 1e-5, same_width_decode_config(), true);
}

TEST_CASE("generate: the backend decoder on a CUDA device equals a full recompute at every step (fp32 1e-5)") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        check_backend_decoder_equals_full(*be, true, 1e-5);
        check_backend_decoder_equals_full(*be, false, 1e-5);
        check_backend_decoder_equals_full(*be, true, 1e-5, copy_head_decode_config());
        check_backend_decoder_equals_full(*be, true, 1e-5, decode_config(), true);   // CUDA graphs
        check_backend_decoder_equals_full(*be, false, 1e-5, decode_config(), true);
        check_backend_decoder_equals_full(*be, true, 1e-5, copy_head_decode_config(), true);
        check_backend_decoder_equals_full(*be, true, 1e-5, same_width_decode_config(), true);
    }
}

TEST_CASE("generate: the backend decoder's steps as graphs give the eager steps' bits (host backend)") {
    // the recorder replays each captured op with its arguments: nothing of a step may differ from running it
    const RetroConfig c = decode_config();
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 3);
    nn::HostNnBackend be;
    const auto eager = decode_logits(be, c, model, false), graphs = decode_logits(be, c, model, true);
    REQUIRE(eager.size() == graphs.size());
    CHECK(std::memcmp(eager.data(), graphs.data(), eager.size() * sizeof(float)) == 0);
}

TEST_CASE("generate: the backend decoder's steps from a recorded decode program give the eager steps' bits (host backend)") {
    // run_step recorded into a DecodeProgram (nn/decode_program.h) and interpreted op by op: the same ops with the
    // same arguments, so the same bits; the steps before the first chunk is read (CCA's zero rows: not recordable)
    // fall back to a captured graph. `fused` on the host backend (no fused form) falls back to graphs throughout.
    const RetroConfig c = decode_config();
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 3);
    nn::HostNnBackend be;
    const auto eager = decode_logits(be, c, model, false);
    std::int64_t steps = 0, fused = 0;
    const auto interpreted = decode_logits(be, c, model, true, nn::DecodeProgramMode::interpret, &steps, &fused);
    REQUIRE(eager.size() == interpreted.size());
    CHECK(std::memcmp(eager.data(), interpreted.data(), eager.size() * sizeof(float)) == 0);
    CHECK(steps > 0);
    CHECK(fused == 0);
    const auto fallback = decode_logits(be, c, model, true, nn::DecodeProgramMode::fused, &steps, &fused);
    CHECK(std::memcmp(eager.data(), fallback.data(), eager.size() * sizeof(float)) == 0);
    CHECK(steps == 0);
    // each replayed step launched twice more (BackendDecoder::time_replays, retro-bench's replay timing): no bit moves
    const auto replayed = decode_logits(be, c, model, true, nn::DecodeProgramMode::off, nullptr, nullptr, 1, 2);
    CHECK(std::memcmp(eager.data(), replayed.data(), eager.size() * sizeof(float)) == 0);
    const auto replayed_program =
        decode_logits(be, c, model, true, nn::DecodeProgramMode::interpret, nullptr, nullptr, 1, 2);
    CHECK(std::memcmp(eager.data(), replayed_program.data(), eager.size() * sizeof(float)) == 0);
    // two sequences a step (two rows: the norm apart from the q, k, v projections, attention over two caches)
    const auto eager2 = decode_logits(be, c, model, false, nn::DecodeProgramMode::off, nullptr, nullptr, 2);
    const auto interpreted2 = decode_logits(be, c, model, true, nn::DecodeProgramMode::interpret, &steps, &fused, 2);
    REQUIRE(eager2.size() == interpreted2.size());
    CHECK(std::memcmp(eager2.data(), interpreted2.data(), eager2.size() * sizeof(float)) == 0);
    CHECK(steps > 0);
    // two sequences (two rows a step: the norm apart from the projections), one sitting out at the end
    check_backend_decoder_equals_full(be, true, 1e-5, decode_config(), true, nn::DecodeProgramMode::interpret);
    check_backend_decoder_equals_full(be, false, 1e-5, decode_config(), true, nn::DecodeProgramMode::interpret);
    check_backend_decoder_equals_full(be, true, 1e-5, same_width_decode_config(), true,
                                      nn::DecodeProgramMode::interpret);
    check_backend_decoder_equals_full(be, true, 1e-5, copy_head_decode_config(), true,
                                      nn::DecodeProgramMode::interpret);
}

namespace {
// The host backend with a fused decode step its "device" refuses to launch, as cudaLaunchCooperativeKernel refuses a
// grid larger than the device holds at once: launch_graph throws nn::FusedLaunchRefused, nothing run; after that it
// fuses nothing more, naming the refusal (NnBackend's contract, as CudaNnBackend keeps it).
class RefusingFusedBackend final : public nn::HostNnBackend {
public:
    int made = 0, refused = 0;
    std::string refusal;
    struct Step final : nn::BackendGraph {};
    std::unique_ptr<nn::BackendGraph> fuse_decode_program(const nn::DecodeProgram&, std::string* why) override {
        if (!refusal.empty()) {
            if (why) *why = refusal;
            return nullptr;
        }
        made++;
        if (why) why->clear();
        return std::make_unique<Step>();
    }
    void launch_graph(const nn::BackendGraph& g) override {
        if (!dynamic_cast<const Step*>(&g)) return HostNnBackend::launch_graph(g);
        refused++;
        refusal = "the device refused a fused step's launch: cudaLaunchCooperativeKernel(fused decode step): "
                  "cudaErrorCooperativeLaunchTooLarge";
        throw nn::FusedLaunchRefused(refusal);
    }
};
}  // namespace

TEST_CASE("generate: a fused step whose launch the device refuses is decoded as captured graphs from then on, the same bits") {
    const RetroConfig c = decode_config();
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 3);
    nn::HostNnBackend host;
    const auto graphs = decode_logits(host, c, model, true, nn::DecodeProgramMode::off);
    RefusingFusedBackend be;
    std::int64_t steps = -1, fused = -1;
    std::vector<float> fallback, next_decoder;
    const std::string err = capture_stderr([&] {
        fallback = decode_logits(be, c, model, true, nn::DecodeProgramMode::fused, &steps, &fused);
        // a second decoder on the same backend (retro-generate's next batch group): graphs, no second warning
        next_decoder = decode_logits(be, c, model, true, nn::DecodeProgramMode::fused);
    });
    REQUIRE(fallback.size() == graphs.size());
    CHECK(std::memcmp(graphs.data(), fallback.data(), graphs.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(graphs.data(), next_decoder.data(), graphs.size() * sizeof(float)) == 0);
    CHECK(be.made == 1);      // fused once, refused once: never fused again
    CHECK(be.refused == 1);
    CHECK(steps == 0);
    CHECK(fused == 0);
    const std::string warning = "the device refused a fused step's launch: cudaLaunchCooperativeKernel";
    CHECK(err.find(warning + "(fused decode step): cudaErrorCooperativeLaunchTooLarge; decoding on with captured graphs") !=
          std::string::npos);
    CHECK(err.find(warning) == err.rfind(warning));   // said once
    // the refusal is fused mode's: a decoder interpreting recordings (no cooperative launch) on it still runs them
    const auto interpreted = decode_logits(be, c, model, true, nn::DecodeProgramMode::interpret, &steps, &fused);
    CHECK(std::memcmp(graphs.data(), interpreted.data(), graphs.size() * sizeof(float)) == 0);
    CHECK(steps > 0);
}

TEST_CASE("generate: the decode program's recorder lists a step's ops and refuses what a fused step cannot run") {
    nn::DecodeProgramRecorder rec;
    float a[4] = {}, b[4] = {};
    rec.linear_forward(a, b, b, nullptr, 1, 4, 4);
    rec.scatter_rows(a, b, nullptr, 1, 4);
    CHECK(rec.ok());
    REQUIRE(rec.program.ops.size() == 2);
    CHECK(rec.program.ops[0].kind == nn::DecodeOpKind::linear);
    CHECK(rec.program.ops[0].out == a);
    CHECK(rec.program.ops[1].kind == nn::DecodeOpKind::scatter_rows);
    rec.gather_rows(a, b, nullptr, 1, 4);
    rec.copy(a, b, 16);
    CHECK_FALSE(rec.ok());
    CHECK(rec.why() == "gather_rows");   // the first refusal
    CHECK(nn::decode_program_mode_requested(nullptr) == nn::DecodeProgramMode::off);
    CHECK(nn::decode_program_mode_requested("interpret") == nn::DecodeProgramMode::interpret);
    CHECK(nn::decode_program_mode_requested("fused") == nn::DecodeProgramMode::fused);
    CHECK_THROWS_AS(nn::decode_program_mode_requested("fast"), UserError);
}

TEST_CASE("generate: the fused decode step waits at a barrier only where an op touches what its phase wrote") {
    // nn::decode_barriers on hand-made programs over one float buffer (addresses only; nothing runs)
    std::vector<float> mem(4096);
    float* m = mem.data();
    float *x = m, *xn = m + 64, *norm = m + 128, *q = m + 256, *kr = q + 2 * 16, *vr = q + 4 * 16, *o = m + 512,
          *x1 = m + 640, *y = m + 768;
    const float* W = m + 2048;   // (weights: never written)
    const nn::NnBackend::LinearRotary rot{};
    nn::DecodeProgramRecorder rec;
    // a two-row step's self-attention block: the norm apart, then q, k and v of the same normalised rows
    rec.rmsnorm_forward(xn, norm, x, W, 2, 32);
    rec.linear_rotary_forward(q, nullptr, nullptr, xn, nullptr, W, nullptr, 2, 32, 16, rot);
    rec.linear_rotary_forward(kr, nullptr, nullptr, xn, nullptr, W, nullptr, 2, 32, 16, rot);
    rec.linear_forward(vr, xn, W, nullptr, 2, 32, 16);
    rec.attention_decode(o, q, {}, nullptr, nullptr, 2, 1, 16);
    rec.linear_residual_forward(x1, y, x, o, W, nullptr, 2, 16, 32);
    rec.scatter_rows(m + 3000, x1, nullptr, 2, 32);
    rec.linear_forward(q, x1, W, nullptr, 2, 32, 16);   // after an opaque op: waits though it reads only x1
    rec.linear_forward(o, x1, W, nullptr, 2, 32, 16);   // the same input, another output: joins
    rec.linear_forward(x1, y, W, nullptr, 2, 16, 32);   // writes what its phase reads: waits
    rec.linear_forward(y + 64, xn, W, nullptr, 2, 32, 16);   // past what its phase reads of y: joins
    rec.linear_forward(y + 64, xn, W, nullptr, 2, 32, 16);   // writes what its phase wrote: waits
    REQUIRE(rec.ok());
    const std::vector<bool> want = {true, true, false, false, true, true, true, true, false, true, false, true};
    const auto got = nn::decode_barriers(rec.program);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); i++) {
        CAPTURE(i);
        CHECK(got[i] == want[i]);
    }
}

TEST_CASE("generate: on a CUDA device, the fused decode step gives the launched ops' bits") {
    // the fused step (one cooperative kernel, kernels/nn_decode_program_cuda.cu) runs each recorded op's own device
    // code between grid-wide barriers: its logits must be the captured graphs' bits, token for token, through chunk
    // boundaries (the encoder's eager steps between fused ones) and the CCA layers
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        for (const RetroConfig& c : {decode_config(), same_width_decode_config()}) {
            RetroModel<float> model(c);
            params_init(model.params(), model.layout(), 3);
            CudaStreamOwner stream;
            auto be = nn::cuda_nn_backend(stream.get());
            for (const std::int64_t sequences : {1, 2}) {   // one row a step (the fused q|k|v), two (the norm apart)
                CAPTURE(sequences);
                const auto graphs = decode_logits(*be, c, model, true, nn::DecodeProgramMode::off, nullptr, nullptr,
                                                  sequences);
                std::int64_t steps = 0, fused = 0;
                // (each fused step launched twice more, as retro-bench's replay timing does: no bit may move)
                const auto one_kernel = decode_logits(*be, c, model, true, nn::DecodeProgramMode::fused, &steps, &fused,
                                                      sequences, 2);
                MESSAGE("fused decode steps: " << fused << " of " << steps << " recorded");
                CHECK(fused > 0);
                REQUIRE(graphs.size() == one_kernel.size());
                CHECK(std::memcmp(graphs.data(), one_kernel.data(), graphs.size() * sizeof(float)) == 0);
            }
            check_backend_decoder_equals_full(*be, true, 1e-5, c, true, nn::DecodeProgramMode::fused);
        }
    }
}

TEST_CASE("generate: on a CUDA device, every fused decode step kernel (8 rows, one block an SM, a request past the occupancy) gives the launched ops' bits") {
    // the test above runs decode_program_k<1,2> and <2,2> (1 and 2 rows, two blocks an SM); these are the other
    // instantiations (kernels/nn_decode_program_cuda.cu): 8 rows (the largest norm shared memory, the most registers),
    // the one-row one-block-an-SM kernel (RETRO_DECODE_BLOCKS_PER_SM=1, its own code), and 32 blocks an SM asked for
    // (cut to what fits by the occupancy: a grid past co-residency would hang at its first barrier, or be refused).
    // Kept apart from the test above, which the GPU checks' sanitizer steps run (a review, session 58).
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        const RetroConfig c = decode_config();
        RetroModel<float> model(c);
        params_init(model.params(), model.layout(), 3);
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        const std::pair<const char*, std::int64_t> runs[] = {{nullptr, 8}, {"1", 1}, {"1", 2}, {"32", 1}, {"32", 8}};
        for (const auto& [per_sm, sequences] : runs) {
            CAPTURE(sequences);
            CAPTURE((per_sm ? per_sm : "default"));
            test::ScopedEnv blocks("RETRO_DECODE_BLOCKS_PER_SM", per_sm ? std::optional<std::string>(per_sm) : std::nullopt);
            const auto graphs = decode_logits(*be, c, model, true, nn::DecodeProgramMode::off, nullptr, nullptr, sequences);
            std::int64_t steps = 0, fused = 0;
            const auto one_kernel =
                decode_logits(*be, c, model, true, nn::DecodeProgramMode::fused, &steps, &fused, sequences, 1);
            MESSAGE("fused decode steps: " << fused << " of " << steps << " recorded");
            CHECK(fused > 0);
            REQUIRE(graphs.size() == one_kernel.size());
            CHECK(std::memcmp(graphs.data(), one_kernel.data(), graphs.size() * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("generate: on a CUDA device, the decode kernels as programmatic dependent launches give RETRO_PDL=0's bits") {
    // PDL (sm_90+) lets a decode kernel start while the one before it finishes and wait inside for its results
    // (griddepcontrol.wait): a kernel that read a predecessor's output before its wait would see stale values here,
    // eager or inside a captured graph, while the ordinary launches (RETRO_PDL=0, read at the backend's construction)
    // cannot
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        const RetroConfig c = decode_config();
        RetroModel<float> model(c);
        params_init(model.params(), model.layout(), 3);
        CudaStreamOwner s1, s2;
        std::unique_ptr<nn::NnBackend> pdl, plain;
        {   // (RETRO_PDL is read at construction; a RETRO_PDL=0 the run was started with must not make both plain)
            test::ScopedEnv on("RETRO_PDL", std::nullopt);
            pdl = nn::cuda_nn_backend(s1.get());
        }
        {
            test::ScopedEnv off("RETRO_PDL", "0");
            plain = nn::cuda_nn_backend(s2.get());
        }
        MESSAGE("programmatic dependent launches take effect on sm_90 and later only; device: " << cuda_device_name());
        for (const bool graphs : {false, true}) {
            CAPTURE(graphs);
            const auto a = decode_logits(*pdl, c, model, graphs), b = decode_logits(*plain, c, model, graphs);
            REQUIRE(a.size() == b.size());
            CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("generate: the backend decoder refuses a backend in the fused attention mode, whose stash its buffers do not fit") {
    // its step buffers hold the probabilities; the CUDA backend's fused stash can be larger (few keys with the null
    // column: NnBackend::attention_saved_floats), so a step in that mode is refused, never written past
    const RetroConfig c = decode_config();
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 3);
    nn::HostNnBackend be;
    const nn::BackendBuffer weights = test::upload_weights(be, model);
    BackendDecoder dec(c, weights.f(), be, 1, true);
    be.set_fused_attention(true);
    CHECK_THROWS_WITH(dec.step({{1, 5, 9}}), doctest::Contains("fused attention mode"));
    be.set_fused_attention(false);
    dec.step({{1, 5, 9}});
    CHECK(dec.length(0) == 3);
}

TEST_CASE("generate: the backend decoder draws the next tokens on its backend as the host's sampler does") {
    // BackendDecoder::sample_last over the host backend (NnBackend::sample_rows' definition), before and after the
    // logits are downloaded (logits() fetches them lazily): the same ids as sample_row on those logits
    const RetroConfig c = decode_config();
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 3);
    nn::HostNnBackend be;
    const nn::BackendBuffer weights = test::upload_weights(be, model);
    BackendDecoder dec(c, weights.f(), be, 2, false);
    dec.step({{1, 5, 9}, {2, 7}});
    std::vector<nn::SamplingParams> settings(4);
    settings[0].greedy = true;
    settings[2].top_k = 3;
    settings[3].top_p = 0.6;
    settings[3].temperature = 0.7;
    const std::vector<double> u = {0.31, 0.87};
    // and with a vocabulary below the model's (a smaller tokenizer): sample_row over each row's first `vocab` logits
    for (const std::int64_t vocab : {c.num_tokens, std::int64_t{7}}) {
        CAPTURE(vocab);
        for (int pass = 0; pass < 2; pass++) {   // pass 0: nothing downloaded yet; pass 1: after logits()
            for (const auto& o : settings) {
                std::vector<std::int32_t> ids;
                dec.sample_last(o, {1, 0}, u, ids, vocab);
                REQUIRE(ids.size() == 2);
                for (int j = 0; j < 2; j++) {
                    const std::int64_t s = 1 - j;
                    CHECK(ids[static_cast<std::size_t>(j)] < vocab);
                    CHECK(ids[static_cast<std::size_t>(j)] ==
                          nn::sample_row(dec.logits().data() + dec.last_row(s) * c.num_tokens, vocab, o,
                                         u[static_cast<std::size_t>(j)]));
                }
            }
        }
    }
    std::vector<std::int32_t> ids;
    dec.step({{4}, {}});   // sequence 1 did not advance: it has no row to draw from
    CHECK_THROWS(dec.sample_last(settings[1], {1}, u, ids));
}

TEST_CASE("generate: the CUDA backend's sample_rows draws the reference's ids (greedy exactly and draws away from boundaries) - -1 for a non-finite row") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        std::mt19937_64 gen(11);
        std::normal_distribution<float> normal(0.0f, 4.0f);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        for (const std::int64_t V : {std::int64_t{1}, std::int64_t{7}, std::int64_t{8000}, std::int64_t{32000}}) {
            for (const bool ties : {false, true}) {
                const std::int64_t R = 4;
                std::vector<float> logits(static_cast<std::size_t>(R * V));
                for (auto& z : logits) z = ties ? std::round(normal(gen)) : normal(gen);
                nn::BackendBuffer dev(*be, logits.size() * sizeof(float));
                be->upload(dev.get(), logits.data(), logits.size() * sizeof(float));
                const std::vector<std::int64_t> rows = {3, 1, 0, 2};
                std::vector<nn::SamplingParams> settings(6);
                settings[0].greedy = true;
                settings[2].temperature = 0.5;
                settings[3].top_k = 40;
                settings[4].top_p = 0.9;
                settings[5].top_k = 200, settings[5].top_p = 0.7, settings[5].temperature = 1.3;
                // D: the ids drawn, all V or the first 7/8 of each row (a tokenizer smaller than the model's vocabulary)
                for (const std::int64_t D : {V, V >= 8 ? V - V / 8 : std::int64_t{0}}) {
                    if (D == 0) continue;
                    for (const auto& o : settings) {
                        std::vector<double> u(rows.size());
                        bool usable = true;
                        for (std::size_t j = 0; j < rows.size(); j++) {
                            int tries = 0;
                            do u[j] = unit(gen);
                            while (!o.greedy && test::near_sampling_boundary(logits.data() + rows[j] * V, D, o, u[j]) &&
                                   ++tries < 20);
                            usable = usable && tries < 20;
                        }
                        if (!usable) continue;
                        std::vector<std::int32_t> ids(rows.size(), -1);
                        be->sample_rows(ids.data(), dev.f(), rows.data(), R, D, V, o, u.data());
                        for (std::size_t j = 0; j < rows.size(); j++) {
                            INFO("V " << V << " D " << D << " ties " << ties << " k " << o.top_k << " p " << o.top_p
                                      << " T " << o.temperature << " greedy " << o.greedy << " u " << u[j]);
                            CHECK(ids[j] == nn::sample_row(logits.data() + rows[j] * V, D, o, u[j]));
                        }
                    }
                }
            }
        }
        // a row with a logit that is not finite among the ids drawn gives -1 (as the host's next_tokens: the caller
        // names the weights), greedy or drawn; the other rows of the launch their ids; a NaN past the ids drawn unread
        const std::int64_t V = 8000, D = 7000, R = 5;
        std::vector<float> logits(static_cast<std::size_t>(R * V));
        for (auto& z : logits) z = normal(gen);
        logits[1 * V + 17] = std::numeric_limits<float>::quiet_NaN();
        logits[2 * V + D - 1] = std::numeric_limits<float>::infinity();
        logits[3 * V] = -std::numeric_limits<float>::infinity();
        logits[4 * V + D + 5] = std::numeric_limits<float>::quiet_NaN();
        nn::BackendBuffer dev(*be, logits.size() * sizeof(float));
        be->upload(dev.get(), logits.data(), logits.size() * sizeof(float));
        const std::vector<std::int64_t> rows = {0, 1, 2, 3, 4};
        const std::vector<double> u = {0.31, 0.52, 0.73, 0.94, 0.15};
        for (const bool greedy : {true, false}) {
            nn::SamplingParams o;
            o.greedy = greedy;
            o.top_p = greedy ? 1.0 : 0.9;
            std::vector<std::int32_t> ids(rows.size(), -2);
            be->sample_rows(ids.data(), dev.f(), rows.data(), R, D, V, o, u.data());
            INFO("greedy " << greedy);
            CHECK(ids[0] == nn::sample_row(logits.data(), D, o, u[0]));
            CHECK(ids[1] == -1);
            CHECK(ids[2] == -1);
            CHECK(ids[3] == -1);
            CHECK(ids[4] == nn::sample_row(logits.data() + 4 * V, D, o, u[4]));
        }
    }
}

TEST_CASE("generate: the decoder refuses positions past max_seq_len and a chunk without neighbours") {
    const RetroConfig c = decode_config();
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 1);
    CachedDecoder<float> dec(model, 1, true);
    std::vector<std::vector<std::int32_t>> feed = {std::vector<std::int32_t>(4, 5)};
    CHECK_THROWS(dec.step(feed));   // chunk 0 completes without neighbours: a caller bug
    CachedDecoder<float> plain(model, 1, false);
    feed[0].assign(static_cast<std::size_t>(c.max_seq_len + 1), 5);
    CHECK_THROWS_AS(plain.step(feed), UserError);
}

namespace {

// Brute force: rank by (logit desc, id asc), keep the first top_k, softmax(z/T) over them, keep rank i iff
// the mass ranked before it is < p, renormalise.
std::map<std::int32_t, double> brute_force(const std::vector<float>& logits, const SamplerOptions& o) {
    std::vector<std::int32_t> ids(logits.size());
    for (std::size_t i = 0; i < ids.size(); i++) ids[i] = static_cast<std::int32_t>(i);
    std::sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    if (o.top_k > 0 && o.top_k < static_cast<std::int64_t>(ids.size())) ids.resize(static_cast<std::size_t>(o.top_k));
    std::vector<double> p;
    double sum = 0;
    for (auto id : ids) sum += std::exp(static_cast<double>(logits[id]) / o.temperature);
    for (auto id : ids) p.push_back(std::exp(static_cast<double>(logits[id]) / o.temperature) / sum);
    std::map<std::int32_t, double> kept;
    double before = 0, total = 0;
    for (std::size_t i = 0; i < ids.size(); i++) {
        if (!(before < o.top_p)) break;
        kept[ids[i]] = p[i];
        total += p[i];
        before += p[i];
    }
    for (auto& kv : kept) kv.second /= total;
    return kept;
}

}  // namespace

TEST_CASE("generate: temperature top-k and top-p equal their brute-force definitions") {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 40; trial++) {
        std::vector<float> logits(37);
        for (auto& l : logits) l = static_cast<float>(static_cast<int>(rng() % 21) - 10) * 0.37f;   // many ties
        for (double T : {0.3, 1.0, 2.5})
            for (std::int64_t k : {0, 1, 5, 36, 37, 100})
                for (double p : {0.05, 0.3, 0.75, 0.999, 1.0}) {
                    SamplerOptions o;
                    o.temperature = T;
                    o.top_k = k;
                    o.top_p = p;
                    const auto got = sampler_distribution(logits.data(), 37, o);
                    const auto want = brute_force(logits, o);
                    INFO("T=" << T << " k=" << k << " p=" << p);
                    REQUIRE(got.ids.size() == want.size());
                    for (std::size_t i = 0; i < got.ids.size(); i++) {
                        REQUIRE(want.count(got.ids[i]) == 1);
                        CHECK(got.probs[i] == doctest::Approx(want.at(got.ids[i])).epsilon(1e-12));
                    }
                }
    }
}

TEST_CASE("generate: top-p ranks the ids as a comparison sort does (z descending, ties by lower id, -0 = +0)") {
    // the sampler's radix rank order against std::sort with the rank comparator, over the whole vocabulary (p just
    // under 1 keeps every id unless the last ones' mass is below rounding): many ties, both zeros, +-large values
    std::mt19937 rng(11);
    for (int trial = 0; trial < 12; trial++) {
        const std::int64_t V = trial < 6 ? 8000 : 1 + static_cast<std::int64_t>(rng() % 300);
        std::vector<float> logits(static_cast<std::size_t>(V));
        for (auto& l : logits) {
            const int kind = static_cast<int>(rng() % 10);
            l = kind == 0 ? 0.0f : kind == 1 ? -0.0f : kind == 2 ? 3.0e38f * (rng() % 2 ? 1.0f : -1.0f)
                                                               : static_cast<float>(static_cast<int>(rng() % 41) - 20) * 0.5f;
        }
        std::vector<std::int32_t> want(logits.size());
        std::iota(want.begin(), want.end(), 0);
        std::sort(want.begin(), want.end(), [&](std::int32_t a, std::int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });
        SamplerOptions o;
        o.temperature = 1e300;   // every probability alike (z / T ~ 0 in double): the nucleus keeps (nearly) every id
        o.top_p = 1.0 - 1e-12;
        const auto got = sampler_distribution(logits.data(), V, o);
        INFO("V=" << V);
        REQUIRE(got.ids.size() >= want.size() - 1);
        for (std::size_t i = 0; i < got.ids.size(); i++) REQUIRE(got.ids[i] == want[i]);
    }
}

TEST_CASE("generate: the sampler's probabilities over a large vocabulary are the one-loop formula's bits") {
    // the bits of the one-loop formula (exps in double, summed in rank order, then divided), which any faster form of
    // the sampler must keep: one seed gives one text. (Session 20 tried the exps on every core: 15 % on the 2-vCPU dev
    // box, and one run 70x slower while a build held both cores, so the loop stays serial.)
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (const std::int64_t V : {2047, 2048, 8000, 32000}) {
        std::vector<float> logits(static_cast<std::size_t>(V));
        for (auto& l : logits) l = normal(rng);
        SamplerOptions o;
        o.temperature = 0.8;
        const auto got = sampler_distribution(logits.data(), V, o);
        const double T = o.temperature, mx = static_cast<double>(*std::max_element(logits.begin(), logits.end())) / T;
        std::vector<double> want(logits.size());
        double sum = 0;
        for (std::size_t i = 0; i < want.size(); i++) sum += (want[i] = std::exp(static_cast<double>(logits[i]) / T - mx));
        for (auto& v : want) v /= sum;
        INFO("V=" << V);
        REQUIRE(got.probs.size() == want.size());
        CHECK(std::memcmp(got.probs.data(), want.data(), want.size() * sizeof(double)) == 0);
    }
}

TEST_CASE("generate: sample_token draws what the inverse CDF of sampler_distribution gives for the same uniform") {
    // sample_token divides on the fly and skips the id list when every id stays: it must still return exactly the
    // token that walking sampler_distribution's probabilities with the same u returns
    std::mt19937 rng(17);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    int draws = 0;
    for (const std::int64_t V : {1, 7, 300, 8000})
        for (std::int64_t k : {0, 1, 5, 100000})
            for (double p : {0.3, 0.9, 1.0})
                for (double T : {0.5, 1.0}) {
                    std::vector<float> logits(static_cast<std::size_t>(V));
                    for (auto& l : logits) l = std::round(normal(rng) * 4.0f) / 4.0f;   // ties too
                    SamplerOptions o;
                    o.temperature = T;
                    o.top_k = k;
                    o.top_p = p;
                    const auto dist = sampler_distribution(logits.data(), V, o);
                    for (std::uint64_t seed = 0; seed < 40; seed++) {
                        SplitMix64 a(seed), b(seed);
                        const std::int32_t got = sample_token(logits.data(), V, o, a);
                        const double u = b.uniform();
                        double acc = 0;
                        std::int32_t want = dist.ids.back();
                        for (std::size_t i = 0; i < dist.ids.size(); i++)
                            if (u < (acc += dist.probs[i])) {
                                want = dist.ids[i];
                                break;
                            }
                        INFO("V=" << V << " k=" << k << " p=" << p << " T=" << T << " seed=" << seed);
                        REQUIRE(got == want);
                        draws++;
                    }
                }
    CHECK(draws == 4 * 4 * 3 * 2 * 40);
}

TEST_CASE("generate: sampler draws pass a chi-square test against softmax(logits over T) on the kept ids") {
    const std::vector<float> logits = {1.0f, 2.5f, -0.5f, 0.3f, 2.0f, -3.0f, 1.7f, 0.0f};
    SamplerOptions o;
    o.temperature = 0.7;
    o.top_k = 6;
    const auto dist = sampler_distribution(logits.data(), 8, o);
    REQUIRE(dist.ids.size() == 6);
    SplitMix64 rng(42);
    const int N = 30000;
    std::map<std::int32_t, int> counts;
    for (int i = 0; i < N; i++) counts[sample_token(logits.data(), 8, o, rng)]++;
    double chi2 = 0;
    for (std::size_t i = 0; i < dist.ids.size(); i++) {
        const double e = N * dist.probs[i];
        const double d = counts[dist.ids[i]] - e;
        chi2 += d * d / e;
    }
    CHECK(chi2 < 20.52);   // chi-square, 5 degrees of freedom, p = 0.001
    CHECK(counts.size() == 6);   // never a filtered id (ids 5 and 2 are the two smallest)
    CHECK(counts.count(5) == 0);
    CHECK(counts.count(2) == 0);
    // one seed, one sequence of draws; greedy is the argmax with the lower id on ties
    SplitMix64 a(9), b(9), c(10);
    std::vector<std::int32_t> da, db, dc;
    for (int i = 0; i < 50; i++) {
        da.push_back(sample_token(logits.data(), 8, o, a));
        db.push_back(sample_token(logits.data(), 8, o, b));
        dc.push_back(sample_token(logits.data(), 8, o, c));
    }
    CHECK(da == db);
    CHECK(da != dc);
    SamplerOptions g;
    g.greedy = true;
    const std::vector<float> tie = {0.f, 3.f, 1.f, 3.f};
    CHECK(sample_token(tie.data(), 4, g, a) == 1);
}

TEST_CASE("generate: sampler options outside their ranges are user errors") {
    SamplerOptions o;
    o.top_p = 0;
    CHECK_THROWS_AS(sampler_validate(o), UserError);
    o.top_p = 1.5;
    CHECK_THROWS_AS(sampler_validate(o), UserError);
    o.top_p = 1;
    o.temperature = 0;
    CHECK_THROWS_AS(sampler_validate(o), UserError);
    o.temperature = 1;
    o.top_k = -1;
    CHECK_THROWS_AS(sampler_validate(o), UserError);
    o.top_k = 3;
    CHECK_NOTHROW(sampler_validate(o));
    // docs/generate.md: --greedy is the argmax, "the other flags ignored": out-of-range ones are not refused there
    SamplerOptions g;
    g.greedy = true;
    g.temperature = 0;
    g.top_p = 0;
    g.top_k = -1;
    CHECK_NOTHROW(sampler_validate(g));
}

TEST_CASE("generate: a refused --top-p is said with the digits that tell it from 1 and no more") {
    // sampler.cpp's shortest_exact: the fewest digits (6 to 17) that read back as the same double, so 1.0000001 is
    // not said as "1" (%g's 6 digits) nor 1.1 as 1.1000000000000001 (17)
    for (const auto& [p, said] : {std::pair{1.0000001, "1.0000001"}, std::pair{1.1, "1.1"}, std::pair{1.5, "1.5"},
                                  std::pair{-0.25, "-0.25"}, std::pair{1.0 + 1e-15, "1.000000000000001"}}) {
        SamplerOptions o;
        o.top_p = p;
        std::string message;
        try {
            sampler_validate(o);
        } catch (const UserError& e) {
            message = e.what();
        }
        INFO(message);
        const std::string got = std::string("got ") + said;
        const auto at = message.find(got);
        REQUIRE(at != std::string::npos);
        const auto next = at + got.size();
        CHECK((next == message.size() || !std::isdigit(static_cast<unsigned char>(message[next]))));
    }
}

TEST_CASE("generate: a one-sequence decode step is one op per fused projection (the launches a GPU token takes)") {
    // BackendDecoder's run_step through ProfilingNnBackend on the host backend: a step that feeds one row past the
    // first chunk (CCA reads it; no chunk finishes, so the encoder does not run) calls, besides its one upload (its
    // logits stay on the backend: the next token is drawn there, sample_last, or they come down when logits() is
    // called), the embedding with the positions and the decoder-width projection (none where the encoder is as wide:
    // the embedding then written straight into the decoder's stream, no copy), then per layer the q|k|v projection
    // (norm + GEMV + rotation), attention_decode, the output projection (+ residual), the feed-forward's two GEMVs
    // (norm + gelu; + residual), per CCA layer its query projection, attention_decode and output projection (+
    // residual), the encoder context's scatter at the first CCA layer, and the logits' GEMV (+ norm): on the GPU one
    // launch each. A change that adds a launch to every token fails here.
  for (const RetroConfig& c : {decode_config(), same_width_decode_config()}) {
    CAPTURE(c.enc_dim);
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 3);
    nn::HostNnBackend host;
    nn::ProfilingNnBackend be(host);
    const nn::BackendBuffer weights = test::upload_weights(be, model);
    BackendDecoder dec(c, weights.f(), be, 1, true);
    std::mt19937 rng(5);
    dec.add_neighbours(0, test::random_neighbours(c, rng).data());
    dec.step({{1, 2, 3, 4, 5}}, false);   // the prompt: chunk 0 finishes, the encoder runs
    dec.step({{6}}, false);               // the first one-row step: its buffers grow (attention_decode's counters)
    be.reset();
    dec.step({{7}}, false);               // position 6: reads chunk 0, finishes none
    std::int64_t cca_layers = 0;
    for (std::int64_t l = 1; l <= c.dec_depth; l++) cca_layers += c.dec_has_cross(l) ? 1 : 0;
    std::map<std::string, long long> calls;
    long long ops = 0;
    for (const auto& t : be.timings()) {
        calls[t.op] += t.calls;
        if (t.op != "upload" && t.op != "download") ops += t.calls;
    }
    CHECK(calls["upload"] == 1);
    CHECK(calls["download"] == 0);
    const bool projected = c.enc_dim != c.dec_dim;
    CHECK(ops == 1 + (projected ? 1 : 0) + 5 * c.dec_depth + 3 * cca_layers + (cca_layers > 0 ? 1 : 0) + 1);
    CHECK(calls.count("copy") == 0);
    CHECK(calls["attention_decode"] == c.dec_depth + cca_layers);
    for (const char* folded : {"rmsnorm_forward", "residual_rmsnorm_forward", "rotary_scale_forward", "rotary_forward",
                               "residual_sum", "gather_rows", "gather_add_rows", "embedding_forward",
                               "linear_gelu_forward"})
        CHECK_MESSAGE(calls.count(folded) == 0, folded);
    // the draw: one op, and nothing else moves (on the GPU: one upload of u, one kernel, the id down)
    be.reset();
    std::vector<std::int32_t> next;
    nn::SamplingParams greedy;
    greedy.greedy = true;
    dec.sample_last(greedy, {0}, {}, next);
    REQUIRE(be.timings().size() == 1);
    CHECK(be.timings()[0].op == "sample_rows");
    CHECK(dec.logits().size() == static_cast<std::size_t>(c.num_tokens));
    CHECK(next[0] == nn::sample_row(dec.logits().data(), c.num_tokens, greedy, 0.0));
  }
}
