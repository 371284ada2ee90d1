// Helpers shared by the embedder golden tests (test_bert.cpp, test_t5.cpp): reading a golden JSON
// file, and checking embeddings against a golden .npy row by row.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace retro::test {

nlohmann::json golden_json(const std::filesystem::path& p);   // REQUIREs that it exists

// CHECKs each row of got [texts.size(), dim] against the golden rows: cosine >= min_cosine, unit
// length, and every element within max_abs; reports and returns the minimum cosine.
double check_embeddings(const std::vector<float>& got, const std::filesystem::path& golden, int dim,
                        const std::vector<std::string>& texts, double min_cosine, double max_abs);

}  // namespace retro::test
