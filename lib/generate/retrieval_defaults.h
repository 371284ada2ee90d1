// retro-generate's --index and --db where they are left out: what the run's folders record. The run's manifest names
// the neighbours it trained on, their manifest the index they were searched in, and the index's manifest the
// database it was built from (retro-knn and retro-index query take --db from the index the same way). Each choice is
// logged under --verbose (an info line would break a refusal's one line); where a record is missing or its folder
// gone nothing is chosen, and the generator asks for the option.
// provides: retrieval_inputs_default
#pragma once
#include "generate/generator.h"

namespace retro {

// Fills g.index (from g.run's records) and then g.db (from the index's) where they are empty; nothing with
// --no-retrieval.
void retrieval_inputs_default(GenerateOptions& g);

}  // namespace retro
