// Implementation of sentencepiece_cuts.h. The ModelProto fields read (sentencepiece_model.proto): ModelProto
// trainer_spec = 2 (TrainerSpec.treat_whitespace_as_suffix = 24, byte_fallback = 35, both default false),
// normalizer_spec = 3 (NormalizerSpec.precompiled_charsmap = 2, add_dummy_prefix = 3, remove_extra_whitespaces = 4,
// escape_whitespaces = 5, the three default true).
#include "text/sentencepiece_cuts.h"

#include <sentencepiece_processor.h>

#include <cstdint>
#include <cstdio>

#include "core/error.h"
#include "text/protobuf_wire.h"

namespace retro {

namespace {
constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";   // '▁' U+2581
}  // namespace

SentencepieceCuts::SentencepieceCuts(const sentencepiece::SentencePieceProcessor& sp, std::string_view model) {
    why_whole_ = read_model(sp, model);   // in the body: read_model sets the members declared after why_whole_
}

std::string SentencepieceCuts::read_model(const sentencepiece::SentencePieceProcessor& sp, std::string_view model) {
    bool has_normalizer = false, charsmap = false, dummy_prefix = true, escape = true, suffix = false,
         byte_fallback = false, specs_parsed = true;
    const bool parsed = protobuf_for_each_field(
        model,
        [&](std::uint64_t number, std::string_view spec) {
            if (number == 3) {
                has_normalizer = true;
                specs_parsed &= protobuf_for_each_field(
                    spec, [&](std::uint64_t f, std::string_view bytes) { charsmap |= f == 2 && !bytes.empty(); },
                    [&](std::uint64_t f, std::uint64_t v) {
                        if (f == 3) dummy_prefix = v != 0;
                        if (f == 4) remove_extra_whitespaces_ = v != 0;
                        if (f == 5) escape = v != 0;
                    });
            } else if (number == 2) {
                specs_parsed &= protobuf_for_each_field(
                    spec, [](std::uint64_t, std::string_view) {},
                    [&](std::uint64_t f, std::uint64_t v) {
                        if (f == 24) suffix = v != 0;
                        if (f == 35) byte_fallback = v != 0;
                    });
            }
        },
        [](std::uint64_t, std::uint64_t) {});
    if (!parsed || !specs_parsed || !has_normalizer) return "its normaliser spec is not readable";
    if (charsmap) return "its normaliser has a character map (not the identity)";
    if (!dummy_prefix || !escape || suffix)
        return "it adds no dummy prefix, keeps spaces as spaces or puts '▁' after a word";
    const int dummy = sp.PieceToId(kSpaceSymbol);
    if (sp.IsUnknown(dummy) || sp.IsControl(dummy) || sp.IsByte(dummy) || sp.IsUnused(dummy)) return "it has no piece '▁'";
    bool held[128] = {};
    for (int id = 0; id < sp.GetPieceSize(); ++id) {
        if (sp.IsControl(id) || sp.IsUnknown(id) || sp.IsByte(id)) continue;   // never matched against text
        const std::string piece = sp.IdToPiece(id);
        if (piece.find(kSpaceSymbol, 1) != std::string::npos)
            return "its piece '" + piece + "' holds '▁' past its start";
        for (char c : piece)
            if (static_cast<unsigned char>(c) < 128) held[static_cast<unsigned char>(c)] = true;
    }
    // without byte fallback sentencepiece may join a run of unknown characters into one unknown piece, so a byte no
    // piece holds would not be a boundary
    for (int b = 1; b < 128 && byte_fallback; ++b) {
        if (b == ' ' || held[b]) continue;
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        free_byte_[b] = sp.IsByte(sp.PieceToId(name));
    }
    dummy_id_ = dummy;
    return "";
}

bool SentencepieceCuts::is_cut(std::string_view text, std::size_t i) const {
    // 0 < i < size: a single space, or a byte no piece holds after a non-space. remove_extra_whitespaces strips a
    // text's trailing '▁' after escaping, a '▁' of the text itself too: no cut after one there.
    const auto c = static_cast<unsigned char>(text[i]);
    if (text[i - 1] == ' ') return false;
    if (remove_extra_whitespaces_ && i >= kSpaceSymbol.size() && text.substr(i - kSpaceSymbol.size(), kSpaceSymbol.size()) == kSpaceSymbol)
        return false;
    if (c == ' ') return i + 1 < text.size() && text[i + 1] != ' ';
    return c < 128 && free_byte_[c];
}

std::size_t SentencepieceCuts::next_cut(std::string_view text, std::size_t start, std::size_t max_part_bytes) const {
    if (!why_whole_.empty() || text.size() - start <= max_part_bytes) return text.size();
    const std::size_t limit = start + max_part_bytes;   // < text.size()
    for (std::size_t i = limit; i > start; --i)
        if (is_cut(text, i)) return i;
    for (std::size_t i = limit + 1; i < text.size(); ++i)
        if (is_cut(text, i)) return i;
    return text.size();
}

std::size_t SentencepieceCuts::for_each_part(std::string_view text, std::size_t max_part_bytes,
                                             const std::function<void(std::string_view, bool)>& part) const {
    std::size_t start = 0, longest = 0;
    bool drop_dummy = false;
    while (true) {
        const std::size_t end = next_cut(text, start, max_part_bytes);
        part(text.substr(start, end - start), drop_dummy);
        longest = std::max(longest, end - start);
        if (end == text.size()) return longest;
        drop_dummy = text[end] != ' ';
        start = drop_dummy ? end : end + 1;   // a space's '▁' is the next part's dummy prefix
    }
}

std::vector<int> SentencepieceCuts::encode(std::string_view text, std::size_t max_part_bytes,
                                           const std::function<void(std::string_view, std::vector<int>&)>& encode_part,
                                           std::size_t* longest_part) const {
    std::vector<int> ids, part_ids;
    const std::size_t longest = for_each_part(text, max_part_bytes, [&](std::string_view part, bool drop_dummy) {
        if (part.size() == text.size()) return encode_part(text, ids);   // one part: sentencepiece's ids as they are
        part_ids.clear();
        encode_part(part, part_ids);
        if (drop_dummy && (part_ids.empty() || part_ids[0] != dummy_id_))
            throw InternalError("a part of a long text cut before a byte no piece holds did not start with '▁'");
        ids.insert(ids.end(), part_ids.begin() + (drop_dummy ? 1 : 0), part_ids.end());
    });
    if (longest_part) *longest_part = longest;
    return ids;
}

}  // namespace retro
