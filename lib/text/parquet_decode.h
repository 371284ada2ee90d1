// The decoding steps of a Parquet page (apache/parquet-format, Encodings.md and Compression.md), each over bytes in
// memory and bounded by them: a page's decompression (SNAPPY, GZIP, ZSTD, LZ4_RAW, LZ4, BROTLI or none), the RLE /
// bit-packed hybrid of definition levels and dictionary indices, and DELTA_BINARY_PACKED integers (the lengths of the
// DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY encodings). Damaged bytes throw ParquetMalformed.
// provides: parquet_decompress, parquet_rle_decode, parquet_delta_decode
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace retro {

// Decompresses `size` bytes at `src` of codec (parquet::Codec) into `out`, which must come to `expected` bytes.
// A codec RetroKit does not read (LZO: no writer of corpora uses it) throws ParquetMalformed naming it.
void parquet_decompress(int codec, const std::uint8_t* src, std::size_t size, std::size_t expected, std::string& out);

// Decodes `count` values of `bit_width` bits (0..32) from the RLE / bit-packed hybrid at [p, end) into `out`.
// Returns where the decoding stopped (a bit-packed run's last group may hold more values than asked).
const std::uint8_t* parquet_rle_decode(const std::uint8_t* p, const std::uint8_t* end, int bit_width, std::size_t count,
                                       std::vector<std::uint32_t>& out);

// Decodes a DELTA_BINARY_PACKED run at [p, end) into `out` (its header gives the count, which must be `count`).
// Returns where the run ends.
const std::uint8_t* parquet_delta_decode(const std::uint8_t* p, const std::uint8_t* end, std::size_t count,
                                         std::vector<std::int64_t>& out);

}  // namespace retro
