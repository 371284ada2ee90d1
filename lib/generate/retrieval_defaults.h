// retro-generate's --index and --db where they are left out: what the run's folders record. The run's manifest names
// the neighbours it trained on, their manifest the index they were searched in, and the index's manifest the
// database it was built from (retro-knn and retro-index query take --db from the index the same way). Each choice is
// logged under --verbose (an info line would break a refusal's one line); where a record is missing, its folder gone
// or made again since it was read (its fingerprint is not the recorded one) nothing is chosen, and the generator asks
// for the option (saying, for a folder made again, which).
// provides: retrieval_inputs_default
#pragma once
#include "generate/generator.h"

namespace retro {

// Fills g.index (from g.run's records) and then g.db (from the index's) where they are empty; nothing with
// --no-retrieval. Where a recorded folder was made again, g.index stays empty and g.index_default_why says so.
void retrieval_inputs_default(GenerateOptions& g);

}  // namespace retro
