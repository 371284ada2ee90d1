#include "generate/decode_rows.h"

#include "core/error.h"

namespace retro {

DecodeRows decode_rows(const std::vector<std::vector<std::int32_t>>& tokens, const std::vector<std::int64_t>& lengths,
                       const std::vector<std::int64_t>& neighbour_chunks, const RetroConfig& c) {
    const std::int64_t S = static_cast<std::int64_t>(lengths.size()), V = c.num_tokens, cs = c.chunk_size;
    RETRO_CHECK(static_cast<std::int64_t>(tokens.size()) == S, "step: ", tokens.size(), " token lists for ", S,
                " sequences");
    DecodeRows r;
    r.begin.assign(static_cast<std::size_t>(S + 1), 0);
    for (std::int64_t s = 0; s < S; s++) {
        const std::int64_t n = lengths[static_cast<std::size_t>(s)];
        const auto& t = tokens[static_cast<std::size_t>(s)];
        const std::int64_t m = static_cast<std::int64_t>(t.size());
        if (n + m > c.max_seq_len)
            user_error_in("generation", cat("sequence ", s, " would reach ", n + m,
                                            " tokens; the model's max_seq_len is ", c.max_seq_len));
        for (std::int64_t i = 0; i < m; i++) {
            const std::int32_t id = t[static_cast<std::size_t>(i)];
            if (id < 0 || id >= V)
                user_error_in("generation", cat("token id ", id, " outside the vocabulary [0, ", V, ")"));
            r.seq.push_back(s);
            r.pos.push_back(n + i);
            r.ids.push_back(id);
        }
        r.begin[static_cast<std::size_t>(s + 1)] = static_cast<std::int64_t>(r.seq.size());
        // chunk u must have neighbours before its last token (position u*cs + cs - 1) is fed
        if (!neighbour_chunks.empty())
            RETRO_CHECK((n + m) / cs <= neighbour_chunks[static_cast<std::size_t>(s)], "sequence ", s, " reaches chunk ",
                        (n + m) / cs, " with neighbours for ", neighbour_chunks[static_cast<std::size_t>(s)], " chunks");
    }
    return r;
}

}  // namespace retro
