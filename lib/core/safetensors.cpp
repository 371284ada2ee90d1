// Implementation of safetensors.h.
#include "core/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/lfs_pointer.h"

namespace retro {
namespace {
constexpr std::uint64_t kMaxHeader = 100u << 20;   // the reference library's limit
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
    const std::uint8_t* p = file_.data();
    std::size_t size = file_.size();
    refuse_lfs_pointer(path, p, size);
    if (size < 8) user_error_in(path, "not a .safetensors file (shorter than its 8-byte header length)");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | p[i];
    if (n > kMaxHeader || n > size - 8) {
        // a text file given for weights (a config.json, a manifest) opens with '{' or '[' after blanks, where a
        // .safetensors file's first 8 bytes are a little-endian length (under 100 MB: its high bytes 0, not text)
        std::size_t at = 0;
        while (at < size && at < 64 && (p[at] == ' ' || p[at] == '\n' || p[at] == '\r' || p[at] == '\t')) ++at;
        bool text = at + 8 <= size;
        for (std::size_t i = at; text && i < at + 8; ++i) text = p[i] >= 0x20 || p[i] == '\n' || p[i] == '\r' || p[i] == '\t';
        if (text && (p[at] == '{' || p[at] == '['))
            user_error_in(path, "is a JSON text file, not a .safetensors file of weights",
                          "pass the weights (a run's model.safetensors, or a checkpoint folder)");
        user_error_in(path, "corrupt .safetensors header: length " + std::to_string(n) + " does not fit the file");
    }
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(p + 8, p + 8 + n);
    } catch (const std::exception& e) {
        user_error_in(path, std::string("corrupt .safetensors header: bad JSON: ") + e.what());
    }
    if (!header.is_object()) user_error_in(path, "corrupt .safetensors header: not a JSON object");
    const std::uint8_t* data = p + 8 + n;
    std::uint64_t data_size = size - 8 - n;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        const auto& e = it.value();
        if (name == "__metadata__") {
            if (!e.is_object()) user_error_in(path, "corrupt .safetensors header: __metadata__ is not an object");
            for (auto m = e.begin(); m != e.end(); ++m)
                if (m.value().is_string()) metadata_[m.key()] = m.value().get<std::string>();
            continue;
        }
        auto bad = [&](const std::string& why) {
            user_error_in(path, "corrupt .safetensors entry '" + name + "': " + why);
        };
        if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
            bad("needs dtype, shape and data_offsets");
        if (!e["dtype"].is_string()) bad("dtype is not a string");
        TensorView v;
        if (!dtype_from_safetensors_name(e["dtype"].get<std::string>(), v.dtype))
            bad("unsupported dtype " + e["dtype"].get<std::string>());
        if (!e["shape"].is_array() || e["shape"].size() > 32) bad("shape is not a list of at most 32 sizes");
        for (const auto& d : e["shape"]) {
            if (!d.is_number_unsigned()) bad("shape holds a non-integer or negative size");
            if (d.get<std::uint64_t>() > (std::uint64_t(1) << 58)) bad("shape is impossibly large");
            v.shape.push_back(d.get<std::int64_t>());
        }
        const auto& off = e["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
            bad("data_offsets is not [begin, end]");
        std::uint64_t begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
        if (begin > end || end > data_size) bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] lie outside the file's " + std::to_string(data_size) + " data bytes");
        std::int64_t numel = shape_numel(v.shape, path);
        if (static_cast<std::uint64_t>(numel) > (std::uint64_t(1) << 62) / dtype_size(v.dtype)) bad("shape is impossibly large");
        if (static_cast<std::uint64_t>(numel) * dtype_size(v.dtype) != end - begin)
            bad("shape " + shape_string(v.shape) + " needs " + std::to_string(numel * dtype_size(v.dtype)) +
                " bytes but data_offsets span " + std::to_string(end - begin));
        v.data = data + begin;
        v.bytes = end - begin;
        ranges.emplace_back(begin, end);
        tensors_[name] = v;
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second)
            user_error_in(path, "corrupt .safetensors header: tensors overlap");
    // only now, the ranges disjoint (so the copies together are at most the file's data): a header of many entries
    // over one unaligned range would otherwise have been copied once an entry
    for (auto& [name, v] : tensors_)
        if (reinterpret_cast<std::uintptr_t>(v.data) % dtype_size(v.dtype) != 0 && v.bytes > 0) {
            copies_.emplace_back((v.bytes + 7) / 8);
            std::memcpy(copies_.back().data(), v.data, v.bytes);
            v.data = copies_.back().data();
            copied_bytes_ += v.bytes;
        }
}

const TensorView& SafetensorsFile::get(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) user_error_in(path(), "has no tensor named '" + name + "'");
    return it->second;
}

const TensorView& SafetensorsFile::get(const std::string& name, DType dtype,
                                       const std::vector<std::int64_t>& shape) const {
    const TensorView& v = get(name);
    if (v.dtype != dtype)
        user_error_in(path(), "tensor '" + name + "' has dtype " + dtype_name(v.dtype) + ", expected " + dtype_name(dtype));
    if (v.shape != shape)
        user_error_in(path(), "tensor '" + name + "' has shape " + shape_string(v.shape) + ", expected " + shape_string(shape));
    return v;
}

void safetensors_save(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json header;
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        std::uint64_t bytes = static_cast<std::uint64_t>(shape_numel(t.shape, path)) * dtype_size(t.dtype);
        header[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::uint64_t n = text.size();
    std::uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(n >> (8 * i));
    AtomicFile f(path);
    f.write(len, 8);
    f.write(text);
    for (const auto& t : tensors)
        f.write(t.data, static_cast<std::size_t>(shape_numel(t.shape, path)) * dtype_size(t.dtype));
    f.commit();
}

}  // namespace retro
