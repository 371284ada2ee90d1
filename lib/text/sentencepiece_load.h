// Loading a sentencepiece model from a file RetroKit does not trust: a .model file, or a tokenizer.json rebuilt into
// one (text/sentencepiece_json.h), with the checks libsentencepiece does not make before it trusts the bytes. Its normaliser
// walks the model's precompiled character map — a darts-clone double-array trie and a blob of NUL-terminated
// replacement strings (sentencepiece's normalizer.cc) — without bounds checks: a map with one flipped byte (a
// corrupted spiece.model, a hand-edited tokenizer.json) reads past the model's memory on the first text (found by
// tests/fuzz/fuzz_tokenizer_json.cpp). Every model RetroKit loads goes through here first, so that such a file is
// refused in one line naming it instead.
#pragma once
#include <string>
#include <string_view>

#include "text/sentencepiece_json.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace retro {

// Loads `path` into `sp`: a sentencepiece .model file, or a tokenizer.json (a name ending in .json) rebuilt with
// `layout`; the bytes checked (sentencepiece_model_check) before libsentencepiece reads them. UserError naming the
// file: missing ("missing (WHAT)", fix "copy the checkpoint's FILE into the folder"), a Git LFS pointer, a broken
// character map, or not loadable ("cannot load sentencepiece model: ...", fix "restore the checkpoint's FILE"),
// FILE being `file_name`.
void sentencepiece_load(sentencepiece::SentencePieceProcessor& sp, const std::string& path, SentencepieceLayout layout,
                        const std::string& what, const std::string& file_name);

// The bytes of the .model file at `path`, checked (sentencepiece_model_check); UserError naming it where it cannot be
// read or is broken so.
std::string sentencepiece_model_bytes(const std::string& path);

// sp.LoadFromSerializedProto(bytes) (bytes already checked), its failure — a status, or an exception of its trie
// builder — a UserError naming `path` with `fix`.
void sentencepiece_load_bytes(sentencepiece::SentencePieceProcessor& sp, const std::string& path, const std::string& bytes,
                              const std::string& fix);

// "" when every trie position the normaliser can reach on any input stays inside the map and every replacement it
// can read ends inside the blob; else what is wrong. A map too short for its header is left to sentencepiece (which
// refuses it itself).
std::string precompiled_charsmap_problem(std::string_view charsmap);

// UserError naming `path` when a precompiled character map of the serialized ModelProto `model` (the normaliser's
// or the denormaliser's, every occurrence) has a problem, or when the bytes do not parse as a protocol buffer of
// plain fields (a group, which protobuf would skip and no sentencepiece model has, could hide a map from the check).
void sentencepiece_model_check(const std::string& path, std::string_view model);

}  // namespace retro
