// GPU presence probe shared by tools and tests. Any CUDA error (no driver, no device) counts as
// "0 devices" (TOOLCHAIN.md: without a driver cudaGetDeviceCount returns error 35, not 100).
#pragma once
#include <string>

namespace retro {

int cuda_device_count();          // 0 when built without CUDA or when no usable device
std::string cuda_device_name();   // "" when there is none
bool cuda_built();                // true when the library was built with CUDA kernels

}  // namespace retro
