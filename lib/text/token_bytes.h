// Bytes of text each token id stands for, for bits-per-byte (RETRO §4: bpb = nats / ln 2 / bytes, the
// measure that does not depend on the tokenizer): a sentencepiece piece's UTF-8 bytes with each "▁"
// (U+2581, the piece's space) counted as the one space byte it decodes to, a byte-fallback piece
// "<0xNN>" as 1 byte, the special ids (pad, unk, bos, eos) as 0.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace retro {

class Tokenizer;

std::int64_t piece_byte_length(const std::string& piece);
std::vector<std::int32_t> token_byte_lengths(const Tokenizer& tokenizer);

}  // namespace retro
