// The one guard that keeps OpenBLAS single-threaded while our own OpenMP loop runs one GEMM per
// thread (OpenBLAS's pthread build would otherwise start its own threads inside each of ours).
// RAII: the previous thread count comes back when the guard leaves scope, also on an exception.
#pragma once
#include <cblas.h>

namespace retro {

struct BlasSingleThread {
    int previous;
    BlasSingleThread() : previous(openblas_get_num_threads()) { openblas_set_num_threads(1); }
    ~BlasSingleThread() { openblas_set_num_threads(previous); }
    BlasSingleThread(const BlasSingleThread&) = delete;
    BlasSingleThread& operator=(const BlasSingleThread&) = delete;
};

}  // namespace retro
