// Implementation of sentencepiece_json.h. The ModelProto fields written (sentencepiece_model.proto; numbers checked
// against sentencepiece 0.2's sentencepiece_model_pb2):
//   ModelProto      1 pieces (SentencePiece), 2 trainer_spec (TrainerSpec), 3 normalizer_spec (NormalizerSpec)
//   SentencePiece   1 piece (string), 2 score (float), 3 type (NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, BYTE 6)
//   TrainerSpec     3 model_type (UNIGRAM 1), 4 vocab_size, 35 byte_fallback, 40-43 unk/bos/eos/pad ids,
//                   45-48 unk/bos/eos/pad pieces
//   NormalizerSpec  1 name, 2 precompiled_charsmap, 3 add_dummy_prefix, 4 remove_extra_whitespaces,
//                   5 escape_whitespaces
#include "text/sentencepiece_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/manifest.h"

namespace retro {

namespace {

using nlohmann::json;

// Protocol-buffer wire format, the few field kinds a ModelProto needs.
class ProtoWriter {
public:
    void varint_field(int field, std::int64_t v) {   // int32/enum/bool; a negative int32 takes ten bytes, as protobuf
        tag(field, 0);
        varint(static_cast<std::uint64_t>(v));
    }
    void bytes_field(int field, std::string_view s) {
        tag(field, 2);
        varint(s.size());
        out_.append(s);
    }
    void float_field(int field, float x) {
        tag(field, 5);
        std::uint32_t bits;
        std::memcpy(&bits, &x, 4);
        for (int i = 0; i < 4; ++i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);   // little-endian fixed32
    }
    const std::string& bytes() const { return out_; }

private:
    void tag(int field, int wire_type) { varint((static_cast<std::uint64_t>(field) << 3) | static_cast<unsigned>(wire_type)); }
    void varint(std::uint64_t v) {
        while (v >= 0x80) {
            out_ += static_cast<char>((v & 0x7f) | 0x80);
            v >>= 7;
        }
        out_ += static_cast<char>(v);
    }
    std::string out_;
};

enum PieceType : int { kNormal = 1, kUnknown = 2, kControl = 3 };

struct Piece {
    std::string text;
    float score = 0;
    int type = kNormal;
};

struct Normalization {
    std::string charsmap;             // sentencepiece's precompiled map, decoded
    bool remove_extra_whitespaces = false;
    bool add_dummy_prefix = true;
};

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
    user_error_in(path, what, "give the tokenizer.json transformers saved for a T5 or XLM-RoBERTa checkpoint, or the checkpoint's "
                              "sentencepiece model file");
}

// RFC 4648 base64 (the standard alphabet, '=' padding), as tokenizers writes the charsmap.
std::optional<std::string> base64_decode(std::string_view s) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    while (!s.empty() && s.back() == '=') s.remove_suffix(1);
    if (s.size() % 4 == 1) return std::nullopt;
    std::string out;
    out.reserve(s.size() * 3 / 4);
    std::uint32_t acc = 0;
    int bits = 0;
    for (char c : s) {
        const int v = value(c);
        if (v < 0) return std::nullopt;
        acc = (acc << 6) | static_cast<std::uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xff);
        }
    }
    return out;
}

const json* member(const json& j, const char* key) {
    return j.is_object() && j.contains(key) ? &j[key] : nullptr;
}

std::string type_of(const json& j) {
    const json* t = member(j, "type");
    return t && t->is_string() ? t->get<std::string>() : std::string("(no type)");
}

void read_precompiled(const std::string& path, const json& n, Normalization& out) {
    const json* map = member(n, "precompiled_charsmap");
    if (!map || map->is_null()) return;
    if (!map->is_string()) refuse(path, "has a Precompiled normalizer whose precompiled_charsmap is not a base64 string");
    const auto bytes = base64_decode(map->get_ref<const std::string&>());
    if (!bytes) refuse(path, "has a Precompiled normalizer whose precompiled_charsmap is not valid base64");
    out.charsmap = *bytes;
}

