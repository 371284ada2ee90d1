// Implementation of line_reader.h: a small Source per compression kind.
#include "text/line_reader.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/input_stamps.h"
#include "core/lfs_pointer.h"

namespace retro {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

struct LineReader::Source {
    virtual ~Source() = default;
    virtual std::size_t read(char* out, std::size_t cap) = 0;   // 0 = end
};

namespace {

struct PlainSource : LineReader::Source {
    FILE* f;
    std::string path;
    explicit PlainSource(const std::string& p) : path(p) {
        f = std::fopen(p.c_str(), "rb");
        if (!f) user_error_in(p, std::string("cannot open: ") + std::strerror(errno));
        input_stamp_file(p, f);   // the corpus file as opened, for the run's record
    }
    ~PlainSource() override { std::fclose(f); }
    std::size_t read(char* out, std::size_t cap) override {
        std::size_t n = std::fread(out, 1, cap, f);
        if (n == 0 && std::ferror(f)) user_error_in(path, "read error");
        return n;
    }
};

// inflate() over the file rather than gzread(): gzread passes a file that is not gzip through as it is, and
// reports a stream cut before its trailer as a normal end. Here the file must start with the gzip magic, every
// member must reach its trailer (CRC and length checked), and anything after a member must be another member.
struct GzipSource : LineReader::Source {
    FILE* f;
    z_stream zs{};
    std::string path;
    std::vector<unsigned char> in;
    bool eof = false, member_done = false;
    explicit GzipSource(const std::string& p) : path(p), in(1 << 16) {
        f = std::fopen(p.c_str(), "rb");
        if (!f) user_error_in(p, std::string("cannot open: ") + std::strerror(errno));
        input_stamp_file(p, f);   // the corpus file as opened, for the run's record
        if (inflateInit2(&zs, 15 + 16) != Z_OK) {   // 15 + 16: a gzip wrapper, the largest window
            std::fclose(f);
            throw InternalError("inflateInit2 failed");
        }
        refill();
        if (zs.avail_in < 2 || zs.next_in[0] != 0x1f || zs.next_in[1] != 0x8b) {
            const bool pointer = is_lfs_pointer(zs.next_in, zs.avail_in);
            inflateEnd(&zs);
            std::fclose(f);
            if (pointer) refuse_lfs_pointer_file(p);
            user_error_in(p, "not a gzip stream", "decompress it, or name it without .gz");
        }
    }
    ~GzipSource() override {
        inflateEnd(&zs);
        std::fclose(f);
    }
    // Reads more input once what was read is used up (at least 2 bytes where the file holds them).
    void refill() {
        while (zs.avail_in < 2 && !eof) {
            if (zs.avail_in == 1) in[0] = zs.next_in[0];
            const std::size_t have = zs.avail_in;
            const std::size_t n = std::fread(in.data() + have, 1, in.size() - have, f);
            if (n == 0) {
                if (std::ferror(f)) user_error_in(path, "read error");
                eof = true;
            }
            zs.next_in = in.data();
            zs.avail_in = static_cast<uInt>(have + n);
        }
    }
    std::size_t read(char* out, std::size_t cap) override {
        zs.next_out = reinterpret_cast<Bytef*>(out);
        zs.avail_out = static_cast<uInt>(cap);
        while (zs.avail_out == cap) {
            if (member_done) {   // after a member's trailer: the end of the file, or the next member
                refill();
                if (zs.avail_in == 0) return 0;
                if (zs.avail_in < 2 || zs.next_in[0] != 0x1f || zs.next_in[1] != 0x8b)
                    user_error_in(path, "holds data after the end of its gzip stream");
                if (inflateReset(&zs) != Z_OK) throw InternalError("inflateReset failed");
                member_done = false;
            }
            if (zs.avail_in == 0) refill();
            if (zs.avail_in == 0) user_error_in(path, "truncated gzip stream", "the file was cut short: copy or download it again");
            const int ret = inflate(&zs, Z_NO_FLUSH);
            if (ret == Z_STREAM_END) member_done = true;
            else if (ret == Z_DATA_ERROR) user_error_in(path, std::string("corrupt gzip data: ") + (zs.msg ? zs.msg : "inflate failed"));
            else if (ret == Z_MEM_ERROR) throw std::bad_alloc();
            else if (ret != Z_OK && ret != Z_BUF_ERROR) throw InternalError(path + ": inflate returned " + std::to_string(ret));
        }
        return cap - zs.avail_out;
    }
};

struct ZstdSource : LineReader::Source {
    FILE* f;
    ZSTD_DCtx* ctx;
    std::string path;
    std::vector<char> in;
    ZSTD_inBuffer ib{nullptr, 0, 0};
    bool eof = false;
    std::size_t last_ret = 0;
    explicit ZstdSource(const std::string& p) : path(p), in(ZSTD_DStreamInSize()) {
        f = std::fopen(p.c_str(), "rb");
        if (!f) user_error_in(p, std::string("cannot open: ") + std::strerror(errno));
        input_stamp_file(p, f);   // the corpus file as opened, for the run's record
        ctx = ZSTD_createDCtx();
        ib.src = in.data();
    }
    ~ZstdSource() override {
        ZSTD_freeDCtx(ctx);
        std::fclose(f);
    }
    std::size_t read(char* out, std::size_t cap) override {
        ZSTD_outBuffer ob{out, cap, 0};
        while (ob.pos == 0) {
            if (ib.pos == ib.size) {
                if (eof) {
                    if (last_ret != 0) user_error_in(path, "truncated zstd stream");
                    return 0;
                }
                ib.size = std::fread(in.data(), 1, in.size(), f);
                ib.pos = 0;
                if (ib.size == 0) {
                    eof = true;
                    continue;
                }
            }
            last_ret = ZSTD_decompressStream(ctx, &ob, &ib);
            if (ZSTD_isError(last_ret)) {
                refuse_lfs_pointer_file(path);
                user_error_in(path, std::string("corrupt zstd data: ") + ZSTD_getErrorName(last_ret));
            }
        }
        return ob.pos;
    }
};
}  // namespace

LineReader::LineReader(const std::string& path) : path_(path) {
    if (ends_with(path, ".gz")) src_ = std::make_unique<GzipSource>(path);
    else if (ends_with(path, ".zst")) src_ = std::make_unique<ZstdSource>(path);
    else src_ = std::make_unique<PlainSource>(path);
}

LineReader::~LineReader() = default;

bool LineReader::fill() {
    if (pos_ > 0) {
        buf_.erase(0, pos_);
        pos_ = 0;
    }
    std::size_t old = buf_.size();
    buf_.resize(old + (1 << 16));
    std::size_t n = src_->read(buf_.data() + old, 1 << 16);
    buf_.resize(old + n);
    return n > 0;
}

bool LineReader::next(std::string& line) {
    while (true) {
        std::size_t nl = buf_.find('\n', pos_);
        if (nl != std::string::npos) {
            line.assign(buf_, pos_, nl - pos_);
            line_offset_ = consumed_;
            consumed_ += static_cast<std::int64_t>(nl - pos_ + 1);
            pos_ = nl + 1;
            break;
        }
        if (!fill()) {
            if (pos_ >= buf_.size()) return false;
            line.assign(buf_, pos_, std::string::npos);
            line_offset_ = consumed_;
            consumed_ += static_cast<std::int64_t>(buf_.size() - pos_);
            pos_ = buf_.size();
            break;
        }
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ++line_number_;
    return true;
}

std::string read_whole_file(const std::string& path) {
    LineReader::Source* raw = nullptr;
    std::unique_ptr<LineReader::Source> src;
    if (ends_with(path, ".gz")) src = std::make_unique<GzipSource>(path);
    else if (ends_with(path, ".zst")) src = std::make_unique<ZstdSource>(path);
    else src = std::make_unique<PlainSource>(path);
    raw = src.get();
    // The string holds the file's bytes and little more: a folder corpus keeps a block of these (one per file) in
    // memory, counted by size against --block-bytes, so spare capacity would be memory nobody counts (a 12 KB file
    // read in 1 MiB steps came back in a 2 MiB string: 700 MB for 5.7 MB of small files, docs/chunk.md).
    std::string out;
    if (!ends_with(path, ".gz") && !ends_with(path, ".zst")) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        if (!ec) out.reserve(static_cast<std::size_t>(size));
    }
    std::vector<char> buf(std::size_t(1) << 16);
    for (std::size_t n; (n = raw->read(buf.data(), buf.size())) > 0;) out.append(buf.data(), n);
    if (out.capacity() > out.size() + out.size() / 8 + 64) out.shrink_to_fit();   // a stream of unknown length
    return out;
}

}  // namespace retro
