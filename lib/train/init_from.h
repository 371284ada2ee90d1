// `retro-train --init-from BASE` (retro-fitting, RETRO paper §4.2): a new run's step-0 weights from a trained
// run's. BASE is a run folder (its model.safetensors), a checkpoint folder (checkpoints/step_*/), a
// .safetensors file, or a state_dict saved with torch.save (RETRO-pytorch's `torch.save(retro.state_dict(), f)`:
// the same tensor names; core/weights_file.h), its names under "module." (DataParallel, DDP) or "_orig_mod."
// (torch.compile) where every tensor has that prefix. Tensors present in both with equal shapes are copied; tensors of the new config the base
// lacks (CCA layers, a deeper encoder) keep their fresh initialisation. The decoder (model/param_groups.h:
// group `decoder`) must match exactly: a decoder tensor missing from the base, of another shape, or in the
// base but not in the new config, and differing heads/dim_head in the base's recorded config, are UserErrors
// naming the file. Base tensors outside the new layout (other CCA layers) and rotary buffers are ignored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/params.h"

namespace retro {

struct InitFromInfo {
    std::string weights;       // the file read (.safetensors or torch.save)
    std::string fingerprint;   // its xxh3 (core/fingerprint.h), recorded for provenance and checked on --resume
    std::int64_t bytes = 0;    // its size when fingerprinted (the manifest records both as read: the file may be a
                               // checkpoint its own run prunes while this one trains)
    std::int64_t copied = 0, fresh = 0, ignored = 0;   // tensors copied, kept fresh, of the base not used
    std::string within;        // a torch file's key its state_dict was under ({"model": ..., "epoch": ...}), or ""
    std::string prefix;        // the wrapper prefix its names had ("module.", "_orig_mod."), or ""
};

// Resolves BASE to its weights file and fingerprints it; UserError naming BASE when there is none.
InitFromInfo init_from_resolve(const std::string& base);

// Overwrites `params` (already initialised for `layout`) with the base's tensors as described above and fills
// info's counts.
template <typename T>
void init_from_load(InitFromInfo& info, std::vector<T>& params, const ParamLayout& layout, const RetroConfig& config);

}  // namespace retro
