#include "text/token_bytes.h"

#include "text/tokenizer.h"

namespace retro {

std::int64_t piece_byte_length(const std::string& piece) {
    if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece.back() == '>') return 1;   // byte fallback
    static const std::string space = "\xE2\x96\x81";                                        // U+2581
    std::int64_t bytes = 0;
    for (std::size_t i = 0; i < piece.size();) {
        if (piece.compare(i, space.size(), space) == 0) {
            bytes += 1;
            i += space.size();
        } else {
            bytes += 1;
            i += 1;
        }
    }
    return bytes;
}

std::vector<std::int32_t> token_byte_lengths(const Tokenizer& tokenizer) {
    std::vector<std::int32_t> out(static_cast<std::size_t>(tokenizer.vocab_size()), 0);
    for (int id = 0; id < tokenizer.vocab_size(); id++)
        if (id != TOKEN_PAD && id != TOKEN_UNK && id != TOKEN_BOS && id != TOKEN_EOS)
            out[static_cast<std::size_t>(id)] = static_cast<std::int32_t>(piece_byte_length(tokenizer.piece(id)));
    return out;
}

}  // namespace retro
