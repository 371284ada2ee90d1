// Implementation of torch_checkpoint.h. The formats as torch/serialization.py writes them: _save (zip) and
// _legacy_save; torch._utils._rebuild_tensor_v2 sets a tensor over its storage at an element offset with sizes and
// strides, which is what tensor_view() below reads back.
#include "core/torch_checkpoint.h"

#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/mapped_file.h"
#include "core/torch_pickle.h"

namespace retro {
namespace {

using Kind = PickleValue::Kind;
constexpr const char* kFix = "re-save it with torch.save(model.state_dict(), path), or as model.safetensors";

// A storage record's bytes and the part of them a storage value (a legacy view, or the whole record) covers.
struct StorageBytes {
    const std::uint8_t* data = nullptr;
    std::size_t bytes = 0;
};

std::string kind_name(const PickleValue& v) {
    switch (v.kind) {
        case Kind::None: return "None";
        case Kind::Bool: return "a bool";
        case Kind::Int: case Kind::BigInt: return "an int";
        case Kind::Float: return "a float";
        case Kind::String: return "a string";
        case Kind::Bytes: return "bytes";
        case Kind::Tuple: return "a tuple";
        case Kind::List: return "a list";
        case Kind::Dict: return "a dict";
        case Kind::Global: return "a Python callable";
        case Kind::Storage: return "a storage";
        case Kind::Tensor: return "a tensor";
        case Kind::Object: return v.text;
    }
    return "a value";
}

// The keys under which research code saves a model's state_dict beside other things ({"model": ..., "optimizer":
// ..., "epoch": ...}; PyTorch Lightning's "state_dict"), in the order they are tried.
constexpr const char* kNestedKeys[] = {"state_dict", "model_state_dict", "model", "module", "net", "network", "weights"};
// Entries left out whose reason is kept for why_not (a hostile file could list millions).
constexpr std::size_t kMaxSkipped = 4096;

struct StateDict {
    std::map<std::string, std::uint32_t> tensors;   // name -> tensor value; the last of a repeated name wins
    std::map<std::string, std::string> skipped;     // name -> what it is, for entries that are not tensors
    std::string nested;                             // the key the state_dict was under ("" = the top level)
};

StateDict entries_of(const PickleResult& r, const PickleValue& dict) {
    StateDict sd;
    for (std::size_t i = 0; i + 1 < dict.items.size(); i += 2) {
        const PickleValue& k = r.values[dict.items[i]];
        const PickleValue& v = r.values[dict.items[i + 1]];
        if (k.kind != Kind::String && k.kind != Kind::Bytes) continue;   // (Python 2's str keys come as bytes)
        if (v.kind == Kind::Tensor) {
            sd.tensors[k.text] = dict.items[i + 1];
            sd.skipped.erase(k.text);
        } else {
            sd.tensors.erase(k.text);
            if (sd.skipped.size() < kMaxSkipped) sd.skipped[k.text] = kind_name(v);
        }
    }
    return sd;
}

// The state_dict: the dict of tensors under the first of kNestedKeys that holds one (a real state_dict's values
// are tensors, never dicts, so such a key marks a checkpoint around it — whose top level may hold a tensor of its
// own, `best_acc1` or `loss`); else the root's tensors. Entries that are not tensors (a module's `_extra_state`, a
// value RetroKit cannot read) are left out and remembered.
StateDict state_dict_of(const PickleResult& r, const std::string& path) {
    const PickleValue& root = r.values[r.root];
    if (root.kind != Kind::Dict)
        user_error_in(path, "holds " + kind_name(root) + ", not a state_dict (a dict of tensor names to tensors)", kFix);
    std::map<std::string, std::uint32_t> last;   // the root's keys, each its last value (as Python's dict)
    for (std::size_t i = 0; i + 1 < root.items.size(); i += 2) {
        const PickleValue& k = r.values[root.items[i]];
        if (k.kind == Kind::String || k.kind == Kind::Bytes) last[k.text] = root.items[i + 1];
    }
    for (const char* key : kNestedKeys) {
        const auto it = last.find(key);
        if (it == last.end() || r.values[it->second].kind != Kind::Dict) continue;
        StateDict inner = entries_of(r, r.values[it->second]);
        if (inner.tensors.empty()) continue;
        inner.nested = key;
        return inner;
    }
    StateDict sd = entries_of(r, root);
    if (!sd.tensors.empty() || root.items.empty()) return sd;
    std::string listed;
    int shown = 0;
    for (const auto& [name, what] : sd.skipped) {
        if (shown++ == 5) {
            listed += ", ...";
            break;
        }
        listed += (listed.empty() ? "'" : ", '") + quoted(name) + "' (" + what + ")";
    }
    user_error_in(path, "holds no tensor at its top level, nor a state_dict under 'state_dict', 'model' or the like: " + listed,
                  "save model.state_dict() with torch.save, or as model.safetensors");
}

// Sum of (size - 1) * stride over the dimensions: the last element's offset from the first (0 for an empty tensor).
bool last_element(const PickleValue& t, std::int64_t& out) {
    __int128 sum = 0;
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
        if (t.shape[d] == 0) {
            out = -1;   // empty
            return true;
        }
        sum += static_cast<__int128>(t.shape[d] - 1) * t.stride[d];
    }
    if (sum > (static_cast<__int128>(1) << 62)) return false;
    out = static_cast<std::int64_t>(sum);
    return true;
}

}  // namespace

