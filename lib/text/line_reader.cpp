// Implementation of line_reader.h: a small Source per compression kind.
#include "text/line_reader.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

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
    }
    ~PlainSource() override { std::fclose(f); }
    std::size_t read(char* out, std::size_t cap) override {
        std::size_t n = std::fread(out, 1, cap, f);
        if (n == 0 && std::ferror(f)) user_error_in(path, "read error");
        return n;
    }
};

struct GzipSource : LineReader::Source {
    gzFile f;
    std::string path;
    explicit GzipSource(const std::string& p) : path(p) {
        f = gzopen(p.c_str(), "rb");
        if (!f) user_error_in(p, std::string("cannot open: ") + std::strerror(errno));
    }
    ~GzipSource() override { gzclose(f); }
    std::size_t read(char* out, std::size_t cap) override {
        int n = gzread(f, out, static_cast<unsigned>(cap));
        if (n < 0) {
            int err = 0;
            user_error_in(path, std::string("corrupt gzip data: ") + gzerror(f, &err));
        }
        return static_cast<std::size_t>(n);
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
            if (ZSTD_isError(last_ret)) user_error_in(path, std::string("corrupt zstd data: ") + ZSTD_getErrorName(last_ret));
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
    std::string out;
    std::size_t n;
    do {
        std::size_t old = out.size();
        out.resize(old + (1 << 20));
        n = raw->read(out.data() + old, 1 << 20);
        out.resize(old + n);
    } while (n > 0);
    return out;
}

}  // namespace retro
