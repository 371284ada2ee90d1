// OpenBLAS's kernels for this CPU. Debian 12's OpenBLAS (0.3.21, built DYNAMIC_ARCH) picks its kernels by the CPU's
// model number and falls back to its generic SSE3 kernels ("Prescott") on a model it does not know — a 5th-generation
// Xeon (family 6, model 207) with AVX-512 then runs sgemm at 15 GFLOP/s a core where the SkylakeX kernels run 130–150
// (docs/performance.md, session 32). The kernels can only be chosen before OpenBLAS initialises (OPENBLAS_CORETYPE,
// read by its load-time constructor), so a program that finds such a fallback runs itself again with it set.
// Under an address-space limit (`ulimit -v`, Grid Engine's h_vmem) its threads are limited the same way: each maps a
// buffer of 128 MiB as it starts and retries a refused map for ever (every tool spun at 100 % CPU and its exit waited
// on that thread: a helper's docs check, session 60).
// provides: blas_core_name, blas_core_upgrade, blas_core_upgrade_here, reexec_for_blas_core, blas_core_note,
//           kBlasThreadBufferBytes, blas_threads_for_address_limit, reexec_for_address_limit
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// The kernels OpenBLAS chose (openblas_get_corename(): "Prescott", "Haswell", "SkylakeX", ...).
std::string blas_core_name();

// The kernels to ask for instead of `detected`, or "" to keep them: only where `detected` is one of OpenBLAS's x86
// cores without AVX2 (its generic fallback among them) while the CPU can run better ones — "SkylakeX" where AVX-512
// F, CD, BW, DQ and VL are usable, else "Haswell" where AVX2 and FMA are. A CPU OpenBLAS detected as Haswell, Zen,
// SkylakeX or newer is left as it is.
std::string blas_core_upgrade(const std::string& detected, bool avx512, bool avx2_fma);
// The same for this CPU's own features (as __builtin_cpu_supports reads them: CPUID and the OS's register state).
std::string blas_core_upgrade_here(const std::string& detected);

// At the very start of main: where OPENBLAS_CORETYPE is unset, RETRO_BLAS_CORE is not "keep" and blas_core_upgrade
// names better kernels for this CPU, sets OPENBLAS_CORETYPE to them (and RETRO_BLAS_CORE_FROM to the detected
// core, which also stops a second attempt) and replaces the process with the same program and arguments
// (/proc/self/exe; not where that is another program, as under valgrind). Returns where it does nothing, or where the
// exec fails (the run then goes on with the detected kernels).
void reexec_for_blas_core(char** argv);

// The address space OpenBLAS maps for each thread that runs its kernels: BUFFER_SIZE (128 MiB on x86-64) and room for
// its alignment; its own threads map theirs as they start, each of ours on its first GEMM.
constexpr std::int64_t kBlasThreadBufferBytes = (std::int64_t(128) << 20) + (std::int64_t(2) << 20);
// How many OpenBLAS threads (of `threads`) an address-space limit of `limit_bytes` affords: their buffers in a quarter
// of it, at least 1 (the rest is the tool's: memory_budget.h counts what is left).
int blas_threads_for_address_limit(std::int64_t limit_bytes, int threads);
// At the start of main, after reexec_for_blas_core: where RLIMIT_AS is finite, no OPENBLAS_NUM_THREADS,
// GOTO_NUM_THREADS or OMP_NUM_THREADS is set, and OpenBLAS started more threads than the limit affords, sets
// OPENBLAS_NUM_THREADS to that count (RETRO_BLAS_THREADS_FROM to the count it started, which also stops a second
// attempt) and runs the same program again. Returns where it does nothing, or where the exec fails.
void reexec_for_address_limit(char** argv);

// One line for --verbose: the kernels in use and, after such a restart, the ones OpenBLAS had detected. (Both
// variables pass to child processes — the tools a test or a script runs, retro-bench's peers — which then use the
// same kernels without a restart of their own. Under gdb or perf the restart shows as an exec; RETRO_BLAS_CORE=keep
// avoids it.)
std::string blas_core_note();

}  // namespace retro
