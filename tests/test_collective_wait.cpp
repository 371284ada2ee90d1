// core/collective_wait.h against scripted hooks (the CUDA build gives them cudaStreamQuery and NCCL's calls): a stream
// that completes returns without an abort; an asynchronous error, a throwing query and a timeout each abort the
// communicator exactly once before the step fails, naming why; RETRO_NCCL_TIMEOUT_S's values.
#include <chrono>
#include <stdexcept>

#include "core/collective_wait.h"
#include "core/error.h"
#include "test_util.h"

using namespace retro;
using namespace std::chrono_literals;

namespace {

// Hooks over counters: the stream completes at poll `done_at` (never where < 0), the asynchronous error appears at
// poll `error_at` (never where < 0), the stream query throws at poll `throw_at` (never where < 0).
struct Scripted {
    int done_at = -1, error_at = -1, throw_at = -1;
    int polls = 0, error_asks = 0, aborts = 0;
    CollectiveWaitHooks hooks() {
        CollectiveWaitHooks h;
        h.stream_done = [this] {
            const int at = polls++;
            if (at == throw_at) throw InternalError("cudaStreamQuery: an illegal memory access");
            return done_at >= 0 && at >= done_at;
        };
        h.async_error = [this]() -> std::string {
            const int at = error_asks++;
            return error_at >= 0 && at >= error_at ? "remote process exited or there was a network error" : "";
        };
        h.abort = [this] { aborts++; };
        return h;
    }
};

std::string failure_of(Scripted& s, std::chrono::duration<double> timeout) {
    try {
        collective_wait(s.hooks(), "ncclAllReduce", timeout, "RETRO_NCCL_TIMEOUT_S", 1us);
    } catch (const InternalError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("collective wait: a stream that completes returns after its polls and never aborts") {
    Scripted s;
    s.done_at = 5;
    CHECK(failure_of(s, 600s) == "");
    CHECK(s.polls == 6);
    CHECK(s.error_asks == 5);   // asked between the polls that found the stream busy
    CHECK(s.aborts == 0);
    Scripted at_once;
    at_once.done_at = 0;
    CHECK(failure_of(at_once, 0s) == "");   // timeout 0: none
    CHECK(at_once.error_asks == 0);
}

TEST_CASE("collective wait: an asynchronous error aborts the communicator once and fails naming NCCL's reason") {
    Scripted s;
    s.error_at = 3;
    const std::string why = failure_of(s, 600s);
    CHECK(why == "ncclAllReduce: remote process exited or there was a network error (another rank failed or its "
                 "connection was lost)");
    CHECK(s.aborts == 1);
    CHECK(s.polls == 4);
}

TEST_CASE("collective wait: a failing stream query aborts the communicator and its own error leaves") {
    Scripted s;
    s.throw_at = 2;
    CHECK(failure_of(s, 600s) == "cudaStreamQuery: an illegal memory access");
    CHECK(s.aborts == 1);
    CHECK(s.polls == 3);
}

TEST_CASE("collective wait: no completion within the timeout aborts the communicator and says where the timeout came from") {
    Scripted s;   // a peer that died over NVLink: no error ever reported, the stream never done
    const auto start = std::chrono::steady_clock::now();
    const std::string why = failure_of(s, 0.05s);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    CHECK(took.count() >= 0.05);
    CHECK(why.rfind("ncclAllReduce: not complete after ", 0) == 0);
    CHECK(why.find(" s (RETRO_NCCL_TIMEOUT_S 0.05): another rank stopped, fell out of step or lost its GPU") !=
          std::string::npos);
    CHECK(s.aborts == 1);
    CHECK(s.polls > 1);
}

TEST_CASE("collective wait: RETRO_NCCL_TIMEOUT_S takes seconds >= 0 and refuses anything else naming itself") {
    CHECK(collective_timeout_from_env(nullptr) == kCollectiveTimeoutDefaultS);
    CHECK(collective_timeout_from_env("") == kCollectiveTimeoutDefaultS);
    CHECK(kCollectiveTimeoutDefaultS == 600);
    CHECK(collective_timeout_from_env("0") == 0);
    CHECK(collective_timeout_from_env("90") == 90);
    CHECK(collective_timeout_from_env("2.5") == 2.5);
    for (const char* bad : {"-1", "ten", "10s", " 10", "nan", "inf", "1e999"}) {
        CAPTURE(bad);
        try {
            collective_timeout_from_env(bad);
            FAIL("accepted");
        } catch (const UserError& e) {
            CHECK(std::string(e.what()) == std::string("RETRO_NCCL_TIMEOUT_S: \"") + bad +
                                               "\" is not a number of seconds (fix: a number >= 0 (0: wait for ever), "
                                               "or unset for the default 600)");
        }
    }
}
