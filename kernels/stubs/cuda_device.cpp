// No-CUDA build of kernels/cuda_device.h: never a device.
#include "cuda_device.h"

namespace retro {
int cuda_device_count() { return 0; }
std::string cuda_device_name() { return ""; }
bool cuda_built() { return false; }
}  // namespace retro
