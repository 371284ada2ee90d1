// No-CUDA build of kernels/exact_search_cuda.h: the same entry points, each a user error "built without CUDA".
#include "exact_search_cuda.h"

#include "core/error.h"

namespace retro {
namespace {
[[noreturn]] void no_cuda() {
    user_error_in("--device cuda", "exact search: built without CUDA", "search on the CPU (--device cpu), or rebuild with nvcc and RETRO_CUDA=ON");
}
}  // namespace

struct CudaExactSearch::State {};

CudaExactSearch::CudaExactSearch(const float*, std::int64_t, int, const std::int64_t*) { no_cuda(); }
CudaExactSearch::~CudaExactSearch() = default;
void CudaExactSearch::search(const float*, std::int64_t, const std::int64_t*, int, std::int64_t*, float*, std::int64_t, std::int64_t) {
    no_cuda();
}

void exact_search_ip_cuda(const float*, std::int64_t, const float*, std::int64_t, int, const ExactSearchOptions&, std::int64_t*,
                          float*) {
    no_cuda();
}

double cuda_sgemm_gflops(std::int64_t, std::int64_t, int) { no_cuda(); }

}  // namespace retro
