// Each segmentation's score under a unigram model, summed in double: the whole text (sentencepiece's Encode as is)
// against parts of 64 KiB and 1 MiB (Tokenizer::encode): docs/chunk.md "Long documents". A byte-fallback run scores a
// constant for each character (unknown in every segmentation alike). Run by hand, not built by CMake:
//   g++ -O2 -std=c++20 -I lib tests/reference/long_text/score.cpp -o /tmp/score -L build -lretrokit \
//       -Wl,-rpath,$PWD/build -lsentencepiece
//   /tmp/score tok/tok.model long.txt
#include <cstdio>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <sentencepiece_processor.h>
#include "text/tokenizer.h"
int main(int argc, char** argv) {
    retro::Tokenizer tok(argv[1]);
    sentencepiece::SentencePieceProcessor sp; sp.Load(argv[1]);
    float minscore = 1e9; for (int i = 0; i < sp.GetPieceSize(); i++) if (!sp.IsControl(i) && !sp.IsUnknown(i) && !sp.IsByte(i) && !sp.IsUnused(i)) minscore = std::min(minscore, sp.GetScore(i));
    double unk = minscore - 10.0;
    std::ifstream in(argv[2]); std::stringstream ss; ss << in.rdbuf(); std::string text = ss.str();
    auto score = [&](const std::vector<int>& ids) { double s = 0; for (int id : ids) { if (sp.IsByte(id)) { std::string p = sp.IdToPiece(id); unsigned b = std::stoul(p.substr(3,2), nullptr, 16); if ((b & 0xC0) != 0x80) s += unk; } else s += sp.GetScore(id);} return s; };
    auto a = tok.encode_whole(text);
    for (size_t part : {1ul<<16, 1ul<<20}) {
        auto b = tok.encode(text, part);
        std::printf("part=%zu whole ids=%zu score=%.4f  parts ids=%zu score=%.4f  diff(parts-whole)=%.4f\n", part, a.size(), score(a), b.size(), score(b), score(b)-score(a));
    }
}
