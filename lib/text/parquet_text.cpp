// Implementation of parquet_text.h: the schema's leaves, then each row group's column chunk page by page (a dictionary
// page, then data pages: definition levels, then the non-null values) — parquet-format's README.md and Encodings.md.
#include "text/parquet_text.h"

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "text/parquet_decode.h"

namespace retro {
namespace {
constexpr int kMaxSchemaDepth = 64;
// A page of more rows than this is refused: a damaged header's count is allocated as levels and lengths (4 to 16
// bytes a value: at most ~1 GiB, as a page's bytes). Writers cap a page at 20,000 rows by default (pyarrow's
// data_page_row_count_limit, parquet-mr's page.row.count.limit), but fastparquet writes a row group as one page, of
// up to 50 million rows by default (its row_group_offsets; a helper's files, session 71).
constexpr std::int64_t kMaxPageValues = std::int64_t(1) << 26;

// PLAIN byte arrays: each a 4-byte little-endian length and its bytes; emit(view) for each of `count`.
template <typename Emit>
void plain_values(const std::uint8_t* p, const std::uint8_t* end, std::size_t count, Emit&& emit) {
    for (std::size_t i = 0; i < count; ++i) {
        if (end - p < 4) throw ParquetMalformed("a page's values are cut short");
        const std::uint32_t n = parquet_le32(p);
        p += 4;
        if (n > static_cast<std::size_t>(end - p)) throw ParquetMalformed("a page's values are cut short");
        emit(std::string_view(reinterpret_cast<const char*>(p), n));
        p += n;
    }
}

// The values of a data page: emit(view) for each of its `count` non-null strings from [p, end) in `encoding`, in
// order, one at a time (a view into the page, the dictionary, or the value DELTA_BYTE_ARRAY rebuilt from a prefix of
// the one before: valid until the next call). Values are never all held at once: a page of repeats (a dictionary
// index of 0 bits, a DELTA prefix of the whole value before) stands for far more text than its bytes.
template <typename Emit>
void page_values(int encoding, const std::uint8_t* p, const std::uint8_t* end, std::size_t count,
                 const std::vector<std::string_view>& dictionary, bool has_dictionary, Emit&& emit) {
    switch (encoding) {
    case parquet::kPlain: plain_values(p, end, count, emit); return;
    case parquet::kPlainDictionary:
    case parquet::kRleDictionary: {
        if (!has_dictionary) throw ParquetMalformed("a dictionary-encoded page without a dictionary page");
        if (count == 0) return;
        if (p >= end) throw ParquetMalformed("a page's values are cut short");
        std::vector<std::uint32_t> ids;
        parquet_rle_decode(p + 1, end, *p, count, ids);
        for (const std::uint32_t id : ids) {
            if (id >= dictionary.size())
                throw ParquetMalformed("a value's dictionary index " + std::to_string(id) + " is past its " +
                                       std::to_string(dictionary.size()) + " entries");
            emit(dictionary[id]);
        }
        return;
    }
    case parquet::kDeltaLengthByteArray: {
        std::vector<std::int64_t> lengths;
        p = parquet_delta_decode(p, end, count, lengths);
        for (const std::int64_t n : lengths) {
            if (n < 0 || n > end - p) throw ParquetMalformed("a page's values are cut short");
            emit(std::string_view(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n)));
            p += n;
        }
        return;
    }
    case parquet::kDeltaByteArray: {
        std::vector<std::int64_t> prefixes, suffixes;
        p = parquet_delta_decode(p, end, count, prefixes);
        p = parquet_delta_decode(p, end, count, suffixes);
        std::string value;   // the one before, whose prefix the next keeps
        for (std::size_t i = 0; i < count; ++i) {
            const std::int64_t keep = prefixes[i], n = suffixes[i];
            if (keep < 0 || static_cast<std::uint64_t>(keep) > value.size())
                throw ParquetMalformed("a value's prefix is longer than the value before");
            if (n < 0 || n > end - p) throw ParquetMalformed("a page's values are cut short");
            value.resize(static_cast<std::size_t>(keep));
            value.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
            p += n;
            emit(std::string_view(value));
        }
        return;
    }
    default:
        throw ParquetMalformed(std::string("its text is stored as ") + parquet_encoding_name(encoding) +
                               ", which RetroKit does not read (it reads PLAIN, dictionary, DELTA_LENGTH_BYTE_ARRAY and "
                               "DELTA_BYTE_ARRAY strings)");
    }
}

// Gives back the resident pages of the mapping `base` (page-aligned: mmap's) that lie wholly in [from, to): a page
// once decoded is never read again (its strings are copies), and a file of GBs read through its mapping otherwise
// stays in the process's resident set to the end (clean file pages, reclaimable, but counted: as fingerprinting's
// mapping once was, docs/performance.md "retro-chunk"). Advice only: a failure changes nothing read. Returns where the
// next release starts (a page that [from, to) covers only in part is given back with the next range).
std::int64_t release_mapped(const std::uint8_t* base, std::int64_t from, std::int64_t to) {
    static const std::int64_t page = ::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096;
    const std::int64_t first = (from + page - 1) / page * page, last = to / page * page;
    if (last <= first) return from;
    ::madvise(const_cast<std::uint8_t*>(base) + first, static_cast<std::size_t>(last - first), MADV_DONTNEED);
    return last;
}
}  // namespace

