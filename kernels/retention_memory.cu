// Device-memory helpers of retention_cuda.h for the tests and retro-bench (errors become InternalError).
#include <cuda_runtime.h>

#include "core/error.h"
#include "retention_cuda.h"

namespace retro::retention::cuda {
namespace {
void ok(cudaError_t e, const char* what) { RETRO_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e)); }
}  // namespace

void* device_alloc(std::size_t bytes) {
    void* p = nullptr;
    ok(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
}
void device_free(void* p) { cudaFree(p); }
void copy_to_device(void* dst, const void* src, std::size_t bytes) { ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D"); }
void copy_to_host(void* dst, const void* src, std::size_t bytes) { ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H"); }
void synchronize() { ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
std::size_t device_used_bytes() {
    std::size_t free_b = 0, total = 0;
    ok(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo");
    return total - free_b;
}

}  // namespace retro::retention::cuda
