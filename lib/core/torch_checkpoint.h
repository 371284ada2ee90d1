// A PyTorch weights file — pytorch_model.bin, a .pt / .pth state_dict — read without Python or libtorch. Both
// formats torch.save writes: the zip archive (PyTorch >= 1.6: ARCHIVE/data.pkl, ARCHIVE/data/KEY records stored
// uncompressed, ARCHIVE/byteorder) read through libzip, and the legacy stream (before 1.6: five pickles — magic
// number, protocol version 1001, system info, the object, the storage keys — then each storage as an int64 count
// and its bytes). The pickles run on core/torch_pickle.h's restricted machine: nothing in them is executed. The
// object must be a dict of tensor names to tensors (what `torch.save(model.state_dict(), f)` writes), or hold one
// under 'state_dict', 'model_state_dict', 'model', 'module', 'net', 'network' or 'weights' where its top level holds
// no tensor (research checkpoints, PyTorch Lightning's); its other entries are left out (why_not says what each
// was). Tensors are exposed as safetensors' TensorView (contiguous row-major bytes) pointing into the memory-mapped
// file itself (a zip record's bytes where libzip reads them, a legacy storage where it lies in the stream, when
// 8-byte aligned: no copy),
// a non-contiguous view (a transposed tensor saved as it was) copied into that layout, tensors sharing a storage
// (tied weights) sharing its bytes.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/safetensors.h"

namespace retro {

// True when `data` starts as a zip archive does (a local file header, or the end record of an empty archive): the
// form torch.save writes since PyTorch 1.6.
bool starts_as_zip(const std::uint8_t* data, std::size_t size);

class TorchCheckpointFile {
public:
    TorchCheckpointFile() = default;
    // Move-only: the views of copied-out tensors point into this object's buffers.
    TorchCheckpointFile(TorchCheckpointFile&&) = default;
    TorchCheckpointFile& operator=(TorchCheckpointFile&&) = default;
    TorchCheckpointFile(const TorchCheckpointFile&) = delete;
    TorchCheckpointFile& operator=(const TorchCheckpointFile&) = delete;
    // Maps the file and reads it; UserError naming it (one line) on anything it cannot read as a state_dict. The
    // tensors' bytes stay in the mapping (kept as long as this object or a move of it lives).
    explicit TorchCheckpointFile(const std::string& path);
    // The same over a copy of bytes in memory (tests, fuzzing); `name` is the path messages give.
    static TorchCheckpointFile from_bytes(const std::uint8_t* data, std::size_t size, const std::string& name);

    bool has(const std::string& name) const { return tensors_.count(name) != 0; }
    // Throws UserError naming the file and tensor when missing (and what the entry is where it is not a tensor).
    const TensorView& get(const std::string& name) const;
    // What a left-out entry of the state_dict is ("an int", "the Python object argparse.Namespace", "a tensor of
    // type torch.ComplexFloatStorage", ...); "" where the name is a tensor or absent.
    std::string why_not(const std::string& name) const;
    // The key the state_dict was found under ("" = the file's top level).
    const std::string& nested_key() const { return nested_; }
    const std::map<std::string, TensorView>& tensors() const { return tensors_; }
    const std::string& path() const { return path_; }
    // Bytes this object holds besides the file's: strided views copied out, records that could not be located in
    // the file and storages not 8-byte aligned in it (a legacy stream's, mostly); 0 for a zip file torch.save wrote
    // from a state_dict of contiguous tensors.
    std::size_t copied_bytes() const;

private:
    void load(const std::uint8_t* data, std::size_t size);

    std::string path_;
    std::map<std::string, TensorView> tensors_;
    std::map<std::string, std::string> skipped_;
    std::string nested_;
    std::shared_ptr<const void> bytes_;                 // the mapped file (or from_bytes' copy) the views point into
    std::vector<std::vector<std::uint8_t>> buffers_;   // copies: non-contiguous views, records not located in the file
};

}  // namespace retro