ParquetTextFile::ParquetTextFile(const std::string& path) : file_(path) {
    footer_ = parquet_read_footer(file_.data(), file_.size());
    std::size_t next = 1;   // schema[0] is the root: its children are the top-level columns
    const ParquetSchemaNode& root = footer_.schema[0];
    for (int c = 0; c < root.num_children; ++c) find_leaves(next, 1, leaves_, top_);
    if (next != footer_.schema.size()) throw ParquetMalformed("its schema's nodes do not form one tree");
    for (const ParquetRowGroup& g : footer_.row_groups)
        if (g.columns.size() != leaves_.size())
            throw ParquetMalformed("a row group holds " + std::to_string(g.columns.size()) + " columns where the schema has " +
                                   std::to_string(leaves_.size()));
}

void ParquetTextFile::find_leaves(std::size_t& next, int depth, std::vector<Leaf>& leaves, std::vector<std::size_t>& top) const {
    if (depth > kMaxSchemaDepth) throw ParquetMalformed("its schema is nested too deep");
    if (next >= footer_.schema.size()) throw ParquetMalformed("its schema names more children than it holds");
    const std::size_t node = next++;
    if (depth == 1) top.push_back(node);
    const ParquetSchemaNode& n = footer_.schema[node];
    if (n.num_children == 0) {
        leaves.push_back({leaves.size(), node, depth});
        return;
    }
    for (int c = 0; c < n.num_children; ++c) find_leaves(next, depth + 1, leaves, top);
}

std::vector<std::string> ParquetTextFile::column_names() const {
    std::vector<std::string> names;
    for (const std::size_t node : top_) {
        const ParquetSchemaNode& n = footer_.schema[node];
        names.push_back(n.name + " (" + (n.num_children > 0 ? "group" : parquet_type_name(n.type)) + ")");
    }
    return names;
}

