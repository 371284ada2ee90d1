// Helpers shared by the embedder golden tests (test_bert.cpp, test_t5.cpp, test_clip.cpp): reading a
// golden JSON file, checking tokenizer ids and embeddings against a golden .npy row by row, and editing a copied model
// folder (a JSON file, the tensor names of a .safetensors file).
#pragma once
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace retro::test {

nlohmann::json golden_json(const std::filesystem::path& p);   // REQUIREs that it exists

// CHECKs each row of got [texts.size(), dim] against the golden rows: cosine >= min_cosine, unit
// length, and every element within max_abs; reports and returns the minimum cosine.
double check_embeddings(const std::vector<float>& got, const std::filesystem::path& golden, int dim,
                        const std::vector<std::string>& texts, double min_cosine, double max_abs);

// CHECKs encode(text, max_length) against the golden ids: golden["ids"] maps each max_length (a string) to
// one id list per golden["texts"] entry. Returns how many lists were compared.
int check_golden_ids(const nlohmann::json& golden, const std::function<std::vector<int>(const std::string&, int)>& encode);

// Rewrites a JSON file through `edit`.
void edit_json(const std::filesystem::path& file, const std::function<void(nlohmann::json&)>& edit);
// Rewrites a .safetensors file with each tensor name passed through `rename`; an empty name drops the tensor.
void rewrite_tensors(const std::filesystem::path& file, const std::function<std::string(const std::string&)>& rename);

}  // namespace retro::test
