// Implementation of test_embed_util.h.
#include "test_embed_util.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/npy.h"
#include "core/safetensors.h"
#include "test_util.h"

namespace retro::test {

nlohmann::json golden_json(const std::filesystem::path& p) {
    std::ifstream in(p);
    REQUIRE_MESSAGE(in.good(), "missing golden file " << p.string());
    return nlohmann::json::parse(in);
}

int check_golden_ids(const nlohmann::json& golden, const std::function<std::vector<int>(const std::string&, int)>& encode) {
    const auto texts = golden["texts"].get<std::vector<std::string>>();
    int compared = 0;
    for (const auto& [max_length, ids] : golden["ids"].items())
        for (std::size_t i = 0; i < texts.size(); ++i) {
            CAPTURE(texts[i]);
            CAPTURE(max_length);
            CHECK(encode(texts[i], std::stoi(max_length)) == ids[i].get<std::vector<int>>());
            ++compared;
        }
    return compared;
}

double check_embeddings(const std::vector<float>& got, const std::filesystem::path& golden, int dim,
                        const std::vector<std::string>& texts, double min_cosine, double max_abs) {
    NpyArray ref(golden.string());
    REQUIRE(ref.dim(0) == static_cast<std::int64_t>(texts.size()));
    REQUIRE(ref.dim(1) == dim);
    const float* r = ref.data<float>();
    double worst = 1.0, largest = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        double dot = 0, na = 0, nb = 0;
        for (int j = 0; j < dim; ++j) {
            const double a = got[i * dim + j], b = r[i * dim + j];
            largest = std::max(largest, std::abs(a - b));
            dot += a * b;
            na += a * a;
            nb += b * b;
        }
        const double cos = dot / std::sqrt(na * nb + 1e-30);
        CAPTURE(texts[i]);
        CHECK(cos >= min_cosine);
        CHECK(std::abs(std::sqrt(na) - 1.0) < 1e-5);   // L2-normalised
        worst = std::min(worst, cos);
    }
    CHECK(largest <= max_abs);
    MESSAGE(golden.filename().string() << ": min cosine " << worst << ", max |difference| " << largest);
    return worst;
}

void edit_json(const std::filesystem::path& file, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = golden_json(file);
    edit(j);
    write_text(file, j.dump(2));
}

void rewrite_tensors(const std::filesystem::path& file, const std::function<std::string(const std::string&)>& rename) {
    std::vector<std::vector<char>> bytes;
    std::vector<TensorToWrite> out;
    {
        SafetensorsFile st(file.string());
        for (const auto& [name, t] : st.tensors()) {
            std::string to = rename(name);
            if (to.empty()) continue;
            bytes.emplace_back(static_cast<const char*>(t.data), static_cast<const char*>(t.data) + t.bytes);
            out.push_back({to, t.dtype, t.shape, nullptr});
        }
    }
    for (std::size_t i = 0; i < out.size(); ++i) out[i].data = bytes[i].data();
    safetensors_save(file.string(), out);
}

}  // namespace retro::test