void ParquetTextFile::read_column(const std::string& name,
                                  const std::function<void(std::int64_t, const std::string_view*, std::int64_t)>& fn) const {
    const auto top = std::find_if(top_.begin(), top_.end(), [&](std::size_t node) { return footer_.schema[node].name == name; });
    if (top == top_.end()) throw ParquetColumnProblem("has no column '" + name + "'");
    const ParquetSchemaNode& n = footer_.schema[*top];
    if (n.num_children > 0) throw ParquetColumnProblem("its column '" + name + "' is a group of nested fields, not text");
    if (n.repetition == parquet::kRepeated)
        throw ParquetColumnProblem("its column '" + name + "' is repeated (a list in each row), not one text a row");
    if (n.type != parquet::kByteArray)
        throw ParquetColumnProblem("its column '" + name + "' holds " + parquet_type_name(n.type) + " values, not text");
    const auto leaf = std::find_if(leaves_.begin(), leaves_.end(), [&](const Leaf& l) { return l.node == *top; });
    const int max_definition = n.repetition == parquet::kOptional ? 1 : 0;
    std::int64_t row = 0;
    for (const ParquetRowGroup& g : footer_.row_groups) {
        const ParquetColumnChunk& chunk = g.columns[leaf->index];
        if (!chunk.has_meta)
            throw ParquetMalformed("its column '" + name + "' has no metadata in a row group (an encrypted column?)");
        if (!chunk.file_path.empty())
            throw ParquetMalformed("its column '" + name + "' is stored in another file (" + chunk.file_path + ")");
        if (chunk.type != parquet::kByteArray) throw ParquetMalformed("its column '" + name + "' has another type in a row group");
        const std::int64_t first = row;
        read_chunk(chunk, max_definition, row, fn);
        // (a column that is not repeated holds a value, or a null, for each row)
        if (row - first != g.num_rows)
            throw ParquetMalformed("a row group of " + std::to_string(g.num_rows) + " rows holds " + std::to_string(row - first) +
                                   " values of column '" + name + "'");
    }
    if (row != footer_.num_rows)
        throw ParquetMalformed("its row groups hold " + std::to_string(row) + " rows where its footer says " +
                               std::to_string(footer_.num_rows));
}

