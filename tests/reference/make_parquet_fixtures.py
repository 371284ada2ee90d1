#!/usr/bin/env python3
"""Parquet corpus fixtures for tests/test_parquet.cpp, written by pyarrow (run by hand; the outputs are committed).

Usage: python3 tests/reference/make_parquet_fixtures.py [OUT_DIR]   (default tests/reference/fixtures/parquet)

Each NAME.parquet comes with NAME.expected.jsonl: one line a row of its text column as pyarrow reads it back,
{"text": "..."}, {"text": null} for a null, or {"hex": "..."} for bytes that are not UTF-8. The files cover what writers of corpora use: pages v1
and v2; SNAPPY, GZIP, ZSTD, BROTLI, LZ4_RAW and no compression; dictionary, PLAIN, DELTA_LENGTH_BYTE_ARRAY and
DELTA_BYTE_ARRAY strings; nulls; several row groups and pages; CRC-32s; and columns RetroKit refuses (not text, nested,
repeated).
"""
import json
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq

WORDS = ("retrieval chunk neighbour token model the of and a to in is that for encoder decoder attention "
         "Straße café naïve 東京 データ 🙂 Ελληνικά русский").split()


def texts(seed, n, nulls=True):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        if nulls and r < 0.05:
            out.append(None)
        elif r < 0.10:
            out.append("")                      # blank: skipped as an empty document
        elif r < 0.13:
            out.append("  \t ")                 # whitespace only: skipped too
        elif r < 0.40:
            out.append(rng.choice(["a repeated line", "another repeated line", "the third"]))   # dictionary hits
        else:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))))
    return out


def write(out_dir, name, table, column="text", **kw):
    path = os.path.join(out_dir, name + ".parquet")
    pq.write_table(table, path, **kw)
    write_expected(out_dir, name, column if column in table.column_names else None)
    print(name, os.path.getsize(path), "bytes", pq.ParquetFile(path).metadata.num_row_groups, "row groups")


def write_expected(out_dir, name, column):
    path = os.path.join(out_dir, name + ".parquet")
    back = pq.read_table(path).column(column).to_pylist() if column else []
    with open(os.path.join(out_dir, name + ".expected.jsonl"), "w") as f:
        for v in back:
            if isinstance(v, bytes):
                try:
                    v = v.decode("utf-8")
                except UnicodeDecodeError:
                    f.write(json.dumps({"hex": v.hex()}) + "\n")
                    continue
            f.write(json.dumps({"text": v}, ensure_ascii=False) + "\n")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "fixtures", "parquet")
    os.makedirs(out_dir, exist_ok=True)
    small_pages = dict(data_page_size=2048, row_group_size=150)

    t = pa.table({"id": pa.array(range(400), pa.int64()), "text": pa.array(texts(1, 400), pa.string())})
    # format version 1.0: PLAIN_DICTIONARY, as older writers (parquet-mr, Spark 2) wrote dictionary pages
    write(out_dir, "snappy_dict_v1", t, compression="snappy", data_page_version="1.0", version="1.0", **small_pages)
    write(out_dir, "gzip_plain_v1", t, compression="gzip", use_dictionary=False, data_page_version="1.0", **small_pages)
    # a dictionary page of at most 1 KiB: the writer falls back to PLAIN pages within a column chunk
    write(out_dir, "zstd_dict_v2", t, compression="zstd", data_page_version="2.0", dictionary_pagesize_limit=1024,
          **small_pages)
    write(out_dir, "crc_snappy_v2", t, compression="snappy", data_page_version="2.0", write_page_checksum=True,
          **small_pages)

    required = pa.table({"text": pa.array([s or "x" for s in texts(2, 300, nulls=False)], pa.string())},
                        schema=pa.schema([pa.field("text", pa.string(), nullable=False)]))
    write(out_dir, "none_plain_v2_required", required, compression="none", use_dictionary=False,
          data_page_version="2.0", **small_pages)
    write(out_dir, "delta_length_v2", t, compression="snappy", use_dictionary=False, data_page_version="2.0",
          column_encoding={"text": "DELTA_LENGTH_BYTE_ARRAY", "id": "PLAIN"}, **small_pages)
    # sorted rows share prefixes, which DELTA_BYTE_ARRAY keeps once
    sorted_rows = sorted(s for s in texts(3, 300) if s is not None)
    write(out_dir, "delta_byte_array_v1", pa.table({"text": pa.array(sorted_rows, pa.string())}), compression="zstd",
          use_dictionary=False, data_page_version="1.0", column_encoding={"text": "DELTA_BYTE_ARRAY"}, **small_pages)
    # raw bytes: invalid UTF-8 (a character cut short), a NUL inside a text, a large_string column read the same
    raw = pa.table({"body": pa.array([b"caf\xc3\xa9", b"cut \xe2\x82 short", b"a\x00b", b"\xff\xfe", None, b"ok"],
                                     pa.binary())})
    write(out_dir, "binary_body", raw, column="body", compression="snappy")
    write(out_dir, "large_string", pa.table({"text": pa.array(texts(4, 50), pa.large_string())}), compression="gzip")

    # the other codecs pyarrow writes: BROTLI, and LZ4 (pyarrow writes LZ4_RAW for it)
    write(out_dir, "brotli", pa.table({"text": pa.array(texts(5, 60), pa.string())}), compression="brotli")
    write(out_dir, "lz4_raw", pa.table({"text": pa.array(texts(6, 60), pa.string())}), compression="lz4")
    # quirks of other writers found by a helper (session 71): pyarrow's empty table (a column chunk of no values whose
    # data page offset is 0), fastparquet's empty frame (its Thrift writer gives an empty list element type 0), a
    # one-entry dictionary whose indices are bit-packed runs of 0-bit values (Polars; pyarrow writes RLE runs there)
    write(out_dir, "empty_table", pa.table({"text": pa.array([], pa.string())}))
    import fastparquet
    import pandas
    path = os.path.join(out_dir, "fastparquet_empty.parquet")
    fastparquet.write(path, pandas.DataFrame({"text": pandas.Series([], dtype=object)}), object_encoding="utf8")
    open(os.path.join(out_dir, "fastparquet_empty.expected.jsonl"), "w").close()
    print("fastparquet_empty", os.path.getsize(path), "bytes")
    import polars
    polars.DataFrame({"text": ["same", None, "same"]}).write_parquet(os.path.join(out_dir, "polars_one_value.parquet"))
    write_expected(out_dir, "polars_one_value", "text")
    # refused: a text column that is not text, nested or repeated
    odd = pa.table({"text": pa.array(range(5), pa.int64()),
                    "meta": pa.array([{"title": "t", "body": "b"}] * 5),
                    "tags": pa.array([["a", "b"]] * 5, pa.list_(pa.string())),
                    "content": pa.array(["one", "two", None, "four", "five"], pa.string())})
    write(out_dir, "odd_columns", odd, column="content", compression="snappy")


if __name__ == "__main__":
    main()
