// Waiting for a collective (NCCL's all-reduce) without waiting for ever: the caller's stream is polled while the
// communicator's asynchronous errors are asked for, and the communicator is aborted (its kernels stop) before any
// failure leaves the wait — an error NCCL reports (a peer that died over the network), a failing query, or no
// completion within the timeout (a peer on the same machine that died over NVLink or shared memory, or one out of
// step: NCCL reports neither). Host code behind three hooks, so the rules are tested without a GPU
// (tests/test_collective_wait.cpp); kernels/nccl_comm.cu gives the hooks CUDA's and NCCL's calls.
// provides: CollectiveWaitHooks, collective_wait, collective_timeout_from_env, kCollectiveTimeoutDefaultS
#pragma once
#include <chrono>
#include <functional>
#include <string>

namespace retro {

struct CollectiveWaitHooks {
    std::function<bool()> stream_done;          // true once the stream's work is done; throws on a stream error
    std::function<std::string()> async_error;   // the communicator's asynchronous error, "" while none; may throw
    std::function<void()> abort;                // aborts the communicator (called at most once, never throws)
};

// Polls until stream_done(), every `interval`. On an asynchronous error, a throwing hook or `timeout` passed
// (timeout 0: none), calls abort() and throws InternalError "<what>: <why>" (a throwing hook's own error is
// rethrown as it was). `timeout_source` names where the timeout came from, for its message.
void collective_wait(const CollectiveWaitHooks& hooks, const std::string& what, std::chrono::duration<double> timeout,
                     const std::string& timeout_source,
                     std::chrono::microseconds interval = std::chrono::microseconds(50));

inline constexpr double kCollectiveTimeoutDefaultS = 600;   // PyTorch's default NCCL timeout, 10 minutes

// RETRO_NCCL_TIMEOUT_S's value (nullptr or "": the default): seconds >= 0, 0 for none; anything else is refused in
// one line naming the variable (UserError).
double collective_timeout_from_env(const char* value);

}  // namespace retro