bool starts_as_zip(const std::uint8_t* data, std::size_t size) {
    return size >= 4 && data[0] == 'P' && data[1] == 'K' && ((data[2] == 3 && data[3] == 4) || (data[2] == 5 && data[3] == 6));
}

TorchCheckpointFile::TorchCheckpointFile(const std::string& path) : path_(path) {
    auto file = std::make_shared<const MappedFile>(path);
    refuse_lfs_pointer(path, file->data(), file->size());
    load(file->data(), file->size());
    bytes_ = std::move(file);
}

TorchCheckpointFile TorchCheckpointFile::from_bytes(const std::uint8_t* data, std::size_t size, const std::string& name) {
    auto copy = std::make_shared<const std::vector<std::uint8_t>>(data, data + size);
    TorchCheckpointFile f;
    f.path_ = name;
    f.load(copy->data(), copy->size());
    f.bytes_ = std::move(copy);
    return f;
}

std::size_t TorchCheckpointFile::copied_bytes() const {
    std::size_t n = 0;
    for (const auto& b : buffers_) n += b.size();
    return n;
}

const TensorView& TorchCheckpointFile::get(const std::string& name) const {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) {
        const std::string why = why_not(name);
        user_error_in(path_, why.empty() ? "has no tensor '" + name + "'" : "holds '" + name + "' as " + why + ", not a tensor RetroKit reads");
    }
    return it->second;
}

std::string TorchCheckpointFile::why_not(const std::string& name) const {
    const auto it = skipped_.find(name);
    return it == skipped_.end() ? std::string() : it->second;
}

