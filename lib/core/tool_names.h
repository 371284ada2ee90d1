// The names of RetroKit's tools, in pipeline order: the manual pages' SEE ALSO lists the others, and a folder whose
// manifest names another tool is refused where one tool's output is expected (ChunkDb).
// provides: kRetroTools
#pragma once
#include <array>

namespace retro {

inline constexpr std::array<const char*, 7> kRetroTools = {"retro-tokenizer", "retro-chunk",    "retro-index", "retro-knn",
                                                           "retro-train",     "retro-generate", "retro-bench"};

}  // namespace retro
