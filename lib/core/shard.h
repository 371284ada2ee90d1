// `--shard i/n`, the one spec every preprocessing stage shares (retro-chunk: input blocks;
// retro-index, retro-knn: row blocks): a job's work is cut into blocks and shard i of n does the
// blocks b with b % n == i; `merge` joins the shards.
#pragma once
#include <string>

namespace retro {

struct Shard {
    int index = 0, count = 1;
    bool active() const { return count > 1; }
};

// Parses "i/n" with 0 <= i < n; UserError naming --shard otherwise.
Shard shard_parse(const std::string& text);

}  // namespace retro
