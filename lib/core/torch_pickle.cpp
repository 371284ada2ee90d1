// Implementation of torch_pickle.h: the opcodes are Python's (Lib/pickle.py, pickletools), the callables torch's
// (torch/_utils.py _rebuild_tensor_v2 / _v3, _rebuild_parameter; torch/serialization.py persistent ids:
// ('storage', storage type, key, location, numel[, view_metadata]), the last only in the legacy format).
#include "core/torch_pickle.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>

#include "core/error.h"

namespace retro {
namespace {

using Kind = PickleValue::Kind;
// What the arena may hold, in bytes (values and their vectors and strings): a pickle of a few bytes can build a
// value of a kilobyte (a 64-dimension tensor from memoised arguments), so the count of values alone bounds nothing.
// A real state_dict's pickle costs ~5 KB of arena a tensor: 1 GiB is ~200,000 tensors.
constexpr std::size_t kMaxArenaBytes = std::size_t(1) << 30;
constexpr std::size_t kMaxDims = 64;

// torch.<Name>Storage (the typed storages torch.save names in persistent ids) and the dtype globals
// _rebuild_tensor_v3 passes (torch.uint16, ...).
bool storage_dtype(const std::string& global, DType& out) {
    static const std::pair<const char*, DType> kTypes[] = {
        {"torch.FloatStorage", DType::F32},   {"torch.DoubleStorage", DType::F64}, {"torch.HalfStorage", DType::F16},
        {"torch.BFloat16Storage", DType::BF16}, {"torch.LongStorage", DType::I64}, {"torch.IntStorage", DType::I32},
        {"torch.ShortStorage", DType::I16},   {"torch.CharStorage", DType::I8},    {"torch.ByteStorage", DType::U8},
        {"torch.BoolStorage", DType::BOOL},   {"torch.UntypedStorage", DType::U8}, {"torch.storage.UntypedStorage", DType::U8},
        {"torch.float32", DType::F32}, {"torch.float64", DType::F64}, {"torch.float16", DType::F16},
        {"torch.bfloat16", DType::BF16}, {"torch.int64", DType::I64}, {"torch.int32", DType::I32},
        {"torch.int16", DType::I16}, {"torch.int8", DType::I8}, {"torch.uint8", DType::U8}, {"torch.bool", DType::BOOL},
        {"torch.uint16", DType::U16}, {"torch.uint32", DType::U32}, {"torch.uint64", DType::U64}};
    for (const auto& [name, t] : kTypes)
        if (global == name) {
            out = t;
            return true;
        }
    return false;
}

}  // namespace

std::string quoted(const std::string& text, std::size_t max_bytes) {
    std::string out;
    for (const unsigned char c : text) {
        if (out.size() >= max_bytes) {
            out += "...";
            break;
        }
        if (c < 0x20 || c == 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

namespace {

// The element size of a torch storage type RetroKit does not read, from its Object text ("a tensor of type
// torch.ComplexFloatStorage"); 0 where unknown.
std::size_t unreadable_element_size(const std::string& what) {
    static const std::pair<const char*, std::size_t> kSizes[] = {
        {"torch.ComplexHalfStorage", 4}, {"torch.ComplexFloatStorage", 8}, {"torch.ComplexDoubleStorage", 16},
        {"torch.QInt8Storage", 1},       {"torch.QUInt8Storage", 1},       {"torch.QInt32Storage", 4},
        {"torch.QUInt4x2Storage", 1},    {"torch.QUInt2x4Storage", 1}};
    for (const auto& [name, size] : kSizes)
        if (what.size() >= std::strlen(name) && what.compare(what.size() - std::strlen(name), std::string::npos, name) == 0) return size;
    return 0;
}

bool allowed_callable(const std::string& g) {
    return g == "collections.OrderedDict" || g == "torch._utils._rebuild_tensor" || g == "torch._utils._rebuild_tensor_v2" ||
           g == "torch._utils._rebuild_tensor_v3" || g == "torch._utils._rebuild_parameter" ||
           g == "torch._utils._rebuild_parameter_with_state" || g == "torch._tensor._rebuild_from_type_v2" ||
           g == "torch.Tensor" || g == "torch.nn.parameter.Parameter";
}

class Machine {
public:
    Machine(const std::uint8_t* data, std::size_t size, const std::string& path) : p_(data), size_(size), path_(path) {}

    PickleResult run() {
        for (;;) {
            const std::size_t at = pos_;
            const std::uint8_t op = byte();
            op_at_ = at;
            if (step(op)) break;
        }
        if (stack_.size() != 1 || !marks_.empty()) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
        PickleResult r;
        r.root = stack_[0];
        r.values = std::move(values_);
        r.unreadable_storages = std::move(unreadable_);
        r.end = pos_;
        return r;
    }

private:
    const std::uint8_t* p_;
    std::size_t size_, pos_ = 0, op_at_ = 0;
    const std::string& path_;
    std::vector<PickleValue> values_;
    std::vector<std::uint32_t> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, std::uint32_t> memo_;
    std::size_t arena_bytes_ = 0;
    std::map<std::string, std::size_t> unreadable_;

    [[noreturn]] void fail(const std::string& why) const {   // `why` quotes the file's text only through quoted()
        user_error_in(path_, "not a weights pickle torch.save writes: " + why + " (at byte " + std::to_string(op_at_) + ")",
                      "re-save the state_dict with torch.save, or save it as model.safetensors");
    }

    // ---- reading the opcode stream ----
    const std::uint8_t* take(std::size_t n) {
        if (n > size_ - pos_) fail("truncated");
        const std::uint8_t* q = p_ + pos_;
        pos_ += n;
        return q;
    }
    std::uint8_t byte() { return *take(1); }
    std::uint64_t le(std::size_t n) {
        const std::uint8_t* q = take(n);
        std::uint64_t v = 0;
        for (std::size_t i = n; i-- > 0;) v = (v << 8) | q[i];
        return v;
    }
    std::string line() {   // GLOBAL's module and name, each ended by '\n'
        const std::size_t start = pos_;
        while (pos_ < size_ && p_[pos_] != '\n') ++pos_;
        if (pos_ >= size_) fail("truncated");
        std::string s(reinterpret_cast<const char*>(p_ + start), pos_ - start);
        ++pos_;
        return s;
    }
    std::string bytes_of(std::uint64_t n) {
        if (n > size_ - pos_) fail("truncated");
        return std::string(reinterpret_cast<const char*>(take(static_cast<std::size_t>(n))), static_cast<std::size_t>(n));
    }

    // ---- values and the stack ----
    void charge(std::size_t bytes) {
        arena_bytes_ += bytes;
        if (arena_bytes_ > kMaxArenaBytes) fail("it builds more than 1 GiB of objects");
    }
    std::uint32_t make(PickleValue v) {
        charge(sizeof(PickleValue) + v.text.size() + 4 * v.items.size() + 16 * v.shape.size());
        values_.push_back(std::move(v));
        return static_cast<std::uint32_t>(values_.size() - 1);
    }
    std::uint32_t make_simple(Kind k, std::int64_t i = 0) {
        PickleValue v;
        v.kind = k;
        v.integer = i;
        return make(std::move(v));
    }
    std::uint32_t make_text(Kind k, std::string s) {
        PickleValue v;
        v.kind = k;
        v.text = std::move(s);
        return make(std::move(v));
    }
    void push(std::uint32_t v) { stack_.push_back(v); }
    std::uint32_t pop() {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("stack underflow");
        const std::uint32_t v = stack_.back();
        stack_.pop_back();
        return v;
    }
    std::uint32_t top() {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("stack underflow");
        return stack_.back();
    }
    std::vector<std::uint32_t> pop_to_mark() {
        if (marks_.empty()) fail("no MARK");
        std::vector<std::uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
        stack_.resize(marks_.back());
        marks_.pop_back();
        return items;
    }
    std::uint32_t make_seq(Kind k, std::vector<std::uint32_t> items) {
        PickleValue v;
        v.kind = k;
        v.items = std::move(items);
        return make(std::move(v));
    }
    PickleValue& at(std::uint32_t i) { return values_[i]; }

    void memo_put(std::uint64_t key) { memo_[key] = top(); }
    void memo_get(std::uint64_t key) {
        const auto it = memo_.find(key);
        if (it == memo_.end()) fail("memo key " + std::to_string(key) + " never stored");
        push(it->second);
    }

    void append_to(std::uint32_t list, const std::vector<std::uint32_t>& items) {
        if (at(list).kind == Kind::Object) return;   // a list subclass (deque, a config class): its items dropped
        if (at(list).kind != Kind::List) fail("APPEND to something other than a list");
        charge(4 * items.size());
        at(list).items.insert(at(list).items.end(), items.begin(), items.end());
    }
    void set_items(std::uint32_t dict, const std::vector<std::uint32_t>& kv) {
        if (at(dict).kind == Kind::Object) return;   // a dict subclass (EasyDict, defaultdict): its items dropped
        if (at(dict).kind != Kind::Dict) fail("SETITEM on something other than a dict");
        if (kv.size() % 2) fail("SETITEMS with an odd number of values");
        // kept in order, a repeated key too: the reader of the dict lets the last one win, as Python does
        charge(4 * kv.size());
        at(dict).items.insert(at(dict).items.end(), kv.begin(), kv.end());
    }

    std::uint32_t global(const std::string& module, const std::string& name) {
        if (module.size() > 200 || name.size() > 200)   // no name torch knows is this long (a memoised long string
            return object("the Python object " + quoted(module) + "." + quoted(name));   // must not be copied per use)
        const std::string g = module + "." + name;
        DType t;
        if (allowed_callable(g) || storage_dtype(g, t)) return make_text(Kind::Global, g);
        if (module == "torch" && (name.find("Storage") != std::string::npos || name.rfind("float8", 0) == 0 ||
                                  name.rfind("complex", 0) == 0 || name.rfind("quint", 0) == 0 || name.rfind("qint", 0) == 0 ||
                                  name.rfind("bits", 0) == 0 || name.rfind("int1", 0) == 0 || name.rfind("uint1", 0) == 0 ||
                                  name.rfind("float4", 0) == 0))
            return object("a tensor of type torch." + quoted(name));
        if (g == "torch._utils._rebuild_meta_tensor_no_storage" || g == "torch._utils._rebuild_wrapper_subclass")
            return object("a tensor without data (" + g + ": saved from a meta device or a tensor subclass)");
        if (g == "torch._utils._rebuild_qtensor" || g == "torch._utils._rebuild_sparse_tensor" ||
            g == "torch._utils._rebuild_sparse_csr_tensor" || g == "torch._utils._rebuild_nested_tensor")
            return object("a quantized, sparse or nested tensor (" + g + ")");
        return object("the Python object " + quoted(g));   // inert: never called
    }

    // (what it stands for, quoted and at most ~200 bytes: texts from the file never grow it or break its line)
    std::uint32_t object(const std::string& what) { return make_text(Kind::Object, quoted(what, 200)); }
    // what an Object stands for, carried to whatever is made from it (a tensor over an unreadable storage, ...)
    std::uint32_t object_from(std::uint32_t v) { return object(at(v).text); }   // (a copy: the arena may move)

    // ---- torch's callables ----
    std::int64_t as_int(std::uint32_t v, const char* what) {
        if (at(v).kind != Kind::Int && at(v).kind != Kind::Bool) fail(std::string(what) + " is not an integer");
        return at(v).integer;
    }
    // torch's _maybe_decode_ascii: str or bytes (quote the result in messages)
    std::string as_text(std::uint32_t v, const char* what) {
        if (at(v).kind != Kind::String && at(v).kind != Kind::Bytes) fail(std::string(what) + " is not a string");
        return at(v).text;
    }
    std::vector<std::int64_t> int_tuple(std::uint32_t v, const char* what) {
        if (at(v).kind != Kind::Tuple && at(v).kind != Kind::List) fail(std::string(what) + " is not a tuple");
        if (at(v).items.size() > kMaxDims) fail(std::string(what) + " has more than 64 dimensions");
        std::vector<std::int64_t> out;
        for (std::uint32_t i : at(v).items) {
            const std::int64_t x = as_int(i, what);
            if (x < 0 || x > (std::int64_t(1) << 58)) fail(std::string(what) + " holds " + std::to_string(x));
            out.push_back(x);
        }
        return out;
    }

    // persistent id ('storage', storage_type, key, location, numel[, view_metadata])
    std::uint32_t persistent_storage(std::uint32_t pid) {
        const PickleValue& t = at(pid);
        if (t.kind == Kind::Tuple && !t.items.empty() && (at(t.items[0]).kind == Kind::String || at(t.items[0]).kind == Kind::Bytes) &&
            at(t.items[0]).text == "module")   // the legacy format's ('module', class, file, source): a whole module saved
            return object("a whole nn.Module saved with torch.save(model)");
        if (t.kind != Kind::Tuple || (t.items.size() != 5 && t.items.size() != 6) || as_text(t.items[0], "a persistent id's tag") != "storage")
            fail("a persistent id other than ('storage', type, key, location, numel)");
        const std::vector<std::uint32_t> it = t.items;
        PickleValue s;
        s.kind = Kind::Storage;
        if (at(it[1]).kind == Kind::Object) {   // a storage of a type RetroKit does not read: its size kept for the legacy
            const std::string key = as_text(it[2], "a storage key");   // stream, whose records follow one another
            unreadable_[key] = unreadable_element_size(at(it[1]).text);
            return object_from(it[1]);
        }
        if (at(it[1]).kind != Kind::Global || !storage_dtype(at(it[1]).text, s.dtype) || at(it[1]).text.find("Storage") == std::string::npos)
            fail("a storage of an unknown type");
        s.text = as_text(it[2], "a storage key");
        as_text(it[3], "a storage location");
        s.integer = as_int(it[4], "a storage size");
        if (s.integer < 0) fail("a storage of negative size");
        if (it.size() == 6 && at(it[5]).kind != Kind::None) {   // legacy view_metadata: (view_key, offset, view_size)
            const PickleValue& vm = at(it[5]);
            if (vm.kind != Kind::Tuple || vm.items.size() != 3) fail("a storage view other than (key, offset, size)");
            s.view_offset = as_int(vm.items[1], "a storage view offset");
            s.view_numel = as_int(vm.items[2], "a storage view size");
            if (s.view_offset < 0 || s.view_numel < 0) fail("a storage view of negative offset or size");
        }
        return make(std::move(s));
    }

    std::uint32_t rebuild_tensor(const std::vector<std::uint32_t>& a, std::size_t min_args, std::size_t max_args, bool v3) {
        if (a.size() < min_args || a.size() > max_args) fail("a tensor rebuilt from " + std::to_string(a.size()) + " arguments");
        if (at(a[0]).kind == Kind::Object) return object_from(a[0]);
        if (at(a[0]).kind != Kind::Storage) fail("a tensor over something other than a storage");
        PickleValue t;
        t.kind = Kind::Tensor;
        t.storage = a[0];
        t.dtype = at(a[0]).dtype;
        t.offset = as_int(a[1], "a storage offset");
        if (t.offset < 0) fail("a negative storage offset");
        t.shape = int_tuple(a[2], "a tensor's size");
        t.stride = int_tuple(a[3], "a tensor's stride");
        if (t.shape.size() != t.stride.size()) fail("a tensor whose size and stride differ in length");
        if (v3) {
            if (at(a[6]).kind == Kind::Object) return object_from(a[6]);   // float8, complex, ...
            if (at(a[6]).kind != Kind::Global || !storage_dtype(at(a[6]).text, t.dtype) || at(a[6]).text.find("Storage") != std::string::npos)
                fail("a tensor of an unknown dtype");
        }
        // the optional metadata dict (torch._utils.get_tensor_metadata): {'neg': True} or {'conj': True} marks a
        // lazily negated or conjugated view whose bytes are not its values
        const std::size_t meta = v3 ? 7 : 6;
        if (a.size() > meta && at(a[meta]).kind != Kind::None) {
            const PickleValue& m = at(a[meta]);
            if (m.kind != Kind::Dict) fail("a tensor whose metadata is not a dict");
            for (std::size_t i = 0; i + 1 < m.items.size(); i += 2) {
                const PickleValue& flag = at(m.items[i + 1]);
                if (flag.kind == Kind::Bool && flag.integer == 0) continue;
                return object("a lazily negated or conjugated view (metadata '" + quoted(at(m.items[i]).text) +
                              "'; save it with .resolve_neg().resolve_conj() or .clone())");
            }
        }
        return make(std::move(t));
    }

    std::uint32_t call(std::uint32_t fn, std::uint32_t args_v, int depth = 0) {
        if (depth > 2) fail("tensor rebuilds nested in each other");
        if (at(fn).kind == Kind::Object) return object_from(fn);   // an inert object "called": never run
        if (at(fn).kind != Kind::Global) fail("REDUCE of something other than a callable");
        if (at(args_v).kind != Kind::Tuple) fail("REDUCE without an argument tuple");
        const std::string g = at(fn).text;
        const std::vector<std::uint32_t> a = at(args_v).items;
        if (g == "collections.OrderedDict") {   // OrderedDict(), or Python 2's OrderedDict([[k, v], ...])
            if (a.empty()) return make_seq(Kind::Dict, {});
            if (a.size() != 1 || (at(a[0]).kind != Kind::List && at(a[0]).kind != Kind::Tuple))
                fail("OrderedDict built from something other than a list of pairs");
            std::vector<std::uint32_t> kv;
            for (const std::uint32_t pair : at(a[0]).items) {
                if ((at(pair).kind != Kind::List && at(pair).kind != Kind::Tuple) || at(pair).items.size() != 2)
                    fail("OrderedDict built from something other than a list of pairs");
                kv.push_back(at(pair).items[0]);
                kv.push_back(at(pair).items[1]);
            }
            const std::uint32_t d = make_seq(Kind::Dict, {});
            set_items(d, kv);
            return d;
        }
        if (g == "torch._utils._rebuild_tensor") return rebuild_tensor(a, 4, 4, false);
        if (g == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(a, 6, 7, false);
        if (g == "torch._utils._rebuild_tensor_v3") return rebuild_tensor(a, 7, 8, true);
        if (g == "torch._utils._rebuild_parameter" || g == "torch._utils._rebuild_parameter_with_state") {
            if (!a.empty() && at(a[0]).kind == Kind::Object) return a[0];
            if (a.empty() || at(a[0]).kind != Kind::Tensor) fail("a parameter over something other than a tensor");
            return a[0];
        }
        if (g == "torch._tensor._rebuild_from_type_v2") {   // (func, new_type, args, state): func(*args), typed
            if (a.size() != 4) fail("a tensor rebuilt from " + std::to_string(a.size()) + " arguments");
            if (at(a[1]).kind == Kind::Object) return object_from(a[1]);   // a tensor of a subclass RetroKit does not know
            if (at(a[1]).kind != Kind::Global || (at(a[1]).text != "torch.Tensor" && at(a[1]).text != "torch.nn.parameter.Parameter"))
                fail("a tensor of a subclass other than torch.Tensor or Parameter");
            const std::uint32_t r = call(a[0], a[2], depth + 1);
            if (at(r).kind != Kind::Tensor && at(r).kind != Kind::Object) fail("a rebuilt tensor that is not a tensor");
            return r;
        }
        return object("the result of " + g);   // torch.Tensor or Parameter called directly: not a tensor it knows
    }

    // BUILD: state_dict()'s _metadata on its OrderedDict, a tensor's Python attributes, an object's __dict__ carry
    // nothing RetroKit reads and are dropped; a tensor's tuple state would re-point its data (Tensor.__setstate__),
    // so that tensor becomes an Object.
    void build(std::uint32_t obj, std::uint32_t state) {
        if (at(obj).kind == Kind::Tensor && at(state).kind != Kind::Dict && at(state).kind != Kind::None) {
            PickleValue& t = at(obj);
            t.kind = Kind::Object;
            t.text = "a tensor whose saved state re-points its data (Tensor.__setstate__ with a tuple)";
        }
    }

    // one opcode; true at STOP
    bool step(std::uint8_t op) {
        switch (op) {
            case 0x80: {   // PROTO
                const std::uint8_t v = byte();
                if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + " (torch.save writes 2)");
                return false;
            }
            case 0x95: take(8); return false;   // FRAME: a length hint, the opcodes follow in place
            case '.': return true;               // STOP
            case '(': marks_.push_back(stack_.size()); return false;
            case '0': pop(); return false;       // POP
            case '1': pop_to_mark(); return false;   // POP_MARK
            case '2': push(top()); return false;     // DUP
            case 'N': push(make_simple(Kind::None)); return false;
            case 0x88: push(make_simple(Kind::Bool, 1)); return false;
            case 0x89: push(make_simple(Kind::Bool, 0)); return false;
            case 'K': push(make_simple(Kind::Int, byte())); return false;   // BININT1
            case 'M': push(make_simple(Kind::Int, static_cast<std::int64_t>(le(2)))); return false;   // BININT2
            case 'J': push(make_simple(Kind::Int, static_cast<std::int32_t>(le(4)))); return false;   // BININT
            case 0x8a: case 0x8b: {   // LONG1, LONG4: little-endian two's complement
                const std::uint64_t n = op == 0x8a ? byte() : le(4);
                if (n <= 8) {
                    const std::uint8_t* q = take(static_cast<std::size_t>(n));
                    std::uint64_t u = 0;
                    for (std::size_t i = n; i-- > 0;) u = (u << 8) | q[i];
                    if (n > 0 && n < 8 && (q[n - 1] & 0x80)) u |= ~std::uint64_t(0) << (8 * n);   // sign-extend
                    push(make_simple(Kind::Int, static_cast<std::int64_t>(u)));
                } else {
                    push(make_text(Kind::BigInt, bytes_of(n)));
                }
                return false;
            }
            case 'G': {   // BINFLOAT: big-endian double
                const std::uint8_t* q = take(8);
                std::uint64_t u = 0;
                for (int i = 0; i < 8; ++i) u = (u << 8) | q[i];
                PickleValue v;
                v.kind = Kind::Float;
                std::memcpy(&v.real, &u, 8);
                push(make(std::move(v)));
                return false;
            }
            case 'X': push(make_text(Kind::String, bytes_of(le(4)))); return false;      // BINUNICODE
            case 0x8c: push(make_text(Kind::String, bytes_of(byte()))); return false;    // SHORT_BINUNICODE
            case 0x8d: push(make_text(Kind::String, bytes_of(le(8)))); return false;     // BINUNICODE8
            case 'T': push(make_text(Kind::Bytes, bytes_of(le(4)))); return false;       // BINSTRING (Python 2 str)
            case 'U': push(make_text(Kind::Bytes, bytes_of(byte()))); return false;      // SHORT_BINSTRING
            case 'B': push(make_text(Kind::Bytes, bytes_of(le(4)))); return false;       // BINBYTES
            case 'C': push(make_text(Kind::Bytes, bytes_of(byte()))); return false;      // SHORT_BINBYTES
            case 0x8e: push(make_text(Kind::Bytes, bytes_of(le(8)))); return false;      // BINBYTES8
            case ')': push(make_seq(Kind::Tuple, {})); return false;
            case 't': push(make_seq(Kind::Tuple, pop_to_mark())); return false;
            case 0x85: case 0x86: case 0x87: {   // TUPLE1..3
                const std::size_t n = op - 0x84u;
                std::vector<std::uint32_t> items(n);
                for (std::size_t i = n; i-- > 0;) items[i] = pop();
                push(make_seq(Kind::Tuple, std::move(items)));
                return false;
            }
            case ']': push(make_seq(Kind::List, {})); return false;
            case 'l': push(make_seq(Kind::List, pop_to_mark())); return false;
            case 'a': { const std::uint32_t v = pop(); append_to(top(), {v}); return false; }
            case 'e': { const std::vector<std::uint32_t> items = pop_to_mark(); append_to(top(), items); return false; }
            case '}': push(make_seq(Kind::Dict, {})); return false;
            case 'd': {
                const std::vector<std::uint32_t> kv = pop_to_mark();
                const std::uint32_t d = make_seq(Kind::Dict, {});
                set_items(d, kv);
                push(d);
                return false;
            }
            case 's': {
                const std::uint32_t v = pop(), k = pop();
                set_items(top(), {k, v});
                return false;
            }
            case 'u': { const std::vector<std::uint32_t> kv = pop_to_mark(); set_items(top(), kv); return false; }
            case 'q': memo_put(byte()); return false;      // BINPUT
            case 'r': memo_put(le(4)); return false;       // LONG_BINPUT
            case 0x94: memo_put(memo_.size()); return false;   // MEMOIZE
            case 'h': memo_get(byte()); return false;      // BINGET
            case 'j': memo_get(le(4)); return false;       // LONG_BINGET
            case 'c': {                                    // GLOBAL
                const std::string module = line();
                const std::string name = line();
                push(global(module, name));
                return false;
            }
            case 0x93: {   // STACK_GLOBAL
                const std::uint32_t name = pop(), module = pop();
                if (at(module).kind != Kind::String || at(name).kind != Kind::String) fail("STACK_GLOBAL of non-strings");
                if (at(module).text.find('\n') != std::string::npos || at(name).text.find('\n') != std::string::npos)
                    fail("STACK_GLOBAL of a name with a line break");
                push(global(at(module).text, at(name).text));
                return false;
            }
            case 'Q': { const std::uint32_t pid = pop(); push(persistent_storage(pid)); return false; }   // BINPERSID
            case 'R': {   // REDUCE
                const std::uint32_t args = pop(), fn = pop();
                push(call(fn, args));
                return false;
            }
            case 'b': { const std::uint32_t state = pop(); build(top(), state); return false; }   // BUILD (see build())
            case 0x81: {   // NEWOBJ: cls.__new__(cls, *args), an inert Object
                pop();
                const std::uint32_t cls = pop();
                push(at(cls).kind == Kind::Object ? object_from(cls) : object("an instance of " + quoted(at(cls).text)));
                return false;
            }
            case 0x92: {   // NEWOBJ_EX: the same with keyword arguments
                pop();
                pop();
                const std::uint32_t cls = pop();
                push(at(cls).kind == Kind::Object ? object_from(cls) : object("an instance of " + quoted(at(cls).text)));
                return false;
            }
            case 0x8f: push(make_seq(Kind::List, {})); return false;                        // EMPTY_SET, as a list
            case 0x90: { const std::vector<std::uint32_t> items = pop_to_mark(); append_to(top(), items); return false; }   // ADDITEMS
            case 0x91: push(make_seq(Kind::List, pop_to_mark())); return false;            // FROZENSET, as a list
            default: break;
        }
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("opcode ") + hex + " (a text-protocol, extension or buffer opcode torch.save never writes)");
    }
};

}  // namespace

PickleResult torch_unpickle(const std::uint8_t* data, std::size_t size, const std::string& path) {
    return Machine(data, size, path).run();
}

}  // namespace retro
