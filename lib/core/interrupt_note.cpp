// Implementation of interrupt_note.h.
#include "core/interrupt_note.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

namespace retro {
namespace {

char g_note[768];

extern "C" void on_interrupt_note(int sig) {
    ssize_t w = ::write(2, g_note, std::strlen(g_note));
    (void)w;
    ::_exit(128 + sig);
}

}  // namespace

void interrupt_note_install(const std::string& tool, const std::string& out) {
    std::snprintf(g_note, sizeof g_note,
                  "\n%s: interrupted; %s keeps its finished parts: continue with the same command and --resume\n",
                  tool.c_str(), out.c_str());
    std::signal(SIGINT, on_interrupt_note);
    std::signal(SIGTERM, on_interrupt_note);
}

}  // namespace retro
