// No-CUDA build of kernels/bert_cuda.h: the constructor is a user error "built without CUDA".
#include "bert_cuda.h"

#include "core/error.h"

namespace retro {

struct CudaBert::State {};

CudaBert::CudaBert(const BertModel&) {
    user_error_in("--device cuda", "bert: built without CUDA", "embed on the CPU (--device cpu), or rebuild with nvcc and RETRO_CUDA=ON");
}
CudaBert::~CudaBert() = default;
void CudaBert::forward_mean(const std::int32_t*, const std::int64_t*, int, float*) {
    user_error_in("--device cuda", "bert: built without CUDA");
}

}  // namespace retro
