// libFuzzer target: a torch.save file (core/torch_checkpoint.h) — and its restricted unpickler alone
// (core/torch_pickle.h) — must read into tensors or end in a UserError, never a crash, a hang, a huge allocation
// or a deep recursion (`make fuzz FUZZ_TARGETS=torch_checkpoint`). The first byte picks the mode: even, the rest is
// a whole file (zip archive or legacy stream); odd, the rest is one pickle run on the machine (a zip's CRC keeps
// most mutations of its data.pkl from reaching the unpickler). Seeds: tests/fuzz/seeds/torch_checkpoint.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/torch_checkpoint.h"
#include "core/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    try {
        if (data[0] & 1) {
            const retro::PickleResult r = retro::torch_unpickle(data + 1, size - 1, "fuzz.pkl");
            if (r.root >= r.values.size()) __builtin_trap();
        } else {
            const auto f = retro::TorchCheckpointFile::from_bytes(data + 1, size - 1, "fuzz.bin");
            volatile std::uint8_t sink = 0;
            for (const auto& [name, t] : f.tensors())
                if (t.bytes) sink = sink ^ static_cast<const std::uint8_t*>(t.data)[t.bytes - 1];
        }
    } catch (const retro::UserError&) {
    }
    return 0;
}
