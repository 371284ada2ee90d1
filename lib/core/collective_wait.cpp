// Implementation of collective_wait.h.
#include "core/collective_wait.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace retro {

void collective_wait(const CollectiveWaitHooks& hooks, const std::string& what, std::chrono::duration<double> timeout,
                     const std::string& timeout_source, std::chrono::microseconds interval) {
    const auto start = std::chrono::steady_clock::now();
    // the communicator is aborted before anything leaves: destroying one whose kernels still run waits for them
    auto fail = [&](const std::string& why) {
        hooks.abort();
        throw InternalError(cat(what, ": ", why));
    };
    for (;;) {
        std::string error;
        try {
            if (hooks.stream_done()) return;
            error = hooks.async_error();
        } catch (...) {
            hooks.abort();
            throw;
        }
        if (!error.empty()) fail(error + " (another rank failed or its connection was lost)");
        const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
        if (timeout.count() > 0 && waited >= timeout)
            fail(cat("not complete after ", std::round(waited.count() * 10) / 10, " s (", timeout_source, " ",
                     timeout.count(), "): another rank stopped, fell out of step or lost its GPU"));
        std::this_thread::sleep_for(interval);
    }
}

double collective_timeout_from_env(const char* value) {
    if (!value || !*value) return kCollectiveTimeoutDefaultS;
    double s = -1;
    const char* end = value + std::strlen(value);
    const auto [p, ec] = std::from_chars(value, end, s);
    if (ec != std::errc() || p != end || !std::isfinite(s) || s < 0)
        user_error_in("RETRO_NCCL_TIMEOUT_S", cat("\"", value, "\" is not a number of seconds"),
                      cat("a number >= 0 (0: wait for ever), or unset for the default ", kCollectiveTimeoutDefaultS));
    return s;
}

}  // namespace retro