void ParquetTextFile::read_chunk(const ParquetColumnChunk& chunk, int max_definition, std::int64_t& row,
                                 const std::function<void(std::int64_t, const std::string_view*, std::int64_t)>& fn) const {
    if (chunk.num_values == 0) return;   // (an empty chunk: pyarrow records its data page offset as 0)
    // (some writers record 0 for "no dictionary page": a dictionary page is only one before the data pages)
    std::int64_t start = chunk.data_page_offset;
    if (chunk.dictionary_page_offset >= 4 && chunk.dictionary_page_offset < start) start = chunk.dictionary_page_offset;
    const auto limit = static_cast<std::int64_t>(footer_.footer_offset);
    if (start < 4 || start >= limit || chunk.total_compressed_size > limit - start)
        throw ParquetMalformed("a column chunk lies outside the file's data");
    const std::uint8_t* const base = file_.data();
    std::int64_t pos = start;
    const std::int64_t end = start + chunk.total_compressed_size;
    std::string dictionary_bytes, page;
    std::vector<std::string_view> dictionary;
    std::vector<std::uint32_t> levels;
    bool has_dictionary = false;
    std::int64_t released = start;   // the mapping before this is given back (release_mapped)
    for (std::int64_t done = 0; done < chunk.num_values;) {
        if (pos >= end) throw ParquetMalformed("a column chunk ends before its " + std::to_string(chunk.num_values) + " values");
        const ParquetPageHeader h = parquet_read_page_header(base + pos, static_cast<std::size_t>(end - pos));
        const std::int64_t payload = pos + static_cast<std::int64_t>(h.header_size);
        if (h.compressed_size > end - payload) throw ParquetMalformed("a page runs past its column chunk");
        const std::uint8_t* const data = base + payload;
        const auto csize = static_cast<std::size_t>(h.compressed_size);
        if (h.has_crc && static_cast<std::uint32_t>(crc32_z(0, data, csize)) != h.crc)
            throw ParquetMalformed("a page fails its CRC-32 (the file is damaged)");
        const std::int64_t page_offset = pos;
        pos = payload + h.compressed_size;
        struct Release {   // once the page is decoded (or skipped): its bytes are copied out by then
            const std::uint8_t* base;
            std::int64_t& from;
            std::int64_t to;
            ~Release() { from = release_mapped(base, from, to); }
        } const release{base, released, pos};
        if (h.type == parquet::kIndexPage) continue;
        if (h.num_values > kMaxPageValues)
            throw ParquetMalformed("a page of " + std::to_string(h.num_values) + " values, more than RetroKit reads at once");
        const auto count = static_cast<std::size_t>(h.num_values);
        if (h.type == parquet::kDictionaryPage) {
            if (h.encoding != parquet::kPlain && h.encoding != parquet::kPlainDictionary)
                throw ParquetMalformed(std::string("a dictionary page in ") + parquet_encoding_name(h.encoding));
            parquet_decompress(chunk.codec, data, csize, static_cast<std::size_t>(h.uncompressed_size), dictionary_bytes);
            dictionary.clear();
            const auto* d = reinterpret_cast<const std::uint8_t*>(dictionary_bytes.data());
            plain_values(d, d + dictionary_bytes.size(), count, [&](std::string_view v) { dictionary.push_back(v); });
            has_dictionary = true;
            continue;
        }
        const std::uint8_t* level_bytes = nullptr;   // the definition levels, where the column has them
        const std::uint8_t* level_end = nullptr;
        const std::uint8_t* value_bytes = nullptr;
        const std::uint8_t* value_end = nullptr;
        if (h.type == parquet::kDataPage) {
            parquet_decompress(chunk.codec, data, csize, static_cast<std::size_t>(h.uncompressed_size), page);
            const auto* p = reinterpret_cast<const std::uint8_t*>(page.data());
            const std::uint8_t* const page_end = p + page.size();
            if (max_definition > 0) {
                if (h.definition_level_encoding != parquet::kRle)
                    throw ParquetMalformed(std::string("its definition levels are ") + parquet_encoding_name(h.definition_level_encoding) +
                                           ", which RetroKit does not read (it reads RLE)");
                if (page_end - p < 4 || parquet_le32(p) > static_cast<std::size_t>(page_end - p - 4))
                    throw ParquetMalformed("a page's definition levels are cut short");
                level_bytes = p + 4;
                level_end = level_bytes + parquet_le32(p);
                p = level_end;
            }
            value_bytes = p, value_end = page_end;
        } else if (h.type == parquet::kDataPageV2) {
            // levels first, never compressed; then the values, compressed unless is_compressed says otherwise
            if (h.repetition_levels_bytes != 0) throw ParquetMalformed("a page of a top-level column has repetition levels");
            if (h.definition_levels_bytes > h.compressed_size || h.definition_levels_bytes > h.uncompressed_size)
                throw ParquetMalformed("a page's definition levels are larger than the page");
            const auto levels_size = static_cast<std::size_t>(h.definition_levels_bytes);
            level_bytes = data, level_end = data + levels_size;
            const std::size_t rest = static_cast<std::size_t>(h.uncompressed_size) - levels_size;
            if (h.is_compressed) parquet_decompress(chunk.codec, data + levels_size, csize - levels_size, rest, page);
            else parquet_decompress(parquet::kUncompressed, data + levels_size, csize - levels_size, rest, page);
            value_bytes = reinterpret_cast<const std::uint8_t*>(page.data()), value_end = value_bytes + page.size();
            if (max_definition == 0) level_bytes = nullptr;
        } else {
            throw ParquetMalformed("a page of unknown type " + std::to_string(h.type));
        }
        std::size_t present = count;
        if (level_bytes) {
            parquet_rle_decode(level_bytes, level_end, 1, count, levels);
            present = static_cast<std::size_t>(std::count(levels.begin(), levels.end(), 1u));
            if (present + static_cast<std::size_t>(std::count(levels.begin(), levels.end(), 0u)) != count)
                throw ParquetMalformed("a definition level past the column's greatest (1)");
        }
        // the rows in order: each null where its level says, each value as the decoder gives it
        std::size_t at = 0;
        const auto nulls_before_value = [&] {
            for (; level_bytes && at < count && levels[at] == 0; ++at, ++row) fn(row, nullptr, page_offset);
        };
        page_values(h.encoding, value_bytes, value_end, present, dictionary, has_dictionary, [&](std::string_view v) {
            nulls_before_value();
            fn(row++, &v, page_offset);
            ++at;
        });
        nulls_before_value();
        done += h.num_values;
    }
}

}  // namespace retro
