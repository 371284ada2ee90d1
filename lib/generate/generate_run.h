// What retro-generate does after parsing its flags: prompts from the argument, stdin or a .jsonl file;
// a Generator (generate/generator.h) run with the text streamed to stdout or the results written to a .jsonl
// (atomically, each finished prompt journaled in OUT.partial first: generate/generate_journal.h, --resume);
// neighbours printed on stderr as text or JSON lines; a summary line on stderr.
#pragma once
#include <string>

#include "generate/generator.h"

namespace retro {

struct GenerateRunOptions {
    GenerateOptions g;
    std::string prompt;         // "" = read stdin (single-prompt mode)
    std::string prompts_file;   // batch mode input (.jsonl)
    std::string output;         // batch mode output (.jsonl)
    bool show_neighbours = false, json = false, ignore_eos = false;
    bool resume = false;          // batch mode: keep the finished prompts OUT.partial holds, decode the others
    bool force = false;           // batch mode: replace an existing --output (refused otherwise)
    bool batch_size_given = false;   // --batch-size on the command line (a single prompt has no batch: warned)
    std::int64_t stop_after = 0;  // testing: batch mode stops after this many prompts, as if killed (0 = off)
};

void generate_run(GenerateRunOptions cli);

}  // namespace retro
