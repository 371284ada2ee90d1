// cuBLAS and cuBLASLt opened on first use. libretrokit.so is not linked against them: loading libcublasLt maps
// ~150 MB and takes ~0.2 s, which every tool paid at start in a CUDA build, GPU work or not (retro-chunk's RSS was
// 230 MB of which 150 MB cuBLASLt; `--version` took 0.24 s). This file defines the 22 cuBLAS entry points the kernels
// call, each forwarding to the real one, resolved with dlsym on its first call: libcublasLt.so.N and libcublas.so.N
// (N = the CUDA major version built with) are dlopen'ed then, searched as the loader searches (LD_LIBRARY_PATH, this
// library's RUNPATH, the ld.so cache) and then beside the libcudart this process loaded. A library that cannot be
// opened is one line naming it and the fix (UserError), not a crash; the two status-string functions answer
// without it (they are used to report errors).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <string>

#include "core/error.h"

#ifndef RETRO_CUDA_MAJOR
#error "RETRO_CUDA_MAJOR (the CUDA toolkit's major version) must be defined by the build"
#endif
#define RETRO_STR2(x) #x
#define RETRO_STR(x) RETRO_STR2(x)

namespace retro {
namespace {

enum class CublasLib { blas, lt };

const char* soname(CublasLib lib) {
    return lib == CublasLib::lt ? "libcublasLt.so." RETRO_STR(RETRO_CUDA_MAJOR) : "libcublas.so." RETRO_STR(RETRO_CUDA_MAJOR);
}

// The folder of the libcudart this process loaded ("" when unknown).
std::string cudart_folder() {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) == 0 || !info.dli_fname) return "";
    return std::filesystem::path(info.dli_fname).parent_path().string();
}

void* open_library(CublasLib lib, bool required) {
    static std::mutex mutex;
    static void* handles[2] = {nullptr, nullptr};
    std::lock_guard<std::mutex> lock(mutex);
    void*& h = handles[lib == CublasLib::lt ? 1 : 0];
    if (h) return h;
    h = ::dlopen(soname(lib), RTLD_NOW | RTLD_LOCAL);
    std::string why = h ? std::string() : std::string(::dlerror());
    if (!h) {
        const std::string dir = cudart_folder();
        if (!dir.empty()) h = ::dlopen((std::filesystem::path(dir) / soname(lib)).c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (!h && required)
        user_error_in(soname(lib), "cannot be loaded for the GPU's matrix products (" + why + ")",
                      "install the CUDA toolkit's cuBLAS, or add its folder to LD_LIBRARY_PATH");
    return h;
}

void* symbol(CublasLib lib, const char* name) {
    if (lib == CublasLib::blas) open_library(CublasLib::lt, true);   // cuBLAS needs cuBLASLt: a missing one is named
    void* h = open_library(lib, true);
    void* f = ::dlsym(h, name);
    if (!f)
        user_error_in(soname(lib), std::string("has no ") + name + " (another CUDA version than this build's?)",
                      "use the cuBLAS of the CUDA toolkit RetroKit was built with");
    return f;
}

}  // namespace
}  // namespace retro

// Each entry point: the real function, found once (thread-safe static init), called with the same arguments.
#define RETRO_CUBLAS_FORWARD(lib, name, params, args)                                                            \
    extern "C" cublasStatus_t CUBLASWINAPI name params {                                                         \
        using Real = cublasStatus_t(CUBLASWINAPI*) params; /* (not decltype: C++ overloads some) */              \
        static const auto real = reinterpret_cast<Real>(retro::symbol(retro::CublasLib::lib, #name));            \
        return real args;                                                                                        \
    }

RETRO_CUBLAS_FORWARD(blas, cublasCreate_v2, (cublasHandle_t* handle), (handle))
RETRO_CUBLAS_FORWARD(blas, cublasDestroy_v2, (cublasHandle_t handle), (handle))
RETRO_CUBLAS_FORWARD(blas, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
RETRO_CUBLAS_FORWARD(blas, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
RETRO_CUBLAS_FORWARD(blas, cublasSgemm_v2,
                     (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                      const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta, float* C,
                      int ldc),
                     (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
RETRO_CUBLAS_FORWARD(blas, cublasSgemmStridedBatched,
                     (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                      const float* alpha, const float* A, int lda, long long int strideA, const float* B, int ldb,
                      long long int strideB, const float* beta, float* C, int ldc, long long int strideC,
                      int batchCount),
                     (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC,
                      batchCount))
RETRO_CUBLAS_FORWARD(blas, cublasGemmEx,
                     (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                      const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
                      int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                      cublasGemmAlgo_t algo),
                     (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                      computeType, algo))
RETRO_CUBLAS_FORWARD(blas, cublasGemmStridedBatchedEx,
                     (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                      const void* alpha, const void* A, cudaDataType Atype, int lda, long long int strideA,
                      const void* B, cudaDataType Btype, int ldb, long long int strideB, const void* beta, void* C,
                      cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
                      cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                     (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
                      Ctype, ldc, strideC, batchCount, computeType, algo))

RETRO_CUBLAS_FORWARD(lt, cublasLtCreate, (cublasLtHandle_t* handle), (handle))
RETRO_CUBLAS_FORWARD(lt, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatmul,
                     (cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
                      cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                      const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                      const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                      cudaStream_t stream),
                     (handle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                      workspaceSizeInBytes, stream))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatmulAlgoGetHeuristic,
                     (cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
                      cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                      cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                      cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount),
                     (handle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
                      heuristicResultsArray, returnAlgoCount))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatmulDescCreate,
                     (cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType),
                     (matmulDesc, computeType, scaleType))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatmulDescSetAttribute,
                     (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                      size_t sizeInBytes),
                     (matmulDesc, attr, buf, sizeInBytes))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t* pref), (pref))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatmulPreferenceSetAttribute,
                     (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                      size_t sizeInBytes),
                     (pref, attr, buf, sizeInBytes))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatrixLayoutCreate,
                     (cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                     (matLayout, type, rows, cols, ld))
RETRO_CUBLAS_FORWARD(lt, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout), (matLayout))

// The status strings report errors: answered without cuBLAS when it cannot be opened (never throwing from there).
namespace retro {
namespace {
using StatusText = const char* (*)(cublasStatus_t);
StatusText status_text_function(const char* name) {
    void* h = open_library(CublasLib::blas, false);
    return h ? reinterpret_cast<StatusText>(::dlsym(h, name)) : nullptr;
}
}  // namespace
}  // namespace retro

extern "C" const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
    static const retro::StatusText real = retro::status_text_function("cublasGetStatusName");
    return real ? real(status) : "CUBLAS_STATUS_(cuBLAS not loaded)";
}

extern "C" const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    static const retro::StatusText real = retro::status_text_function("cublasGetStatusString");
    return real ? real(status) : "cuBLAS status (the library could not be loaded)";
}