namespace {

// ---- the zip archive (torch >= 1.6) ----

// A libzip source over bytes in memory (what zip_source_buffer_create gives) that also remembers where its last read
// began: reading a stored record's first byte through libzip shows where the record's data lie (libzip 1.7 has no
// public call for a record's offset).
struct MemorySource {
    const std::uint8_t* data = nullptr;
    std::uint64_t size = 0, position = 0, last_read = 0;
    zip_error_t error;
};

zip_int64_t memory_source(void* state, void* out, zip_uint64_t len, zip_source_cmd_t cmd) {
    auto& s = *static_cast<MemorySource*>(state);
    switch (cmd) {
        case ZIP_SOURCE_OPEN: s.position = 0; return 0;
        case ZIP_SOURCE_READ: {
            const std::uint64_t n = std::min<std::uint64_t>(len, s.size - s.position);
            s.last_read = s.position;
            if (n) std::memcpy(out, s.data + s.position, static_cast<std::size_t>(n));
            s.position += n;
            return static_cast<zip_int64_t>(n);
        }
        case ZIP_SOURCE_CLOSE: case ZIP_SOURCE_FREE: return 0;   // (the state is the archive's member)
        case ZIP_SOURCE_STAT: {
            auto* st = static_cast<zip_stat_t*>(out);
            zip_stat_init(st);
            st->size = st->comp_size = s.size;
            st->comp_method = ZIP_CM_STORE;
            st->encryption_method = ZIP_EM_NONE;
            st->valid = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
            return sizeof(zip_stat_t);
        }
        case ZIP_SOURCE_ERROR: return zip_error_to_data(&s.error, out, len);
        case ZIP_SOURCE_SEEK: {
            const zip_int64_t at = zip_source_seek_compute_offset(s.position, s.size, out, len, &s.error);
            if (at < 0) return -1;
            s.position = static_cast<std::uint64_t>(at);
            return 0;
        }
        case ZIP_SOURCE_TELL: return static_cast<zip_int64_t>(s.position);
        case ZIP_SOURCE_SUPPORTS:
            return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                                  ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL,
                                                  ZIP_SOURCE_SUPPORTS, -1);
        default: zip_error_set(&s.error, ZIP_ER_OPNOTSUPP, 0); return -1;
    }
}

class ZipArchive {
public:
    ZipArchive(const std::uint8_t* data, std::size_t size, const std::string& path) : path_(path) {
        source_.data = data;
        source_.size = size;
        zip_error_init(&source_.error);
        zip_error_t err;
        zip_error_init(&err);
        zip_source_t* src = zip_source_function_create(memory_source, &source_, &err);
        if (src) za_ = zip_open_from_source(src, ZIP_RDONLY, &err);
        if (!za_) {
            if (src) zip_source_free(src);
            const std::string why = zip_error_strerror(&err);
            zip_error_fini(&err);
            user_error_in(path, "not a readable zip archive (" + why + ")", "download the file again; " + std::string(kFix));
        }
        zip_error_fini(&err);
        size_ = size;
    }
    ~ZipArchive() {
        if (za_) zip_discard(za_);
        zip_error_fini(&source_.error);
    }
    ZipArchive(const ZipArchive&) = delete;
    ZipArchive& operator=(const ZipArchive&) = delete;

