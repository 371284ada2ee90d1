// No-CUDA build of kernels/retention_cuda.h: the same entry points, each a user error "built without CUDA".
#include "retention_cuda.h"

#include "core/error.h"

namespace retro::retention::cuda {
namespace {
[[noreturn]] void no_cuda() {
    user_error_in("--device cuda", "retention: built without CUDA", "rebuild with nvcc available and RETRO_CUDA=ON");
}
}  // namespace

template <typename T>
void parallel_forward(const Shape&, const Options&, const T*, const T*, const T*, const float*, T*, float*) { no_cuda(); }
template <typename T>
void parallel_backward(const Shape&, const Options&, const T*, const T*, const T*, const float*, const T*, const float*,
                       T*, T*, T*, float*) { no_cuda(); }
template <typename T>
void recurrent_forward(const Shape&, const Options&, const T*, const T*, const T*, const float*, T*, float*) { no_cuda(); }
template <typename T>
void recurrent_backward(const Shape&, const Options&, const T*, const T*, const T*, const float*, const T*, const float*,
                        T*, T*, T*, float*) { no_cuda(); }
template <typename T>
void chunkwise_forward(const Shape&, const Options&, const T*, const T*, const T*, const float*, T*, float*) { no_cuda(); }
template <typename T>
void chunkwise_backward(const Shape&, const Options&, const T*, const T*, const T*, const float*, const T*, const float*,
                        T*, T*, T*, float*) { no_cuda(); }

#define RETRO_STUB_INSTANTIATE(T)                                                                               \
    template void parallel_forward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*, \
                                      T*, float*);                                                              \
    template void parallel_backward<T>(const Shape&, const Options&, const T*, const T*, const T*,              \
                                       const float*, const T*, const float*, T*, T*, T*, float*);               \
    template void recurrent_forward<T>(const Shape&, const Options&, const T*, const T*, const T*,              \
                                       const float*, T*, float*);                                               \
    template void recurrent_backward<T>(const Shape&, const Options&, const T*, const T*, const T*,             \
                                        const float*, const T*, const float*, T*, T*, T*, float*);              \
    template void chunkwise_forward<T>(const Shape&, const Options&, const T*, const T*, const T*,              \
                                       const float*, T*, float*);                                               \
    template void chunkwise_backward<T>(const Shape&, const Options&, const T*, const T*, const T*,             \
                                        const float*, const T*, const float*, T*, T*, T*, float*);
RETRO_STUB_INSTANTIATE(float)
RETRO_STUB_INSTANTIATE(bf16)

void* device_alloc(std::size_t) { no_cuda(); }
void device_free(void*) {}
void copy_to_device(void*, const void*, std::size_t) { no_cuda(); }
void copy_to_host(void*, const void*, std::size_t) { no_cuda(); }
void synchronize() { no_cuda(); }
std::size_t device_used_bytes() { no_cuda(); }

}  // namespace retro::retention::cuda
