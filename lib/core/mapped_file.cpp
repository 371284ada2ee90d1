// Implementation of mapped_file.h over mmap(2), with SIGBUS on a mapped page said in one line.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "core/input_stamps.h"
#include "core/output_folder.h"
#include "core/terminal_text.h"

namespace retro {
namespace {

// The mappings alive, for SIGBUS's one line: a mapped input truncated (or replaced in place by `cp`) while a tool
// read it killed the tool with SIGBUS, exit 135 and no word (a helper's audit, session 69: retro-train, retro-knn,
// retro-index, retro-generate). Fixed slots, read lock-free by the handler: `start` is set last and cleared first.
struct MapSlot {
    std::atomic<const std::uint8_t*> start{nullptr};
    std::size_t size = 0;
    char line[768] = {0};   // the error line, formatted beforehand
};
constexpr int kMapSlots = 1024;
MapSlot g_slots[kMapSlots];
std::mutex g_slots_mutex;
std::once_flag g_sigbus_installed;

extern "C" void on_sigbus(int sig, siginfo_t* info, void*) {
    // a fault the kernel raised (si_code > 0); a SIGBUS sent by kill(2) carries no address
    const auto* at = static_cast<const std::uint8_t*>(info && info->si_code > 0 ? info->si_addr : nullptr);
    for (MapSlot& slot : g_slots) {
        if (!at) break;
        const std::uint8_t* start = slot.start.load(std::memory_order_acquire);
        if (start && at >= start && at < start + slot.size) {
            ssize_t w = ::write(2, slot.line, std::strlen(slot.line));
            (void)w;
            output_folder_locks_remove();
            ::_exit(2);   // the run's output stays unfinished: nothing marks it complete
        }
    }
    // not a mapped file's page: the default action, as before
    std::signal(sig, SIG_DFL);
    ::raise(sig);
}

void sigbus_install() {
    struct sigaction old {};
    if (::sigaction(SIGBUS, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) return;
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
}

void slot_add(const std::uint8_t* data, std::size_t size, const std::string& path) {
    std::call_once(g_sigbus_installed, sigbus_install);
    std::lock_guard<std::mutex> lock(g_slots_mutex);
    for (MapSlot& slot : g_slots) {
        if (slot.start.load(std::memory_order_relaxed) != nullptr) continue;
        slot.size = size;
        // (the path cut to fit: the line always ends in its newline)
        std::snprintf(slot.line, sizeof slot.line,
                      "%s: error: %s: could not be read (truncated or rewritten while this run read it, or an I/O error) "
                      "(fix: leave a run's inputs alone while it runs (RetroKit's tools replace theirs by rename, which is "
                      "safe); restore the file or make it again, then run this command again)\n",
                      program_invocation_short_name, terminal_text_cut(terminal_text(path, true), 400).c_str());
        slot.start.store(data, std::memory_order_release);
        return;
    }   // (all slots taken: this mapping's SIGBUS keeps the default action)
}

void slot_remove(const std::uint8_t* data) {
    std::lock_guard<std::mutex> lock(g_slots_mutex);
    for (MapSlot& slot : g_slots)
        if (slot.start.load(std::memory_order_relaxed) == data) {
            slot.start.store(nullptr, std::memory_order_release);
            return;
        }
}

void unmap(const std::uint8_t* data, std::size_t size) {
    if (!data) return;
    slot_remove(data);
    ::munmap(const_cast<std::uint8_t*>(data), size);
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) user_error_in(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        user_error_in(path, "not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    input_stamp_opened(path, st);   // the file read, for the run's record (core/input_stamps.h)
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            ::close(fd);
            user_error_in(path, std::string("cannot map: ") + std::strerror(errno));
        }
        data_ = static_cast<const std::uint8_t*>(p);
        slot_add(data_, size_, path);
    }
    ::close(fd);
}

MappedFile::~MappedFile() { unmap(data_, size_); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        unmap(data_, size_);
        path_ = std::move(o.path_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
    }
    return *this;
}

}  // namespace retro