    // The archive's folder: torch writes every record under one ("archive/", or the file's stem).
    std::string prefix() const {
        const zip_int64_t n = zip_get_num_entries(za_, 0);
        std::string found;
        for (zip_int64_t i = 0; i < n; ++i) {
            const char* name = zip_get_name(za_, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
            if (!name) continue;
            const std::string s = name;
            const std::size_t slash = s.find('/');
            if (slash != std::string::npos && s.compare(slash + 1, std::string::npos, "data.pkl") == 0) {
                if (!found.empty()) user_error_in(path_, "holds two data.pkl records (two torch.save archives in one zip)", kFix);
                found = s.substr(0, slash + 1);
            }
        }
        if (found.empty())
            user_error_in(path_, "is a zip archive without ARCHIVE/data.pkl (not one torch.save wrote)", kFix);
        return found;
    }

    bool has(const std::string& name) const { return zip_name_locate(za_, name.c_str(), ZIP_FL_ENC_RAW) >= 0; }

    // Where a stored record's bytes lie in the file: libzip reads its first and its last byte (the source sees
    // where, and the bytes are compared), and its CRC-32 is checked over that range where the file has one (a
    // damaged record is refused as read() refuses it). False where that does not hold (an empty record, a reader
    // that read elsewhere): then read() copies it.
    bool locate(const std::string& name, std::size_t& offset, std::size_t& bytes) {
        zip_uint64_t index = 0;
        const zip_stat_t st = stat_record(name, index);
        if (st.size == 0) return false;
        zip_file_t* f = zip_fopen_index(za_, index, 0);
        if (!f) user_error_in(path_, "cannot open record '" + quoted(name) + "': " + zip_strerror(za_), "download the file again");
        const std::uint64_t n = st.size;
        std::uint8_t first = 0, last = 0;
        bool found = zip_fread(f, &first, 1) == 1;
        const std::uint64_t at = source_.last_read;
        found = found && at < source_.size && n <= source_.size - at && source_.data[at] == first;
        if (found && n > 1)
            found = zip_fseek(f, static_cast<zip_int64_t>(n - 1), SEEK_SET) == 0 && zip_fread(f, &last, 1) == 1 &&
                    source_.last_read == at + n - 1 && source_.data[at + n - 1] == last;
        zip_fclose(f);
        if (!found) return false;
        // torch.save with torch.serialization.config.save.compute_crc32 = False writes 0 (and its reader checks none)
        if ((st.valid & ZIP_STAT_CRC) && st.crc != 0 && crc32_z(0, source_.data + at, static_cast<std::size_t>(n)) != st.crc)
            user_error_in(path_, "record '" + quoted(name) + "' is damaged: its CRC-32 does not match", "download the file again");
        offset = static_cast<std::size_t>(at);
        bytes = static_cast<std::size_t>(n);
        return true;
    }

    // A record's bytes, copied. torch stores records uncompressed: a compressed one is refused (no inflating a zip
    // bomb).
    std::vector<std::uint8_t> read(const std::string& name) const {
        zip_uint64_t index = 0;
        const zip_stat_t st = stat_record(name, index);
        std::vector<std::uint8_t> bytes(static_cast<std::size_t>(st.size));
        zip_file_t* f = zip_fopen_index(za_, index, 0);
        if (!f) user_error_in(path_, "cannot open record '" + quoted(name) + "': " + zip_strerror(za_), "download the file again");
        std::size_t done = 0;
        while (done < bytes.size()) {
            const zip_int64_t got = zip_fread(f, bytes.data() + done, bytes.size() - done);
            if (got <= 0) {
                const std::string why = got < 0 ? zip_error_strerror(zip_file_get_error(f)) : "ends early";
                zip_fclose(f);
                user_error_in(path_, "cannot read record '" + quoted(name) + "': " + why, "download the file again");
            }
            done += static_cast<std::size_t>(got);
        }
        // reading to the end checks the record's CRC-32, where the file has one: torch.save with
        // torch.serialization.config.save.compute_crc32 = False writes 0 (and its own reader checks none)
        if ((st.valid & ZIP_STAT_CRC) && st.crc == 0 && !bytes.empty()) {
            zip_fclose(f);
            return bytes;
        }
        char extra;
        const zip_int64_t tail = zip_fread(f, &extra, 1);
        const std::string why = tail < 0 ? zip_error_strerror(zip_file_get_error(f)) : "";
        zip_fclose(f);
        if (tail < 0) user_error_in(path_, "record '" + quoted(name) + "' is damaged: " + why, "download the file again");
        return bytes;
    }

private:
    // A record's index and stat: UserError where it is missing, compressed or larger than the file.
    zip_stat_t stat_record(const std::string& name, zip_uint64_t& index) const {
        const zip_int64_t i = zip_name_locate(za_, name.c_str(), ZIP_FL_ENC_RAW);
        if (i < 0) user_error_in(path_, "has no record '" + quoted(name) + "' (the archive is incomplete)", "download the file again");
        index = static_cast<zip_uint64_t>(i);
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(za_, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
            user_error_in(path_, "cannot read record '" + quoted(name) + "': " + zip_strerror(za_), "download the file again");
        if ((st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method != ZIP_CM_STORE)
            user_error_in(path_, "record '" + quoted(name) + "' is compressed (torch.save stores its records uncompressed)", kFix);
        if (st.size > size_) user_error_in(path_, "record '" + quoted(name) + "' is larger than the file", "download the file again");
        return st;
    }

    std::string path_;
    MemorySource source_;
    zip_t* za_ = nullptr;
    std::size_t size_ = 0;
};

// The 10-byte little-endian LONG1 the legacy format opens with: torch.serialization.MAGIC_NUMBER.
constexpr std::uint8_t kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

}  // namespace

void TorchCheckpointFile::load(const std::uint8_t* data, std::size_t size) {
    const std::string& path = path_;
    PickleResult pickled;
    StateDict sd;
    std::map<std::string, std::size_t> record_of;   // storage key -> storages index
    std::vector<StorageBytes> storages;              // each record's bytes: in the file, or a copy in buffers_
    // A storage's bytes where they lie, if 8-byte aligned (readers cast the pointer to float*, double*, ...: torch's
    // zip records are 64-byte aligned, a legacy stream's storages follow the pickles at any offset), else a copy
    // (heap memory is aligned for every element type).
    const auto aligned_or_copied = [&](const std::uint8_t* at, std::size_t bytes) -> StorageBytes {
        if (bytes == 0 || reinterpret_cast<std::uintptr_t>(at) % 8 == 0) return {at, bytes};
        buffers_.emplace_back(at, at + bytes);
        return {buffers_.back().data(), bytes};
    };
    const bool zip = starts_as_zip(data, size);
    if (zip) {
        ZipArchive archive(data, size, path);
        const std::string prefix = archive.prefix();
        if (archive.has(prefix + "byteorder")) {
            const std::vector<std::uint8_t> order = archive.read(prefix + "byteorder");
            const std::string o(order.begin(), order.end());
            if (o != "little") user_error_in(path, "was saved on a big-endian machine (byteorder '" + quoted(o) + "')", kFix);
        }
        const std::vector<std::uint8_t> pkl = archive.read(prefix + "data.pkl");
        pickled = torch_unpickle(pkl.data(), pkl.size(), path);
        if (pickled.end != pkl.size()) user_error_in(path, "has bytes after its data.pkl's STOP", kFix);
        sd = state_dict_of(pickled, path);
        // the records the tensors use, each once; stored records cannot add up to more than the file (overlapping
        // entries of a crafted archive could)
        std::size_t total = 0;
        for (const auto& [name, index] : sd.tensors) {
            const PickleValue& s = pickled.values[pickled.values[index].storage];
            if (record_of.count(s.text)) continue;
            const std::string record_name = prefix + "data/" + s.text;
            StorageBytes record;
            std::size_t offset = 0;
            if (archive.locate(record_name, offset, record.bytes)) {
                record = aligned_or_copied(data + offset, record.bytes);
            } else {
                buffers_.push_back(archive.read(record_name));
                record = {buffers_.back().data(), buffers_.back().size()};
            }
            // torch refuses a record whose size is not its storage's (torch/serialization.py load_tensor)
            if (static_cast<unsigned __int128>(s.integer) * dtype_size(s.dtype) != record.bytes)
                user_error_in(path, "record 'data/" + quoted(s.text) + "' holds " + std::to_string(record.bytes) +
                                        " bytes, its storage " + std::to_string(s.integer) + " elements of " + dtype_name(s.dtype),
                              "download the file again");
            total += record.bytes;
            if (total > size) user_error_in(path, "has records that add up to more than the file (overlapping zip entries)", kFix);
            record_of[s.text] = storages.size();
            storages.push_back(record);
        }
    } else if (size >= 2 && data[0] == 0x80) {
        // legacy: magic, protocol version, system info, the object, the storage keys; then the storages
        std::size_t at = 0;
        auto next = [&]() {
            PickleResult r = torch_unpickle(data + at, size - at, path);
            at += r.end;
            return r;
        };
        const PickleResult magic = next();
        const PickleValue& m = magic.values[magic.root];
        if (m.kind != Kind::BigInt || m.text.size() != sizeof kLegacyMagic || std::memcmp(m.text.data(), kLegacyMagic, sizeof kLegacyMagic) != 0)
            user_error_in(path, "is a pickle but not a torch.save file (no torch magic number)", kFix);
        const PickleResult version = next();
        if (version.values[version.root].kind != Kind::Int || version.values[version.root].integer != 1001)
            user_error_in(path, "is a torch.save file of an unknown protocol version", kFix);
        const PickleResult info = next();
        const PickleValue& sys = info.values[info.root];
        if (sys.kind != Kind::Dict) user_error_in(path, "has no system-info dict after its version", kFix);
        for (std::size_t i = 0; i + 1 < sys.items.size(); i += 2) {
            const PickleValue& k = info.values[sys.items[i]];
            const PickleValue& v = info.values[sys.items[i + 1]];
            if (k.kind == Kind::String && k.text == "little_endian" && v.kind == Kind::Bool && v.integer == 0)
                user_error_in(path, "was saved on a big-endian machine", kFix);
        }
        pickled = next();
        sd = state_dict_of(pickled, path);
        const PickleResult keys = next();
        const PickleValue& list = keys.values[keys.root];
        if (list.kind != Kind::List) user_error_in(path, "has no list of storage keys after its object", kFix);
        // every storage the stream holds, in the list's order (its element size from a storage value naming it)
        std::map<std::string, DType> dtype_of_key;
        for (const PickleValue& v : pickled.values)
            if (v.kind == Kind::Storage) dtype_of_key.emplace(v.text, v.dtype);
        std::set<std::string> used;
        for (const auto& [name, index] : sd.tensors) used.insert(pickled.values[pickled.values[index].storage].text);
        for (const std::uint32_t k : list.items) {
            const PickleValue& key = keys.values[k];
            if (key.kind != Kind::String && key.kind != Kind::Bytes) user_error_in(path, "lists a storage key that is not a string", kFix);
            std::size_t es = 0;
            if (const auto dt = dtype_of_key.find(key.text); dt != dtype_of_key.end()) {
                es = dtype_size(dt->second);
            } else if (const auto u = pickled.unreadable_storages.find(key.text); u != pickled.unreadable_storages.end()) {
                es = u->second;   // a complex or quantized storage: stepped over
                if (es == 0) user_error_in(path, "holds storage '" + quoted(key.text) + "' of a type RetroKit cannot size", kFix);
            } else {
                user_error_in(path, "lists storage '" + quoted(key.text) + "', which no tensor uses", kFix);
            }
            if (record_of.count(key.text)) user_error_in(path, "lists storage '" + quoted(key.text) + "' twice", kFix);
            if (size - at < 8) user_error_in(path, "ends before storage '" + quoted(key.text) + "' (truncated)", "download the file again");
            std::uint64_t count = 0;
            for (int i = 7; i >= 0; --i) count = (count << 8) | data[at + static_cast<std::size_t>(i)];
            at += 8;
            if (count > (size - at) / es)
                user_error_in(path, "ends inside storage '" + quoted(key.text) + "' (truncated)", "download the file again");
            const std::size_t bytes = static_cast<std::size_t>(count) * es;
            record_of[key.text] = storages.size();
            storages.push_back(used.count(key.text) ? aligned_or_copied(data + at, bytes)
                                                    : StorageBytes{data + at, 0});   // (only non-tensor entries use it: empty)
            at += bytes;
        }
        if (at != size) user_error_in(path, "has " + std::to_string(size - at) + " bytes after its last storage", "download the file again");
    } else if (size > 262 && std::memcmp(data + 257, "ustar", 5) == 0) {
        user_error_in(path, "is a tar archive (torch.save before PyTorch 0.4), which RetroKit does not read", kFix);
    } else {
        user_error_in(path, "not a PyTorch weights file (neither a torch.save zip archive nor a legacy torch.save stream)", kFix);
    }

    // every tensor over its storage's bytes; a strided view copied out once (per tensor value, so names that share
    // one share the copy), all copies together at most the storages' bytes and 64 MiB
    std::size_t storage_bytes = 0, copied_bytes = 0;
    for (const StorageBytes& b : storages) storage_bytes += b.bytes;
    std::map<std::uint32_t, const std::uint8_t*> copy_of;   // tensor value -> its copy
    skipped_ = sd.skipped;
    nested_ = sd.nested;
    for (const auto& [name, index] : sd.tensors) {
        const std::string qname = quoted(name);
        const PickleValue& t = pickled.values[index];
        const PickleValue& s = pickled.values[t.storage];
        const auto rec = record_of.find(s.text);
        if (rec == record_of.end())
            user_error_in(path, "tensor '" + qname + "' refers to storage '" + quoted(s.text) + "', which the file does not hold",
                          "download the file again");
        const StorageBytes& record = storages[rec->second];
        const std::size_t ses = dtype_size(s.dtype);
        const std::int64_t s_numel = s.view_numel >= 0 ? s.view_numel : s.integer;
        const std::int64_t s_first = s.view_numel >= 0 ? s.view_offset : 0;
        if ((static_cast<unsigned __int128>(s_first) + static_cast<unsigned __int128>(s_numel)) * ses > record.bytes)
            user_error_in(path, "storage '" + quoted(s.text) + "' is shorter than its " + std::to_string(s_numel) + " elements",
                          "download the file again");
        StorageBytes sb;
        sb.data = record.data + static_cast<std::size_t>(s_first) * ses;
        sb.bytes = static_cast<std::size_t>(s_numel) * ses;

        TensorView v;
        v.dtype = t.dtype;
        v.shape = t.shape;
        const std::int64_t numel = shape_numel(t.shape, path);
        const std::size_t es = dtype_size(t.dtype);
        std::int64_t last = 0;
        if (!last_element(t, last)) user_error_in(path, "tensor '" + qname + "' has impossibly large strides", kFix);
        if (last < 0) {   // an empty tensor
            v.data = sb.data;
            v.bytes = 0;
            tensors_[name] = std::move(v);
            continue;
        }
        if ((static_cast<unsigned __int128>(t.offset) + static_cast<unsigned __int128>(last) + 1) * es > sb.bytes)
            user_error_in(path, "tensor '" + qname + "' " + shape_string(t.shape) + " reaches past its storage's " +
                                    std::to_string(sb.bytes) + " bytes", "download the file again");
        const std::uint8_t* first = sb.data + static_cast<std::size_t>(t.offset) * es;
        bool contiguous = true;
        std::int64_t expect = 1;
        for (std::size_t d = t.shape.size(); d-- > 0;) {
            if (t.shape[d] != 1 && t.stride[d] != expect) contiguous = false;
            expect *= t.shape[d];
        }
        // the view's bytes in 128 bits: 2^62 elements of 8 bytes wrap a size_t
        const unsigned __int128 view_bytes = static_cast<unsigned __int128>(numel) * es;
        if (contiguous) {   // (within the storage, as checked above)
            v.data = first;
            v.bytes = static_cast<std::size_t>(view_bytes);
        } else if (const auto it = copy_of.find(index); it != copy_of.end()) {
            v.data = it->second;
            v.bytes = static_cast<std::size_t>(view_bytes);
        } else {
            // a strided view (a transposed tensor saved as it was): copied out in row-major order. A view that
            // repeats elements (stride 0, an expanded tensor) could be far larger than the file: refused.
            if (view_bytes > sb.bytes)
                user_error_in(path, "tensor '" + qname + "' " + shape_string(t.shape) + " repeats its storage's elements (an expanded view)",
                              "save it with .contiguous() (or .clone()) in the state_dict");
            v.bytes = static_cast<std::size_t>(view_bytes);
            copied_bytes += v.bytes;
            if (copied_bytes > storage_bytes + (std::size_t(64) << 20))
                user_error_in(path, "holds strided views that add up to more than its storages (views of views of one storage)",
                              "save the state_dict with contiguous tensors (.contiguous())");
            std::vector<std::uint8_t> copy(v.bytes);
            std::vector<std::int64_t> idx(t.shape.size(), 0);
            for (std::int64_t e = 0; e < numel; ++e) {
                std::int64_t off = 0;
                for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride[d];
                std::memcpy(copy.data() + static_cast<std::size_t>(e) * es, first + static_cast<std::size_t>(off) * es, es);
                for (std::size_t d = idx.size(); d-- > 0;) {
                    if (++idx[d] < t.shape[d]) break;
                    idx[d] = 0;
                }
            }
            buffers_.push_back(std::move(copy));
            v.data = buffers_.back().data();
            copy_of[index] = buffers_.back().data();
        }
        tensors_[name] = std::move(v);
    }
}

}  // namespace retro
