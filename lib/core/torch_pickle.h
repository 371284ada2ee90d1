// A restricted unpickler for the pickles torch.save writes (the data.pkl of a zip checkpoint, the pickles of the
// legacy format before PyTorch 1.6). It is a small stack machine over Python's pickle opcodes (protocols 2 to 5; the
// text opcodes of protocols 0/1 are refused) that builds plain values — None, bools, ints, floats, strings, bytes,
// tuples, lists (sets as lists), dicts — and knows torch's own few callables: the storage types named by persistent
// ids, torch._utils._rebuild_tensor(_v2/_v3), _rebuild_parameter(_with_state), torch._tensor._rebuild_from_type_v2
// and collections.OrderedDict. Nothing in a pickle ever runs: any other global (os.system, argparse.Namespace, a
// class of the training script) becomes an inert Object, and calling, instantiating or building one gives another
// Object — so a research checkpoint ({"model": state_dict, "args": Namespace(...), "optimizer": ...}) reads, and
// its objects are left out, where torch.load would run them (or, with weights_only, refuse the file). A tensor
// RetroKit cannot read (complex, float8, meta, quantized, a lazily negated view) is an Object whose text says so.
// Values live in one arena and refer to each other by index, so a self-referencing or deeply nested pickle costs no
// recursion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace retro {

struct PickleValue {
    enum class Kind : std::uint8_t { None, Bool, Int, BigInt, Float, String, Bytes, Tuple, List, Dict, Global, Storage, Tensor, Object };
    Kind kind = Kind::None;
    std::int64_t integer = 0;           // Bool, Int; Storage: its declared element count
    double real = 0;                    // Float
    std::string text;                   // String, Bytes, BigInt (little-endian two's complement bytes),
                                        // Global ("module.name" of a callable RetroKit knows), Storage (its key:
                                        // the record's name), Object (what it is: "argparse.Namespace", "a tensor
                                        // of type torch.ComplexFloatStorage", ...)
    std::vector<std::uint32_t> items;   // Tuple, List; Dict: key, value, key, value, ... (insertion order)
    // Storage: its element type; a legacy view of another storage (view_metadata) keeps the root's key in
    // `text` and its element offset and count here.
    DType dtype = DType::F32;
    std::int64_t view_offset = 0, view_numel = -1;
    // Tensor: the storage value's index, the element offset into it, sizes and strides (elements).
    std::uint32_t storage = 0;
    std::int64_t offset = 0;
    std::vector<std::int64_t> shape, stride;
};

struct PickleResult {
    std::vector<PickleValue> values;   // the arena
    std::uint32_t root = 0;            // the value STOP returned
    std::size_t end = 0;               // bytes read, STOP included (the legacy format reads several pickles in a row)
    // storages of a type RetroKit does not read (complex, quantized): key -> element size (0 = unknown), so that
    // the legacy stream's records can be stepped over
    std::map<std::string, std::size_t> unreadable_storages;
};

// Runs the pickle at data[0, size) up to its STOP. UserError naming `path` (and the byte offset) on anything
// malformed, truncated, refused, or too large (objects of more than 1 GiB).
PickleResult torch_unpickle(const std::uint8_t* data, std::size_t size, const std::string& path);

// Text a file holds (a key, a name), fit for a one-line message: control bytes as \xNN, at most max_bytes bytes.
std::string quoted(const std::string& text, std::size_t max_bytes = 80);

}  // namespace retro