// The normaliser's precompiled character map, wherever the file's normalizer holds one (alone, or in a Sequence
// beside the Replace / Strip rules transformers 4's converter wrote): transformers 5's T5Tokenizer and
// XLMRobertaTokenizer keep that map and nothing else of the file's normaliser.
void read_charsmap(const std::string& path, const json& n, Normalization& out) {
    if (type_of(n) == "Precompiled") {
        read_precompiled(path, n, out);
    } else if (type_of(n) == "Sequence") {
        if (const json* items = member(n, "normalizers"); items && items->is_array())
            for (const json& item : *items) read_charsmap(path, item, out);
    }
}

// The tokenizer_config.json beside tokenizer.json (an empty object where there is none, or it is not an object).
json config_beside(const std::string& path) {
    const std::filesystem::path config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
    if (!std::filesystem::exists(config)) return json::object();
    json c = json_read_file(config.string());
    return c.is_object() ? c : json::object();
}

// A special token's name as tokenizer_config.json gives it (a string, or an AddedToken's "content"), or `fallback`.
std::string config_token(const json& c, const char* key, const std::string& fallback) {
    const json* t = member(c, key);
    if (t && t->is_string()) return t->get<std::string>();
    if (t && t->is_object() && t->contains("content") && (*t)["content"].is_string()) return (*t)["content"].get<std::string>();
    return fallback;
}

}  // namespace

bool tokenizer_json_is_unigram(const std::string& path) {
    try {
        if (!std::filesystem::is_regular_file(path)) return false;
        const json j = json_read_file(path);
        const json* model = member(j, "model");
        return model && type_of(*model) == "Unigram";
    } catch (const UserError&) {
        return false;
    }
}

