// Implementation of sentencepiece_load.h.
//
// The character map (sentencepiece normalizer.cc, DecodePrecompiledCharsMap): a little-endian uint32 trie size T,
// T bytes of darts-clone units (uint32 each), then the replacement strings. The normaliser's prefix search (darts.h
// commonPrefixSearch) reads, for input bytes c1 c2 ...:
//   node = units[0].offset();  then per byte c:  pos = node ^ c;  u = units[pos];  stop unless label(u) == c;
//   node = pos ^ u.offset();   and where u has a leaf, the replacement at units[node].value() in the strings.
// Every position any byte sequence can reach is checked here, each trie node once.
#include "text/sentencepiece_load.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/input_stamps.h"
#include "core/lfs_pointer.h"
#include "text/protobuf_wire.h"

namespace retro {

namespace {

std::uint32_t load_u32(const char* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

// darts-clone's DoubleArrayUnit
std::uint32_t unit_offset(std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
bool unit_has_leaf(std::uint32_t u) { return ((u >> 8) & 1) != 0; }
std::uint32_t unit_value(std::uint32_t u) { return u & ((1u << 31) - 1); }
std::uint32_t unit_label(std::uint32_t u) { return u & ((1u << 31) | 0xFF); }

}  // namespace

std::string precompiled_charsmap_problem(std::string_view charsmap) {
    if (charsmap.size() <= 4) return "";   // sentencepiece: "Blob for normalization rule is broken"
    const std::uint32_t trie_bytes = load_u32(charsmap.data());
    if (trie_bytes >= charsmap.size()) return "";   // sentencepiece: "Trie data size exceeds the input blob size"
    const char* units = charsmap.data() + 4;
    const std::size_t count = trie_bytes / 4;
    const std::string_view strings = charsmap.substr(4 + static_cast<std::size_t>(trie_bytes));
    const std::size_t last_nul = strings.rfind('\0');
    if (count == 0) return "its trie has no root";
    const auto unit = [&](std::size_t k) { return load_u32(units + 4 * k); };
    std::vector<char> seen(count, 0);
    std::vector<std::uint32_t> nodes = {unit_offset(unit(0))};
    while (!nodes.empty()) {
        const std::uint32_t node = nodes.back();
        nodes.pop_back();
        // node ^ c for c in 0..255 spans node's aligned block of 256 positions
        if ((static_cast<std::size_t>(node) | 0xFF) >= count) return "its trie reaches past its end";
        if (seen[node]) continue;
        seen[node] = 1;
        for (std::uint32_t c = 0; c < 256; ++c) {
            const std::uint32_t pos = node ^ c, u = unit(pos);
            if (unit_label(u) != c) continue;
            const std::uint32_t next = pos ^ unit_offset(u);
            if (unit_has_leaf(u)) {
                if (next >= count) return "a leaf of its trie lies past its end";
                const std::uint32_t value = unit_value(unit(next));
                if (last_nul == std::string_view::npos || value > last_nul)
                    return "a replacement string starts past its end or is not NUL-terminated";
            }
            nodes.push_back(next);
        }
    }
    return "";
}

void sentencepiece_model_check(const std::string& path, std::string_view model) {
    // bytes this reader cannot walk to the end (protocol-buffer groups, which no sentencepiece model has, or damage)
    // are refused: protobuf itself skips a group, and a map behind one would reach libsentencepiece unchecked
    const auto unreadable = [&] {
        // a text file (a BERT vocab.txt, a tokenizer.json): another kind of tokenizer, not a damaged model
        const std::string_view head = model.substr(0, 4096);
        const bool text = !head.empty() && std::all_of(head.begin(), head.end(), [](char ch) {
            const auto c = static_cast<unsigned char>(ch);
            return c >= 0x20 || c == '\n' || c == '\r' || c == '\t';
        });
        if (text)
            user_error_in(path, "is a text file (a WordPiece or BPE vocabulary, a tokenizer.json?), not a sentencepiece "
                                "model: RetroKit's databases and runs take only sentencepiece models",
                          "pass a sentencepiece .model file (retro-tokenizer train makes one)");
        user_error_in(path, "is not a sentencepiece model RetroKit can check (its protocol buffer does not parse as one)",
                      "restore the file from the checkpoint or tokenizer it came from");
    };
    const bool whole = protobuf_for_each_bytes_field(model, [&](std::uint64_t number, std::string_view spec) {
        if (number != 3 && number != 5) return;   // ModelProto.normalizer_spec, .denormalizer_spec
        const bool spec_whole = protobuf_for_each_bytes_field(spec, [&](std::uint64_t field, std::string_view map) {
            if (field != 2) return;   // NormalizerSpec.precompiled_charsmap
            const std::string problem = precompiled_charsmap_problem(map);
            if (!problem.empty())
                user_error_in(path, "has a broken normalizer character map (" + problem + ")",
                              "restore the file from the checkpoint or tokenizer it came from");
        });
        if (!spec_whole) unreadable();
    });
    if (!whole) unreadable();
}

void sentencepiece_load_bytes(sentencepiece::SentencePieceProcessor& sp, const std::string& path, const std::string& bytes,
                                     const std::string& fix) {
    // libsentencepiece's own checks end in a status, but its trie builder throws (Darts: a zero-length key, from a
    // piece that normalises to nothing)
    try {
        const auto status = sp.LoadFromSerializedProto(bytes);
        if (!status.ok()) user_error_in(path, "cannot load sentencepiece model: " + status.ToString(), fix);
    } catch (const UserError&) {
        throw;
    } catch (const std::exception& e) {
        user_error_in(path, std::string("cannot load sentencepiece model: ") + e.what(), fix);
    }
}

std::string sentencepiece_model_bytes(const std::string& path) {
    std::string bytes;
    // (the model read is the one stamped, for the run's record: core/input_stamps.h)
    if (!input_read_whole(path, bytes)) user_error_in(path, "cannot be opened", "check that the file exists and is readable");
    sentencepiece_model_check(path, bytes);
    return bytes;
}

void sentencepiece_load(sentencepiece::SentencePieceProcessor& sp, const std::string& path, SentencepieceLayout layout,
                        const std::string& what, const std::string& file_name) {
    if (!std::filesystem::is_regular_file(path))
        user_error_in(path, "missing (" + what + ")", "copy the checkpoint's " + file_name + " into the folder");
    refuse_lfs_pointer_file(path);
    std::string bytes;
    if (std::filesystem::path(path).extension() == ".json") {
        bytes = sentencepiece_model_from_tokenizer_json(path, layout);
        sentencepiece_model_check(path, bytes);
    } else {
        bytes = sentencepiece_model_bytes(path);
    }
    sentencepiece_load_bytes(sp, path, bytes, "restore the checkpoint's " + file_name);
}

}  // namespace retro
