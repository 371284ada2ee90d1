// The parts of core/cuda_check.h that need no CUDA: the refusal of the legacy default stream and the
// RETRO_CUDA_SYNC_CHECK switch (the status checks themselves are kernels/cuda_check.cu's).
#include "core/cuda_check.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace retro {

void cuda_stream_require(CudaStream stream, const char* entry) {
    // cudaStreamLegacy is ((cudaStream_t)0x1) in driver_types.h
    RETRO_CHECK(stream != nullptr && stream != reinterpret_cast<CudaStream>(0x1), entry,
                ": needs a stream of its own, not the legacy default stream (core/cuda_device.h: CudaStreamOwner)");
}

bool cuda_sync_check_parse(const char* value) { return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0; }

bool cuda_sync_check() {
    static const bool on = cuda_sync_check_parse(std::getenv(kCudaSyncCheckEnv));
    return on;
}

}  // namespace retro
