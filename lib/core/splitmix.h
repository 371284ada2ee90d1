// splitmix64 (Steele, Lea, Flood 2014): a fixed, well-mixed 64-bit hash, the same on every machine, and the
// counter-based generator built on it. Used where a seed must give the same numbers everywhere: bow hashing,
// the validation split, sampling in retro-generate.
#pragma once
#include <cstdint>

namespace retro {

inline std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A fixed draw in [0, 1) for `key` (the top 53 bits of its hash): per-document and per-sequence choices by seed.
inline double splitmix_unit(std::uint64_t key) { return static_cast<double>(splitmix64(key) >> 11) * 0x1.0p-53; }

// state_i = seed + i * golden; draw_i = mix(state_i). uniform() takes the top 53 bits: [0, 1).
class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        const std::uint64_t x = state_;
        state_ += 0x9e3779b97f4a7c15ULL;
        return splitmix64(x);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    std::uint64_t state_;
};

}  // namespace retro
