// HostFiber: a function run on a stack of its own that can stop part way (yield) and be resumed from where it
// stopped, on this OS thread: the host block emulator's threads (tests/simt_host.h). Built on Boost.Context's
// fiber (a round trip of two switches ~17 ns; glibc's swapcontext, a system call each, ~1.6 us: docs/performance.md
// "Session 64").
// Beyond Boost's fiber it
// - hands an exception the function throws to the resume() that was running it (a kernel's failed check fails the
//   test instead of terminating the process);
// - closes a fiber that still waits (the emulator reporting a deadlock) by resuming it with yield() throwing, so its
//   frames unwind on its own stack through the same switches as any resume (Boost's own forced unwind at destruction
//   is never used);
// - tells AddressSanitizer of every switch between stacks after a fiber's creation (make sanitize), which it cannot
//   see by itself (Boost's constructor jumps onto the new stack and back once, into its own entry, unannounced);
// - stops the process, saying why, on a misuse that would jump to nowhere: resume() of a fiber running or ended,
//   yield() outside it, start() or close() of a fiber from inside itself.
#pragma once

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <utility>

#include "address_sanitizer.h"
#ifdef RETRO_TEST_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace retro::simt::host {

struct FiberAbort {};   // what yield() throws in a fiber being closed; the fiber's function never sees it end

class HostFiber {
public:
    HostFiber() = default;
    HostFiber(HostFiber&&) noexcept = default;
    HostFiber& operator=(HostFiber&&) = delete;
    ~HostFiber() { close(); }

    // Ready to run fn from its start on a stack of stack_bytes (it runs at the first resume()).
    void start(std::function<void()> fn, std::size_t stack_bytes) {
        close();   // (refuses inside the fiber itself)
        s_ = std::make_unique<State>();
        State* const s = s_.get();
        s->fiber = boost::context::fiber(std::allocator_arg, StackAllocator{stack_bytes, &s->stack},
                                         [s, fn = std::move(fn)](boost::context::fiber&& caller) {
                                             s->caller = std::move(caller);
                                             switch_end(nullptr, &s->caller_stack);   // a new stack: no fake stack
                                             if (!s->closing) {
                                                 try {
                                                     fn();
                                                 } catch (const FiberAbort&) {
                                                 } catch (const boost::context::detail::forced_unwind&) {
                                                     throw;   // Boost's own unwinding must go through
                                                 } catch (...) {
                                                     s->error = std::current_exception();
                                                 }
                                             }
                                             s->ended = true;
                                             switch_begin(nullptr, s->caller_stack);   // null: this stack ends
                                             return std::move(s->caller);
                                         });
    }

    // Runs the fiber until it yields or its function returns; rethrows what the function threw.
    void resume() {
        if (!s_ || !s_->fiber)
            misuse(s_ && s_->running ? "resume() of the fiber that runs" : "resume() of no fiber, or of one that ended");
        switch_into();
        if (s_->error) std::rethrow_exception(std::exchange(s_->error, nullptr));
    }

    // From inside the fiber: back to the resume() running it, until the next resume(). Throws FiberAbort where the
    // fiber is being closed.
    void yield() {
        if (!s_ || !s_->running) misuse("yield() outside the fiber");
        State& s = *s_;
        switch_begin(&s.fake_stack, s.caller_stack);
        s.caller = std::move(s.caller).resume();
        switch_end(s.fake_stack, &s.caller_stack);
        if (s.closing) throw FiberAbort{};
    }

    bool ended() const { return !s_ || s_->ended; }

    // Ends a fiber that has not ended: its function (if it started) unwinds from where it waits.
    void close() noexcept {
        if (s_ && s_->running) misuse("start() or close() of a fiber from inside itself");
        if (!s_ || !s_->fiber) return;
        s_->closing = true;
        switch_into();   // (the function's catch drops what its unwinding throws: it has nowhere to go)
    }

private:
    struct StackBounds {
        const void* bottom = nullptr;
        std::size_t size = 0;
    };
    struct State {
        boost::context::fiber fiber;    // where the fiber waits (empty while it runs and once it ended)
        boost::context::fiber caller;   // while it runs: where yield() and the end return to
        std::exception_ptr error;
        bool closing = false, ended = false, running = false;
        StackBounds stack, caller_stack;
        void* fake_stack = nullptr;   // ASan's fake frames of the fiber while it waits
    };
    // Boost.Context's StackAllocator: malloc'd stacks (as its fixedsize_stack) whose bounds ASan is told of.
    struct StackAllocator {
        std::size_t bytes;
        StackBounds* bounds;
        boost::context::stack_context allocate() {
            void* const p = std::malloc(bytes);
            if (!p) throw std::bad_alloc();
            *bounds = {p, bytes};
            boost::context::stack_context sc;
            sc.size = bytes;
            sc.sp = static_cast<char*>(p) + bytes;   // the stack grows down from its top
            return sc;
        }
        void deallocate(boost::context::stack_context& sc) noexcept {
            std::free(static_cast<char*>(sc.sp) - sc.size);
        }
    };

    void switch_into() {
        void* fake = nullptr;
        s_->running = true;
        switch_begin(&fake, s_->stack);
        s_->fiber = std::move(s_->fiber).resume();
        switch_end(fake, nullptr);
        s_->running = false;
    }
    [[noreturn]] static void misuse(const char* what) noexcept {
        std::fprintf(stderr, "HostFiber: %s\n", what);
        std::abort();
    }
#ifdef RETRO_TEST_ASAN
    static void switch_begin(void** fake, const StackBounds& to) {
        __sanitizer_start_switch_fiber(fake, to.bottom, to.size);
    }
    static void switch_end(void* fake, StackBounds* from) {
        __sanitizer_finish_switch_fiber(fake, from ? &from->bottom : nullptr, from ? &from->size : nullptr);
    }
#else
    static void switch_begin(void**, const StackBounds&) {}
    static void switch_end(void*, StackBounds*) {}
#endif

    std::unique_ptr<State> s_;
};

}  // namespace retro::simt::host
