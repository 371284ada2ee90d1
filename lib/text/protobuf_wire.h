// A reader of the protocol-buffer wire format for the few fields RetroKit reads of a sentencepiece ModelProto (its
// character maps, its normaliser's flags) without a protobuf library: each field of one message, in order.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace retro {

// Calls on_bytes(number, bytes) for each length-delimited field of `msg` and on_varint(number, value) for each varint
// field (fixed-width fields are skipped); false where the bytes are not a protocol buffer of such fields (a group,
// which no sentencepiece model has, or damage).
template <typename OnBytes, typename OnVarint>
bool protobuf_for_each_field(std::string_view msg, OnBytes&& on_bytes, OnVarint&& on_varint) {
    std::size_t i = 0;
    const auto varint = [&]() -> std::optional<std::uint64_t> {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64 && i < msg.size(); shift += 7) {
            const auto b = static_cast<unsigned char>(msg[i++]);
            v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        return std::nullopt;
    };
    while (i < msg.size()) {
        const auto key = varint();
        if (!key) return false;
        const std::uint64_t number = *key >> 3, wire = *key & 7;
        if (wire == 0) {
            const auto value = varint();
            if (!value) return false;
            on_varint(number, *value);
        } else if (wire == 1 || wire == 5) {
            const std::size_t n = wire == 1 ? 8 : 4;
            if (msg.size() - i < n) return false;
            i += n;
        } else if (wire == 2) {
            const auto len = varint();
            if (!len || *len > msg.size() - i) return false;
            on_bytes(number, msg.substr(i, static_cast<std::size_t>(*len)));
            i += static_cast<std::size_t>(*len);
        } else {
            return false;
        }
    }
    return true;
}

// protobuf_for_each_field over the length-delimited fields alone.
template <typename OnBytes>
bool protobuf_for_each_bytes_field(std::string_view msg, OnBytes&& on_bytes) {
    return protobuf_for_each_field(msg, on_bytes, [](std::uint64_t, std::uint64_t) {});
}

}  // namespace retro
