// libFuzzer target: a tokenizer.json rebuilt into a sentencepiece model (text/sentencepiece_json.h) and loaded as
// RetroKit loads every sentencepiece model (text/sentencepiece_load.h: its character map checked first) must load and
// encode a short text, or end in a UserError, never a crash, a hang or a huge allocation (`make fuzz`). Its first run
// found libsentencepiece's unchecked walk of a damaged character map (a heap overflow), which the check now refuses. The first byte picks the layout (T5's ids, XLM-R's fairseq shift); the rest is
// written to a temporary tokenizer.json.
#include <sentencepiece_processor.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/sentencepiece_load.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    static const std::string path = "/tmp/retrokit-fuzz-" + std::to_string(getpid()) + "-tokenizer.json";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);
    const auto layout = data[0] & 1 ? retro::SentencepieceLayout::fairseq : retro::SentencepieceLayout::same_ids;
    try {
        sentencepiece::SentencePieceProcessor sp;
        retro::sentencepiece_load(sp, path, layout, "fuzz input", "tokenizer.json");   // rebuilt, checked, loaded
        std::vector<int> ids;
        (void)sp.Encode("The caf\xc3\xa9  serves\tcr\xc3\xa8me \xef\xac\x81ne \xe4\xb8\xad", &ids);
    } catch (const retro::UserError&) {   // nothing else may escape (a library exception must become a UserError)
    }
    return 0;
}