std::string sentencepiece_model_from_tokenizer_json(const std::string& path, SentencepieceLayout layout) {
    if (!std::filesystem::is_regular_file(path)) user_error_in(path, "missing (the checkpoint's tokenizer)", "copy the checkpoint's tokenizer files into the folder");
    refuse_lfs_pointer_file(path);
    const json j = json_read_file(path);
    const json* model = member(j, "model");
    if (!model || type_of(*model) != "Unigram")
        refuse(path, "has a " + (model ? type_of(*model) : std::string("missing")) +
                         " model, not Unigram (the sentencepiece model of T5 and XLM-RoBERTa)");
    const json* vocab = member(*model, "vocab");
    if (!vocab || !vocab->is_array() || vocab->empty()) refuse(path, "has no Unigram vocab");
    const json* unk = member(*model, "unk_id");
    if (!unk || !unk->is_number_integer() || unk->get<std::int64_t>() < 0 ||
        unk->get<std::int64_t>() >= static_cast<std::int64_t>(vocab->size()))
        refuse(path, "has no unk_id inside its vocab (sentencepiece needs an unknown piece)");
    const int unk_id = unk->get<int>();
    // (the model's byte_fallback is not read: transformers 5's T5Tokenizer and XLMRobertaTokenizer build their Unigram
    // with byte_fallback=False whatever the file says, so an unknown character is the unknown piece, never its bytes)

    std::vector<Piece> vocab_pieces;
    vocab_pieces.reserve(vocab->size());
    for (std::size_t i = 0; i < vocab->size(); ++i) {
        const json& e = (*vocab)[i];
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number() ||
            !(std::fabs(e[1].get<double>()) <= std::numeric_limits<float>::max()))
            refuse(path, "has vocab entry " + std::to_string(i) + " that is not [piece, score] with a finite float score");
        vocab_pieces.push_back({e[0].get<std::string>(), static_cast<float>(e[1].get<double>()), kNormal});
    }
    // types: the unknown piece; special added tokens are control pieces (sentencepiece never produces them from text;
    // the callers split every added token out of the raw text first, as transformers does, so a non-special one
    // stays a normal piece: as a user-defined one sentencepiece would match it again inside its own normalised text)
    std::map<std::int64_t, bool> added_special;
    if (const json* added = member(j, "added_tokens"); added && added->is_array())
        for (const json& a : *added) {
            const json* id = member(a, "id");
            const json* special = member(a, "special");
            if (id && id->is_number_integer()) added_special[id->get<std::int64_t>()] = special && special->is_boolean() && special->get<bool>();
        }
    for (std::size_t i = 0; i < vocab_pieces.size(); ++i) {
        Piece& p = vocab_pieces[i];
        const auto a = added_special.find(static_cast<std::int64_t>(i));
        if (static_cast<int>(i) == unk_id) p.type = kUnknown;
        else if (a != added_special.end() && a->second) p.type = kControl;
    }

    // the pipeline transformers 5's T5Tokenizer and XLMRobertaTokenizer build whatever the file's pre_tokenizer and
    // post_processor say: the character map, WhitespaceSplit (white-space runs folded), Metaspace with a prefix
    // (XLM-R: "never" where add_prefix_space is false), the class's own wrapping
    const json config = config_beside(path);
    Normalization norm;
    read_charsmap(path, j.value("normalizer", json()), norm);
    norm.remove_extra_whitespaces = true;
    if (layout == SentencepieceLayout::fairseq && config.contains("add_prefix_space") && config["add_prefix_space"] == false)
        norm.add_dummy_prefix = false;

    std::vector<Piece> pieces;
    std::string unk_piece, bos_piece = "<s>", eos_piece = "</s>", pad_piece = "<pad>";
    if (layout == SentencepieceLayout::same_ids) {
        pieces = std::move(vocab_pieces);
        eos_piece = config_token(config, "eos_token", "</s>");   // T5Tokenizer appends its eos_token's id
        for (Piece& p : pieces)
            if (p.text == eos_piece && p.type != kUnknown) p.type = kControl;   // SpieceTokenizer appends it itself
        unk_piece = pieces[static_cast<std::size_t>(unk_id)].text;
    } else {
        // fairseq's dictionary in front of sentencepiece's pieces: undo it (xlmr_tokenizer.h applies it again)
        const char* fairseq[] = {"<s>", "<pad>", "</s>", "<unk>"};
        bool ok = vocab_pieces.size() > 4 && unk_id == 3;
        for (int i = 0; ok && i < 4; ++i) ok = vocab_pieces[static_cast<std::size_t>(i)].text == fairseq[i];
        if (!ok) refuse(path, "does not start its vocab with fairseq's <s> <pad> </s> <unk> (unk_id 3), as XLM-RoBERTa's does");
        std::size_t end = vocab_pieces.size();
        if (vocab_pieces.back().text == "<mask>") --end;   // fairseq's <mask>, after the pieces
        pieces = {{"<unk>", 0, kUnknown}, {"<s>", 0, kControl}, {"</s>", 0, kControl}};
        pieces.insert(pieces.end(), vocab_pieces.begin() + 4, vocab_pieces.begin() + static_cast<std::ptrdiff_t>(end));
        unk_piece = "<unk>";
    }
    const auto id_of = [&](const std::string& name) -> std::int64_t {
        for (std::size_t i = 0; i < pieces.size(); ++i)
            if (pieces[i].text == name && (pieces[i].type == kControl || pieces[i].type == kUnknown)) return static_cast<std::int64_t>(i);
        return -1;
    };

    ProtoWriter proto;
    for (const Piece& p : pieces) {
        ProtoWriter w;
        w.bytes_field(1, p.text);
        w.float_field(2, p.score);
        w.varint_field(3, p.type);
        proto.bytes_field(1, w.bytes());
    }
    ProtoWriter trainer;
    trainer.varint_field(3, 1);   // UNIGRAM
    trainer.varint_field(4, static_cast<std::int64_t>(pieces.size()));
    trainer.varint_field(35, 0);   // byte_fallback off (above)
    trainer.varint_field(40, id_of(unk_piece));
    trainer.varint_field(41, id_of(bos_piece));
    trainer.varint_field(42, id_of(eos_piece));
    trainer.varint_field(43, id_of(pad_piece));
    trainer.bytes_field(45, unk_piece);
    trainer.bytes_field(46, bos_piece);
    trainer.bytes_field(47, eos_piece);
    trainer.bytes_field(48, pad_piece);
    proto.bytes_field(2, trainer.bytes());
    ProtoWriter normalizer;
    normalizer.bytes_field(1, norm.charsmap.empty() ? "identity" : "precompiled");
    if (!norm.charsmap.empty()) normalizer.bytes_field(2, norm.charsmap);
    normalizer.varint_field(3, norm.add_dummy_prefix);
    normalizer.varint_field(4, norm.remove_extra_whitespaces);
    normalizer.varint_field(5, 1);   // spaces as U+2581 (Metaspace)
    proto.bytes_field(3, normalizer.bytes());
    return proto.bytes();
}

}  // namespace retro
