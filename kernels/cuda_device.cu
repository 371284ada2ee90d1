// CUDA build of lib/core/cuda_device.h: the device probe, streams, device memory and copies, and the cuBLAS sgemm
// rate (pseudo-random operands filled on the device). Every call is checked (cuda_check.cuh).
#include <algorithm>
#include <vector>

#include "core/cuda_device.h"
#include "core/error.h"
#include "cuda_check.cuh"

namespace retro {

int cuda_device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky error
        return 0;
    }
    return n;
}

std::string cuda_device_name() {
    if (cuda_device_count() == 0) return "";
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        cudaGetLastError();   // clear it: the next launch check would report it under a kernel's name
        return "";
    }
    return prop.name;
}

CudaStream cuda_stream_create() {
    cuda_require("--device cuda", "RetroKit");
    RETRO_CUDA_CHECK(cudaSetDevice(0));
    cudaStream_t s = nullptr;
    RETRO_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}
void cuda_stream_destroy(CudaStream stream) noexcept {
    if (stream) RETRO_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream));
}
void cuda_stream_synchronize(CudaStream stream) {
    cuda_stream_require(stream, "cuda_stream_synchronize");
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::string cuda_context_fault() {
    // (not through cuda_device_count, which reads any error as "no device": a dead context may answer the count
    // with its fault)
    int n = 0;
    const cudaError_t counted = cudaGetDeviceCount(&n);
    if (counted == cudaErrorNoDevice || counted == cudaErrorInsufficientDriver || (counted == cudaSuccess && n == 0)) {
        (void)cudaGetLastError();
        return "";
    }
    // (the whole device, not a stream: the question is the context's, and the caller's streams may be gone)
    const cudaError_t e = counted != cudaSuccess ? counted : cudaDeviceSynchronize();
    if (e == cudaSuccess) return "";
    (void)cudaGetLastError();
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

void cuda_stream_synchronize_nothrow(CudaStream stream) noexcept {
    if (stream) RETRO_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(stream));
}

void* cuda_alloc(std::size_t bytes) {
    void* p = nullptr;
    RETRO_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
}
void cuda_free(void* p) noexcept { RETRO_CUDA_CHECK_NOTHROW(cudaFree(p)); }
void cuda_copy_to_device(void* dst, const void* src, std::size_t bytes, CudaStream stream) {
    cuda_stream_require(stream, "cuda_copy_to_device");
    RETRO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream));
}
void cuda_copy_to_host(void* dst, const void* src, std::size_t bytes, CudaStream stream) {
    cuda_stream_require(stream, "cuda_copy_to_host");
    RETRO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream));
}
std::size_t cuda_used_bytes() {
    std::size_t free_b = 0, total = 0;
    RETRO_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    return total - free_b;
}
std::size_t cuda_free_bytes() {
    std::size_t free_b = 0, total = 0;
    RETRO_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    return free_b;
}

