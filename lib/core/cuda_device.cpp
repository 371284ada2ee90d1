// cuda_require, the one place that refuses a GPU request (core/cuda_device.h), and the probe's answers in a
// CPU-only build (a CUDA build answers them in kernels/cuda_device.cu).
#include "core/cuda_device.h"

#include "core/error.h"

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace retro {

#ifndef RETRO_HAVE_CUDA
int cuda_device_count() { return 0; }
std::string cuda_device_name() { return ""; }
std::string cuda_context_fault() { return ""; }
#endif

void cuda_require(const std::string& flag, const std::string& program, const std::string& fix) {
    if (!kCudaBuilt) user_error_in(flag, program + " was built without CUDA", fix);
    if (cuda_device_count() == 0) user_error_in(flag, "no CUDA device found", fix);
}

void cuda_select_local_device(int local_rank, int local_size) {
    if (local_size <= 1) return;
    std::vector<std::string> devices;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
        std::stringstream list(v);
        for (std::string d; std::getline(list, d, ',');) devices.push_back(d);
    } else {
        for (int i = 0; i < local_size; i++) devices.push_back(std::to_string(i));
    }
    if (local_rank >= static_cast<int>(devices.size()))
        user_error_in("CUDA_VISIBLE_DEVICES", cat("lists ", devices.size(), " GPU(s) for ", local_size,
                                                  " ranks on this machine"),
                      "one GPU per rank: launch as many ranks per machine as it has GPUs");
    ::setenv("CUDA_VISIBLE_DEVICES", devices[static_cast<std::size_t>(local_rank)].c_str(), 1);
}

double cuda_dense_bf16_peak_flops(const std::string& name) {
    // NVIDIA's data sheets, dense (no sparsity) bf16 tensor-core FLOP/s of the SXM parts; PCIe parts are lower, so
    // an MFU on one reads high by their ratio (H100 PCIe 756 TFLOP/s)
    if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos ||
        name.find("GH200") != std::string::npos)
        return 989e12;
    if (name.find("A100") != std::string::npos) return 312e12;
    return 0;
}

}  // namespace retro
