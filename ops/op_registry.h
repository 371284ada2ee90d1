// The op registry (issue 16 item 5, in the spirit of ggml's test-backend-ops): one entry per op of
// the library, by one name ("nn.attention", "retention.chunkwise", "index.exact_search", ...), saying
// where its CPU reference, its CUDA kernel, its tests and its perf row live, and making cases:
//   test mode  tests/test_ops.cpp: every case run on each backend and dtype it has, compared with the
//              CPU in double (per-dtype bounds); ops with a backward checked by central differences in
//              double (ops/gradcheck.h). CUDA cases skip visibly without a device.
//   perf mode  `retro-bench ops`: GFLOP/s and GB/s of each case per backend and dtype, as a table
//              and JSON.
// Adding an op: write a Case (inputs from a seed, run() per backend/dtype writing its outputs as
// doubles, flops/bytes), register it in the area's ops_<area>.cpp, list its files and tests. The
// CUDA training work adds its kernels here.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace retro::ops {

enum class Backend { CPU, CUDA };
enum class DType { F64, F32, BF16 };
const char* backend_name(Backend b);
const char* dtype_name(DType d);

// One op at one shape with its inputs (made from a seed when the case is made).
class Case {
public:
    virtual ~Case() = default;
    virtual std::string shape() const = 0;   // "B2 T64 H4 K16 V16"
    virtual double flops() const = 0;        // per run() (forward, and backward when the op has one)
    virtual double bytes() const = 0;        // bytes read and written per run()
    virtual bool supports(Backend b, DType d) const = 0;
    // Runs the op (forward, and backward when it has one) with inputs rounded to `d`; its outputs,
    // as doubles, in a fixed order (outputs() names them).
    virtual std::vector<std::vector<double>> run(Backend b, DType d) = 0;
    virtual std::vector<std::string> outputs() const = 0;
    // What run(b, d) is compared with: the CPU in double, on inputs rounded to `d` (default: as given).
    virtual std::vector<std::vector<double>> reference(DType) { return run(Backend::CPU, DType::F64); }
    // Central-difference check in double of the backward (empty: the op has none): per checked
    // tensor, its relative error (ops/gradcheck.h) and the bound it must meet.
    struct Grad {
        std::string tensor;
        double rel_err = 0, max_numeric = 0, bound = 0;
    };
    virtual std::vector<Grad> gradcheck() { return {}; }
};

struct OpInfo {
    std::string name;          // "area.op"
    std::string cpu;           // the CPU reference: "lib/nn/attention.h"
    std::string cuda;          // its CUDA kernel, or ""
    std::vector<std::string> tests;   // "tests/test_nn_ops.cpp: nn: attention core gradient ..." (file: case name)
    // Bound on rms(x - ref) / rms(ref) per output against the CPU in double, for each other backend/dtype.
    double bound_f32 = 1e-5, bound_bf16 = 5e-3;
    int test_seeds = 1;        // test mode compares backends on test_case(1 .. test_seeds)
    std::function<std::unique_ptr<Case>(std::uint64_t seed)> test_case;   // small: exercises edges
    std::function<std::unique_ptr<Case>(Backend)> perf_case;             // the timed shape per backend
};

const std::vector<OpInfo>& registry();
const OpInfo* find(const std::string& name);   // null when there is no such op

// fla's metric (utils/_testing.py): rms(a - b) / rms(b).
double rms_ratio(const std::vector<double>& a, const std::vector<double>& b);

// The areas' registrations (ops_<area>.cpp).
void register_nn(std::vector<OpInfo>& out);
void register_nn_backend(std::vector<OpInfo>& out);   // called by register_nn
void register_retention(std::vector<OpInfo>& out);
void register_index(std::vector<OpInfo>& out);
void register_embed(std::vector<OpInfo>& out);

}  // namespace retro::ops
