// Peak memory and time of encoding one long text, whole (sentencepiece's Encode as is) or in parts (Tokenizer::encode):
// docs/chunk.md "Long documents". Run by hand, not built by CMake:
//   g++ -O2 -std=c++20 -I lib tests/reference/long_text/memtest.cpp -o /tmp/memtest -L build -lretrokit \
//       -Wl,-rpath,$PWD/build -lsentencepiece
//   /tmp/memtest tok/tok.model long.txt whole|parts
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <chrono>
#include "text/tokenizer.h"
int main(int argc, char** argv) {
    retro::Tokenizer tok(argv[1]);
    std::ifstream in(argv[2]); std::stringstream ss; ss << in.rdbuf(); std::string text = ss.str();
    rusage r0; getrusage(RUSAGE_SELF, &r0);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int> ids = std::string(argv[3]) == "whole" ? tok.encode_whole(text) : tok.encode(text);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rusage r; getrusage(RUSAGE_SELF, &r);
    std::printf("%s bytes=%zu ids=%zu maxrss_before=%ld MB maxrss=%ld MB time=%.2f s\n", argv[3], text.size(), ids.size(), r0.ru_maxrss/1024, r.ru_maxrss/1024, s);
}