namespace {

__global__ void fill_pseudo_random(float* x, long long count, unsigned seed) {
    long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= count) return;
    unsigned h = static_cast<unsigned>(i) * 2654435761u + seed;   // Knuth hash -> [-1, 1)
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    x[i] = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

// count floats on the device, freed on scope exit
struct DeviceFloats {
    float* p;
    explicit DeviceFloats(std::int64_t count)
        : p(static_cast<float*>(cuda_alloc(static_cast<std::size_t>(count) * sizeof(float)))) {}
    ~DeviceFloats() { cuda_free(p); }
    DeviceFloats(const DeviceFloats&) = delete;
    DeviceFloats& operator=(const DeviceFloats&) = delete;
};

// A CUDA event, destroyed on scope exit.
struct Event {
    cudaEvent_t e = nullptr;
    Event() { RETRO_CUDA_CHECK(cudaEventCreate(&e)); }
    ~Event() { RETRO_CUDA_CHECK_NOTHROW(cudaEventDestroy(e)); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
};

// A cuBLAS handle whose work goes to `stream`, destroyed on scope exit.
struct Cublas {
    cublasHandle_t h = nullptr;
    explicit Cublas(cudaStream_t stream) {
        RETRO_CUBLAS_CHECK(cublasCreate(&h));
        RETRO_CUBLAS_CHECK(cublasSetStream(h, stream));
    }
    ~Cublas() { RETRO_CUBLAS_CHECK_NOTHROW(cublasDestroy(h)); }
    Cublas(const Cublas&) = delete;
    Cublas& operator=(const Cublas&) = delete;
};

// `runs` times of `once` on `stream` (ms, CUDA events around each), after one untimed warm-up run (first-launch
// costs: module load, cuBLAS plans), sorted.
template <typename F>
std::vector<float> event_times_ms(F once, cudaStream_t stream, int runs) {
    Event e0, e1;
    once();
    std::vector<float> ms(static_cast<std::size_t>(runs));
    for (float& m : ms) {
        RETRO_CUDA_CHECK(cudaEventRecord(e0.e, stream));
        once();
        RETRO_CUDA_CHECK(cudaEventRecord(e1.e, stream));
        RETRO_CUDA_CHECK(cudaEventSynchronize(e1.e));
        RETRO_CUDA_CHECK(cudaEventElapsedTime(&m, e0.e, e1.e));
    }
    std::sort(ms.begin(), ms.end());
    return ms;
}

// The fastest of 5 timed runs.
template <typename F>
float best_of_5_ms(F once, cudaStream_t stream) {
    return event_times_ms(once, stream, 5).front();
}

}  // namespace

double cuda_event_median_ms(const std::function<void()>& enqueue, CudaStream stream, int repeats) {
    cuda_stream_require(stream, "cuda_event_median_ms");
    RETRO_CHECK(repeats >= 1, "cuda_event_median_ms: repeats ", repeats, " < 1");
    const std::vector<float> ms = event_times_ms(enqueue, stream, repeats);
    return ms[ms.size() / 2];
}

double cuda_sgemm_gflops(std::int64_t m, std::int64_t n, int d, CudaStream stream) {
    cuda_require("--device cuda", "RetroKit");
    cuda_stream_require(stream, "cuda_sgemm_gflops");
    RETRO_CUDA_CHECK(cudaSetDevice(0));
    DeviceFloats a(m * d), b(n * d), c(m * n);
    fill_pseudo_random<<<static_cast<unsigned>((m * d + 255) / 256), 256, 0, stream>>>(a.p, m * d, 1u);
    RETRO_CUDA_LAUNCH_CHECK("fill_pseudo_random", stream);
    fill_pseudo_random<<<static_cast<unsigned>((n * d + 255) / 256), 256, 0, stream>>>(b.p, n * d, 2u);
    RETRO_CUDA_LAUNCH_CHECK("fill_pseudo_random", stream);
    Cublas blas(stream);
    RETRO_CUBLAS_CHECK(cublasSetMathMode(blas.h, CUBLAS_PEDANTIC_MATH));
    const float one = 1.0f, zero = 0.0f;
    auto once = [&] {
        RETRO_CUBLAS_CHECK(cublasSgemm(blas.h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), d, &one,
                                       b.p, d, a.p, d, &zero, c.p, static_cast<int>(n)));
        RETRO_CUDA_SYNC_POINT("cublasSgemm", stream);
    };
    const float best = best_of_5_ms(once, stream);
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * d / (best * 1e-3) / 1e9;
}

double cuda_copy_gbps(std::size_t bytes, CudaStream stream) {
    cuda_require("--device cuda", "RetroKit");
    cuda_stream_require(stream, "cuda_copy_gbps");
    RETRO_CUDA_CHECK(cudaSetDevice(0));
    const std::int64_t n = static_cast<std::int64_t>(bytes / sizeof(float));
    DeviceFloats a(n), b(n);
    fill_pseudo_random<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(a.p, n, 3u);
    RETRO_CUDA_LAUNCH_CHECK("fill_pseudo_random", stream);
    const std::size_t moved = static_cast<std::size_t>(n) * sizeof(float);
    auto once = [&] { RETRO_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, moved, cudaMemcpyDeviceToDevice, stream)); };
    const float best = best_of_5_ms(once, stream);
    return 2.0 * static_cast<double>(moved) / (best * 1e-3) / 1e9;
}

}  // namespace retro
