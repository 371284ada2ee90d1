// CUDA build of core/cuda_check.h's status checks: the messages (CUDA's and cuBLAS's own names and strings, which
// need no device), the throwing and logging checks, and the launch check with the optional stream sync.
#include "cuda_check.cuh"

#include "core/error.h"
#include "core/log.h"

namespace retro {
namespace {

// Errors a kernel leaves behind on the context; without RETRO_CUDA_SYNC_CHECK they surface at a later call.
bool is_kernel_fault(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
        return true;
    default:
        return false;
    }
}

}  // namespace

std::string cuda_error_message(int status, const char* call, const char* file, int line) {
    const auto e = static_cast<cudaError_t>(status);
    std::string msg = cat(file, ":", line, ": ", call, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
    if (is_kernel_fault(e) && !cuda_sync_check())
        msg += cat(" (a fault of an earlier kernel on this stream, reported here; rerun with ", kCudaSyncCheckEnv,
                   "=1 to name the kernel)");
    return msg;
}

std::string cublas_error_message(int status, const char* call, const char* file, int line) {
    const auto s = static_cast<cublasStatus_t>(status);
    return cat(file, ":", line, ": ", call, ": ", cublasGetStatusName(s), ": ", cublasGetStatusString(s));
}

// A failed runtime call also leaves its status as the thread's last error, which the next launch check's
// cudaGetLastError would then report under another kernel's name (a test case or a bench column that catches the
// throw and goes on): the checks take it back. A fault a kernel left (sticky) stays, as it must.
void cuda_check(int status, const char* call, const char* file, int line) {
    if (status == cudaSuccess) return;
    (void)cudaGetLastError();
    throw InternalError(cuda_error_message(status, call, file, line));
}

void cublas_check(int status, const char* call, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) throw InternalError(cublas_error_message(status, call, file, line));
}

void cuda_check_nothrow(int status, const char* call, const char* file, int line) noexcept {
    if (status == cudaSuccess) return;
    (void)cudaGetLastError();   // (as cuda_check)
    try {
        log_error(cuda_error_message(status, call, file, line));
    } catch (...) {   // out of memory for the message: nothing more to say
    }
}

void cublas_check_nothrow(int status, const char* call, const char* file, int line) noexcept {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    try {
        log_error(cublas_error_message(status, call, file, line));
    } catch (...) {
    }
}

// The names are put together only on failure: these run after every launch.
void cuda_launch_check(const char* kernel, CudaStream stream, const char* file, int line) {
    const cudaError_t launch = cudaGetLastError();
    if (launch != cudaSuccess)
        throw InternalError(cuda_error_message(launch, cat("kernel ", kernel, ": launch").c_str(), file, line));
    if (cuda_sync_check()) cuda_sync_point(cat("kernel ", kernel).c_str(), stream, file, line);
}

void cuda_sync_point(const char* what, CudaStream stream, const char* file, int line) {
    if (!cuda_sync_check()) return;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;   // a graph being captured runs later
    if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess && capture != cudaStreamCaptureStatusNone) return;
    const cudaError_t run = cudaStreamSynchronize(stream);
    if (run != cudaSuccess)
        throw InternalError(cuda_error_message(run, cat(what, ": run (", kCudaSyncCheckEnv, ")").c_str(), file, line));
}

}  // namespace retro
