// cuda_require, the one place that refuses a GPU request (core/cuda_device.h), and the probe's answers in a
// CPU-only build (a CUDA build answers them in kernels/cuda_device.cu).
#include "core/cuda_device.h"

#include "core/error.h"

namespace retro {

#ifndef RETRO_HAVE_CUDA
int cuda_device_count() { return 0; }
std::string cuda_device_name() { return ""; }
#endif

void cuda_require(const std::string& flag, const std::string& program, const std::string& fix) {
    if (!kCudaBuilt) user_error_in(flag, program + " was built without CUDA", fix);
    if (cuda_device_count() == 0) user_error_in(flag, "no CUDA device found", fix);
}

}  // namespace retro
