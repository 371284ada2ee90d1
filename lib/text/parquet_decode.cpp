// Implementation of parquet_decode.h over libsnappy, zlib, libzstd, liblz4 and libbrotli.
#include "text/parquet_decode.h"

#include <brotli/decode.h>
#include <lz4.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <string>

#include "text/parquet_meta.h"

namespace retro {
namespace {
// A page larger than this is refused before it is allocated: pyarrow and Spark write pages of about 1 MB, and a single
// document of a GiB is not corpus text (a damaged header's size would otherwise be allocated as it says).
constexpr std::size_t kMaxPageBytes = std::size_t(1) << 30;

std::uint64_t uleb128(const std::uint8_t*& p, const std::uint8_t* end) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end) throw ParquetMalformed("an encoded run is cut short");
        const std::uint8_t b = *p++;
        v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    throw ParquetMalformed("a varint longer than 10 bytes in a page");
}

std::int64_t zigzag(const std::uint8_t*& p, const std::uint8_t* end) {
    const std::uint64_t v = uleb128(p, end);
    return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

// Value `i` of `width` bits (<= 64) packed least significant bit first from `p` (which holds them all).
std::uint64_t unpack(const std::uint8_t* p, std::size_t i, int width) {
    std::uint64_t v = 0;
    const std::size_t first_bit = i * static_cast<std::size_t>(width);
    for (int got = 0; got < width;) {
        const std::size_t bit = first_bit + static_cast<std::size_t>(got);
        const int in_byte = static_cast<int>(bit % 8);
        const int take = std::min(8 - in_byte, width - got);
        const std::uint64_t bits = (p[bit / 8] >> in_byte) & ((1u << take) - 1);
        v |= bits << got;
        got += take;
    }
    return v;
}

void inflate_gzip(const std::uint8_t* src, std::size_t size, std::string& out) {
    z_stream z{};
    if (inflateInit2(&z, 15 + 32) != Z_OK) throw ParquetMalformed("zlib could not start");   // gzip or zlib header
    z.next_in = const_cast<Bytef*>(src);
    z.avail_in = static_cast<uInt>(size);
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    int rc = Z_OK;
    while (true) {
        rc = inflate(&z, Z_NO_FLUSH);
        // members written one after another (gzip allows it): the next one read on
        if (rc == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0) {
            inflateReset(&z);
            continue;
        }
        break;
    }
    const bool ok = rc == Z_STREAM_END && z.avail_out == 0;
    inflateEnd(&z);
    if (!ok) throw ParquetMalformed("a GZIP page does not inflate to its size");
}

bool lz4_block(const std::uint8_t* src, std::size_t size, char* dst, std::size_t expected) {
    if (size > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE) || expected > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE) * 255)
        return false;
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src), dst, static_cast<int>(size), static_cast<int>(expected));
    return n >= 0 && static_cast<std::size_t>(n) == expected;
}

std::uint32_t be32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 | static_cast<std::uint32_t>(p[2]) << 8 |
           static_cast<std::uint32_t>(p[3]);
}

// The deprecated LZ4 codec: parquet-mr wrote Hadoop's framing (each block an 8-byte header: its sizes, big-endian,
// uncompressed then compressed), Arrow before 0.17 a bare block. Hadoop's first, then a bare block, as Arrow reads it.
bool lz4_hadoop(const std::uint8_t* src, std::size_t size, char* dst, std::size_t expected) {
    std::size_t in = 0, out = 0;
    while (size - in >= 8) {
        const std::uint32_t raw = be32(src + in), packed = be32(src + in + 4);
        in += 8;
        if (packed > size - in || raw > expected - out || !lz4_block(src + in, packed, dst + out, raw)) return false;
        in += packed, out += raw;
    }
    return in == size && out == expected;
}
}  // namespace

void parquet_decompress(int codec, const std::uint8_t* src, std::size_t size, std::size_t expected, std::string& out) {
    if (expected > kMaxPageBytes)
        throw ParquetMalformed("a page of " + std::to_string(expected) + " bytes, over the 1 GiB RetroKit reads at once");
    // (sizes the page's own bytes state are checked before the header's size is allocated)
    std::size_t stated = 0;
    if ((codec == parquet::kUncompressed && size != expected) ||
        (codec == parquet::kSnappy &&
         (!snappy::GetUncompressedLength(reinterpret_cast<const char*>(src), size, &stated) || stated != expected)))
        throw ParquetMalformed(std::string("a ") + parquet_codec_name(codec) + " page's sizes differ");
    out.resize(expected);
    switch (codec) {
    case parquet::kUncompressed:
        if (size > 0) std::memcpy(out.data(), src, size);
        return;
    case parquet::kSnappy:
        if (!snappy::RawUncompress(reinterpret_cast<const char*>(src), size, out.data()))
            throw ParquetMalformed("a SNAPPY page does not decompress to its size");
        return;
    case parquet::kGzip:
        if (expected > 0) inflate_gzip(src, size, out);
        return;
    case parquet::kZstd: {
        const std::size_t n = ZSTD_decompress(out.data(), expected, src, size);
        if (ZSTD_isError(n) || n != expected) throw ParquetMalformed("a ZSTD page does not decompress to its size");
        return;
    }
    case parquet::kLz4Raw:
        if (!lz4_block(src, size, out.data(), expected)) throw ParquetMalformed("an LZ4_RAW page does not decompress to its size");
        return;
    case parquet::kLz4:
        if (!lz4_hadoop(src, size, out.data(), expected) && !lz4_block(src, size, out.data(), expected))
            throw ParquetMalformed("an LZ4 page does not decompress to its size (in Hadoop's framing or as one block)");
        return;
    case parquet::kBrotli: {
        std::size_t n = expected;
        if (BrotliDecoderDecompress(size, src, &n, reinterpret_cast<std::uint8_t*>(out.data())) != BROTLI_DECODER_RESULT_SUCCESS ||
            n != expected)
            throw ParquetMalformed("a BROTLI page does not decompress to its size");
        return;
    }
    default:
        throw ParquetMalformed(std::string("its pages are compressed with ") + parquet_codec_name(codec) +
                               ", which RetroKit does not read (it reads SNAPPY, GZIP, ZSTD, LZ4, LZ4_RAW, BROTLI and "
                               "uncompressed pages)");
    }
}

