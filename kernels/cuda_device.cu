// CUDA build of kernels/cuda_device.h.
#include "cuda_device.h"

#include <cuda_runtime.h>

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

bool cuda_built() { return true; }

}  // namespace retro
