// Implementation of npy.h. The header is a Python dict literal; we parse the small subset numpy
// writes ({'descr': str, 'fortran_order': bool, 'shape': tuple of ints}) by hand.
#include "core/npy.h"

#include <cstring>

#include "core/lfs_pointer.h"

namespace retro {
namespace {

constexpr std::size_t kMaxHeader = 1 << 20;   // numpy's own limit is 10 KB unless told otherwise
constexpr char kMagic[] = "\x93NUMPY";

class DictParser {
public:
    DictParser(const std::string& s, const std::string& path) : s_(s), path_(path) {}

    void parse(std::string& descr, bool& fortran, std::vector<std::int64_t>& shape) {
        bool have_descr = false, have_fortran = false, have_shape = false;
        expect('{');
        while (true) {
            skip_ws();
            if (peek() == '}') break;
            std::string key = parse_string();
            expect(':');
            if (key == "descr") descr = parse_string(), have_descr = true;
            else if (key == "fortran_order") fortran = parse_bool(), have_fortran = true;
            else if (key == "shape") shape = parse_tuple(), have_shape = true;
            else fail("unknown header key '" + key + "'");
            skip_ws();
            if (peek() == ',') ++pos_;
            else if (peek() != '}') fail("expected ',' or '}' in header");
        }
        if (!have_descr || !have_fortran || !have_shape)
            fail("header lacks one of 'descr', 'fortran_order', 'shape'");
    }

private:
    [[noreturn]] void fail(const std::string& why) { user_error_in(path_, "corrupt .npy header: " + why); }
    void skip_ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n')) ++pos_;
    }
    char peek() { return pos_ < s_.size() ? s_[pos_] : '\0'; }
    void expect(char c) {
        skip_ws();
        if (peek() != c) fail(std::string("expected '") + c + "'");
        ++pos_;
    }
    std::string parse_string() {
        skip_ws();
        char q = peek();
        if (q != '\'' && q != '"') fail("expected a quoted string");
        std::size_t end = s_.find(q, pos_ + 1);
        if (end == std::string::npos) fail("unterminated string");
        std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
        pos_ = end + 1;
        return out;
    }
    bool parse_bool() {
        skip_ws();
        if (s_.compare(pos_, 4, "True") == 0) return pos_ += 4, true;
        if (s_.compare(pos_, 5, "False") == 0) return pos_ += 5, false;
        fail("expected True or False");
    }
    std::vector<std::int64_t> parse_tuple() {
        expect('(');
        std::vector<std::int64_t> dims;
        while (true) {
            skip_ws();
            if (peek() == ')') break;
            std::int64_t v = 0;
            std::size_t start = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
                if (v > (std::int64_t(1) << 58)) fail("dimension too large");
                v = v * 10 + (s_[pos_++] - '0');
            }
            if (pos_ == start) fail("expected a non-negative integer in shape");
            if (s_.compare(pos_, 1, "L") == 0) ++pos_;   // Python 2 longs
            dims.push_back(v);
            if (dims.size() > 32) fail("more than 32 dimensions");
            skip_ws();
            if (peek() == ',') ++pos_;
            else if (peek() != ')') fail("expected ',' or ')' in shape");
        }
        ++pos_;
        return dims;
    }

    const std::string& s_;
    const std::string& path_;
    std::size_t pos_ = 0;
};

}  // namespace

std::int64_t NpyHeader::numel() const { return shape_numel(shape, ""); }

NpyHeader npy_parse(const std::uint8_t* bytes, std::size_t size, const std::string& path) {
    if (size < 10 || std::memcmp(bytes, kMagic, 6) != 0) {
        refuse_lfs_pointer(path, bytes, size);
        user_error_in(path, "not a .npy file (bad magic)", "write it with numpy.save");
    }
    NpyHeader h;
    h.major = bytes[6];
    h.minor = bytes[7];
    std::size_t header_len = 0, prefix = 0;
    if (h.major == 1) {
        header_len = bytes[8] | (std::size_t(bytes[9]) << 8);
        prefix = 10;
    } else if (h.major == 2 || h.major == 3) {
        if (size < 12) user_error_in(path, "truncated .npy header");
        header_len = bytes[8] | (std::size_t(bytes[9]) << 8) | (std::size_t(bytes[10]) << 16) |
                     (std::size_t(bytes[11]) << 24);
        prefix = 12;
    } else {
        user_error_in(path, "unsupported .npy format version " + std::to_string(h.major) + "." +
                                std::to_string(h.minor));
    }
    if (header_len > kMaxHeader) user_error_in(path, "corrupt .npy header: length " + std::to_string(header_len) + " is implausible");
    if (prefix + header_len > size) user_error_in(path, "truncated .npy header");
    std::string dict(reinterpret_cast<const char*>(bytes + prefix), header_len);
    std::string descr;
    bool fortran = false;
    DictParser(dict, path).parse(descr, fortran, h.shape);
    if (fortran) user_error_in(path, "Fortran-order arrays are not supported", "save numpy.ascontiguousarray(a)");
    if (!dtype_from_npy_descr(descr, h.dtype)) {
        std::string why = "unsupported dtype '" + descr + "'";
        if (!descr.empty() && descr[0] == '>') why += " (big-endian)";
        user_error_in(path, why, "use one of u1,i1,u2,i2,u4,i4,u8,i8,f2,f4,f8,b1, little-endian");
    }
    h.data_offset = prefix + header_len;
    std::int64_t numel = shape_numel(h.shape, path);
    std::size_t esize = dtype_size(h.dtype);
    if (numel > 0 && static_cast<std::uint64_t>(numel) > (std::uint64_t(1) << 62) / esize)
        user_error_in(path, "shape " + shape_string(h.shape) + " is impossibly large");
    std::uint64_t need = static_cast<std::uint64_t>(numel) * esize;
    std::uint64_t have = size - h.data_offset;
    if (need > have)
        user_error_in(path, "truncated: header says shape " + shape_string(h.shape) + " (" + std::to_string(need) +
                                " bytes of data), file holds " + std::to_string(have));
    return h;
}

