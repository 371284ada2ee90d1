// Implementation of synthetic_text.h.
#include "data/synthetic_text.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "core/error.h"

namespace retro {
namespace {

const std::vector<std::string>& lexicon() {
    static const std::vector<std::string> words = [] {
        const char* syll[] = {"ka", "ro", "mi", "tel", "an", "su", "bor", "el", "vi", "dun", "ta", "le", "qua",
                              "sen", "o", "ri", "pal", "ne", "gu", "stra", "in", "fo", "me", "da", "lis", "tor"};
        std::mt19937_64 rng(7);
        std::vector<std::string> w;
        for (int i = 0; i < 4000; ++i) {
            int n = 1 + static_cast<int>(rng() % 4);
            std::string s;
            for (int k = 0; k < n; ++k) s += syll[rng() % (sizeof syll / sizeof *syll)];
            w.push_back(s);
        }
        return w;
    }();
    return words;
}

}  // namespace

std::string synthetic_text(std::uint64_t seed, std::size_t bytes) {
    const auto& words = lexicon();
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::string out;
    out.reserve(bytes + 32);
    int in_sentence = 0, in_line = 0;
    while (out.size() < bytes) {
        // Zipf-like: index = floor(N^u) - 1 puts most mass on the first words.
        std::size_t idx = static_cast<std::size_t>(std::pow(static_cast<double>(words.size()), u(rng))) - 1;
        std::string w = words[idx % words.size()];
        if (in_sentence == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
        out += w;
        ++in_sentence, ++in_line;
        if (in_sentence > 4 && rng() % 8 == 0) out += '.', in_sentence = 0;
        else if (rng() % 11 == 0) out += ',';
        if (in_line > 12 && rng() % 4 == 0) out += '\n', in_line = 0;
        else out += ' ';
    }
    return out;
}

std::int64_t synthetic_jsonl_write(const std::string& path, std::uint64_t seed, std::int64_t total_bytes,
                                   std::int64_t mean_doc_bytes) {
    std::ofstream out(path, std::ios::binary);
    if (!out) user_error_in(path, "cannot create");
    std::mt19937_64 rng(seed);
    std::int64_t written = 0, docs = 0;
    while (written < total_bytes) {
        std::size_t len = 1 + static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(2 * mean_doc_bytes));
        std::string text = synthetic_text(rng(), len);
        nlohmann::json j = {{"text", text}};
        out << j.dump() << '\n';
        written += static_cast<std::int64_t>(text.size());
        ++docs;
    }
    if (!out) user_error_in(path, "write failed");
    return docs;
}

}  // namespace retro
