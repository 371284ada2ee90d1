// CUDA build of lib/core/cuda_device.h: the device probe, device memory and copies, the status checks, and the
// cuBLAS sgemm rate (pseudo-random operands filled on the device).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_device.h"
#include "core/error.h"

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
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "";
    return prop.name;
}

void cuda_check(int status, const char* what) {
    RETRO_CHECK(status == cudaSuccess, what, ": ", cudaGetErrorString(static_cast<cudaError_t>(status)));
}
void cublas_check(int status, const char* what) {
    RETRO_CHECK(status == CUBLAS_STATUS_SUCCESS, what, ": cuBLAS status ", status);
}

void* cuda_alloc(std::size_t bytes) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
}
void cuda_free(void* p) { cudaFree(p); }
void cuda_copy_to_device(void* dst, const void* src, std::size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
void cuda_copy_to_host(void* dst, const void* src, std::size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}
void cuda_synchronize() { cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
std::size_t cuda_used_bytes() {
    std::size_t free_b = 0, total = 0;
    cuda_check(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo");
    return total - free_b;
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

}  // namespace

double cuda_sgemm_gflops(std::int64_t m, std::int64_t n, int d) {
    cuda_require("--device cuda", "RetroKit");
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    DeviceFloats a(m * d), b(n * d), c(m * n);
    fill_pseudo_random<<<static_cast<unsigned>((m * d + 255) / 256), 256>>>(a.p, m * d, 1u);
    fill_pseudo_random<<<static_cast<unsigned>((n * d + 255) / 256), 256>>>(b.p, n * d, 2u);
    cuda_check(cudaGetLastError(), "fill_pseudo_random");
    cublasHandle_t h = nullptr;
    cublas_check(cublasCreate(&h), "cublasCreate");
    cublas_check(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    const float one = 1.0f, zero = 0.0f;
    auto once = [&] {
        cublas_check(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), d, &one, b.p, d,
                                 a.p, d, &zero, c.p, static_cast<int>(n)),
                     "cublasSgemm");
    };
    cudaEvent_t e0, e1;
    cuda_check(cudaEventCreate(&e0), "cudaEventCreate");
    cuda_check(cudaEventCreate(&e1), "cudaEventCreate");
    once();
    float best = 1e30f;
    for (int r = 0; r < 5; ++r) {
        cudaEventRecord(e0);
        once();
        cudaEventRecord(e1);
        cuda_check(cudaEventSynchronize(e1), "sgemm timing");
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        best = std::min(best, ms);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cublasDestroy(h);
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * d / (best * 1e-3) / 1e9;
}

}  // namespace retro