std::string npy_header_bytes(DType dtype, const std::vector<std::int64_t>& shape, std::size_t min_length) {
    std::string dict = "{'descr': '" + dtype_npy_descr(dtype) + "', 'fortran_order': False, 'shape': " +
                       shape_string(shape) + ", }";
    std::size_t prefix = 10;
    std::size_t total = prefix + dict.size() + 1;
    if (total > 65535) prefix = 12, total += 2;
    std::size_t padded = (total + 63) / 64 * 64;
    while (padded < min_length) padded += 64;
    if (prefix == 10 && padded > 65535) prefix = 12, padded = (padded + 2 + 63) / 64 * 64;
    std::string out(kMagic, 6);
    std::size_t header_len = padded - prefix;
    out += static_cast<char>(prefix == 10 ? 1 : 2);
    out += static_cast<char>(0);
    out += static_cast<char>(header_len & 0xff);
    out += static_cast<char>((header_len >> 8) & 0xff);
    if (prefix == 12) {
        out += static_cast<char>((header_len >> 16) & 0xff);
        out += static_cast<char>((header_len >> 24) & 0xff);
    }
    out += dict;
    out.append(padded - out.size() - 1, ' ');
    out += '\n';
    return out;
}

NpyArray::NpyArray(const std::string& path) : file_(path) {
    header_ = npy_parse(file_.data(), file_.size(), path);
}

void NpyArray::expect_shape(const std::vector<std::int64_t>& shape) const {
    bool ok = shape.size() == header_.shape.size();
    for (std::size_t i = 0; ok && i < shape.size(); ++i)
        if (shape[i] >= 0 && shape[i] != header_.shape[i]) ok = false;
    if (!ok) {
        std::string want = "(";
        for (std::size_t i = 0; i < shape.size(); ++i)
            want += (i ? ", " : "") + (shape[i] < 0 ? std::string("*") : std::to_string(shape[i]));
        want += shape.size() == 1 ? ",)" : ")";
        user_error_in(path(), "has shape " + shape_string(header_.shape) + ", expected " + want);
    }
}

void npy_save(const std::string& path, DType dtype, const std::vector<std::int64_t>& shape, const void* data) {
    AtomicFile f(path);
    f.write(npy_header_bytes(dtype, shape));
    f.write(data, static_cast<std::size_t>(shape_numel(shape, path)) * dtype_size(dtype));
    f.commit();
}

NpyWriter::NpyWriter(const std::string& path, DType dtype, std::vector<std::int64_t> row_shape)
    : file_(path), dtype_(dtype), row_shape_(std::move(row_shape)) {
    row_bytes_ = static_cast<std::size_t>(shape_numel(row_shape_, path)) * dtype_size(dtype);
    std::vector<std::int64_t> widest{std::int64_t(1) << 60};
    widest.insert(widest.end(), row_shape_.begin(), row_shape_.end());
    std::string header = npy_header_bytes(dtype_, widest);
    header_length_ = header.size();
    file_.write(header);   // placeholder, rewritten at commit
}

void NpyWriter::append(const void* rows, std::int64_t row_count) {
    file_.write(rows, row_bytes_ * static_cast<std::size_t>(row_count));
    rows_ += row_count;
}

void NpyWriter::commit() {
    std::vector<std::int64_t> shape{rows_};
    shape.insert(shape.end(), row_shape_.begin(), row_shape_.end());
    std::string header = npy_header_bytes(dtype_, shape, header_length_);
    RETRO_CHECK(header.size() == header_length_, "npy header grew");
    file_.pwrite_at(0, header.data(), header.size());
    file_.commit();
}

}  // namespace retro