const std::uint8_t* parquet_rle_decode(const std::uint8_t* p, const std::uint8_t* end, int bit_width, std::size_t count,
                                       std::vector<std::uint32_t>& out) {
    if (bit_width < 0 || bit_width > 32) throw ParquetMalformed("a bit width of " + std::to_string(bit_width));
    out.clear();
    out.reserve(count);
    const std::size_t value_bytes = static_cast<std::size_t>((bit_width + 7) / 8);
    while (out.size() < count) {
        const std::uint64_t header = uleb128(p, end);
        if (header & 1) {   // bit-packed: header >> 1 groups of 8 values
            const std::uint64_t groups = header >> 1;
            // (width 0: no bytes, whatever the count; the count is capped before it is multiplied)
            if (bit_width > 0 && groups > static_cast<std::uint64_t>(end - p) / static_cast<std::uint64_t>(bit_width))
                throw ParquetMalformed("a bit-packed run is cut short");
            const std::uint64_t bytes = groups * static_cast<std::uint64_t>(bit_width);
            const std::size_t left = count - out.size();
            const std::size_t n = groups >= (left + 7) / 8 ? left : static_cast<std::size_t>(groups * 8);
            for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<std::uint32_t>(unpack(p, i, bit_width)));
            p += bytes;
        } else {            // a run: header >> 1 copies of one value
            const std::uint64_t run = header >> 1;
            if (value_bytes > static_cast<std::size_t>(end - p)) throw ParquetMalformed("a run is cut short");
            std::uint32_t v = 0;
            for (std::size_t b = 0; b < value_bytes; ++b) v |= static_cast<std::uint32_t>(p[b]) << (8 * b);
            p += value_bytes;
            const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(run, count - out.size()));
            out.insert(out.end(), n, v);
        }
    }
    return p;
}

const std::uint8_t* parquet_delta_decode(const std::uint8_t* p, const std::uint8_t* end, std::size_t count,
                                         std::vector<std::int64_t>& out) {
    const std::uint64_t block_size = uleb128(p, end), miniblocks = uleb128(p, end), total = uleb128(p, end);
    const std::int64_t first = zigzag(p, end);
    if (block_size == 0 || block_size % 128 != 0 || block_size > (1u << 20) || miniblocks == 0 ||
        block_size % miniblocks != 0 || (block_size / miniblocks) % 32 != 0)
        throw ParquetMalformed("a DELTA_BINARY_PACKED header with blocks of " + std::to_string(block_size) + " values in " +
                               std::to_string(miniblocks) + " miniblocks");
    if (total != count)
        throw ParquetMalformed("a DELTA_BINARY_PACKED run of " + std::to_string(total) + " values where the page has " +
                               std::to_string(count));
    const std::size_t per_mini = static_cast<std::size_t>(block_size / miniblocks);
    out.clear();
    out.reserve(count);
    if (count == 0) return p;
    out.push_back(first);
    std::uint64_t last = static_cast<std::uint64_t>(first);   // sums wrap, as the encoder's did
    while (out.size() < count) {
        const std::uint64_t min_delta = static_cast<std::uint64_t>(zigzag(p, end));
        if (miniblocks > static_cast<std::uint64_t>(end - p)) throw ParquetMalformed("a DELTA_BINARY_PACKED block is cut short");
        const std::uint8_t* widths = p;
        p += miniblocks;
        for (std::uint64_t m = 0; m < miniblocks && out.size() < count; ++m) {
            const int width = widths[m];
            if (width > 64) throw ParquetMalformed("a DELTA_BINARY_PACKED miniblock of " + std::to_string(width) + " bits");
            const std::size_t bytes = per_mini * static_cast<std::size_t>(width) / 8;
            if (bytes > static_cast<std::size_t>(end - p)) throw ParquetMalformed("a DELTA_BINARY_PACKED miniblock is cut short");
            const std::size_t n = std::min(per_mini, count - out.size());
            for (std::size_t i = 0; i < n; ++i) {
                last += min_delta + (width == 0 ? 0 : unpack(p, i, width));
                out.push_back(static_cast<std::int64_t>(last));
            }
            p += bytes;
        }
    }
    return p;
}

}  // namespace retro
