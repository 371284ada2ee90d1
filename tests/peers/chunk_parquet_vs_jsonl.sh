#!/usr/bin/env bash
# retro-chunk on a Parquet corpus beside the same documents as .jsonl, and pyarrow reading that Parquet file's text
# column, in one run: what reading Parquet costs RetroKit against reading JSON Lines (both tokenise the same text),
# and whether the two databases are the same bytes.
#   - the corpus: SIZE_MB of generated pseudo-text (Zipf-distributed words) as .jsonl, or a .jsonl given (its "text");
#     converted to Parquet by pyarrow (SNAPPY, dictionary, its default pages and row groups);
#   - retro-chunk on each, alternating which goes first, REPEATS times, --threads T; chunks.npy compared;
#   - pyarrow's `pq.read_table(columns=[text])` time, for scale (decoding alone, no tokenising).
# Run by hand (docs/performance.md, "Parquet corpora"); needs python3 with pyarrow:
#
#   tests/peers/chunk_parquet_vs_jsonl.sh BIN_DIR [SIZE_MB|CORPUS.jsonl] [THREADS] [REPEATS]
#
# defaults: 100 MB generated, all cores, 3 repeats. Writes nothing outside a temp folder.
set -euo pipefail
bin=${1:?usage: $0 BIN_DIR [SIZE_MB|CORPUS.jsonl] [THREADS] [REPEATS]}
what=${2:-100}
threads=${3:-$(nproc)}
repeats=${4:-3}
python3 -c 'import pyarrow' 2>/dev/null || { echo "pyarrow missing: pip install pyarrow" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time missing: apt-get install time" >&2; exit 2; }
bin=$(cd "$bin" && pwd)
work=$(mktemp -d /tmp/chunk-parquet.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [[ -f $what ]]; then
    cp "$what" "$work/corpus.jsonl"
else   # pseudo-text: Zipf-distributed words of a fixed list, documents of 200 B to 16 KB
    python3 - "$work/corpus.jsonl" "$what" <<'PY'
import json, random, sys
rng = random.Random(1234)
words = [("".join(rng.choice("etaoinshrdlucmfwypvbgkqjxz") for _ in range(rng.randint(1, 11)))) for _ in range(20000)]
weights = [1.0 / (i + 1) for i in range(len(words))]
target, size = int(sys.argv[2]) << 20, 0
with open(sys.argv[1], "w") as out:
    while size < target:
        text = " ".join(rng.choices(words, weights, k=rng.randint(30, 2500)))
        line = json.dumps({"text": text}) + "\n"
        out.write(line)
        size += len(line)
PY
fi
python3 - "$work/corpus.jsonl" "$work/corpus.parquet" <<'PY'
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]
pq.write_table(pa.table({"text": pa.array(texts, pa.string())}), sys.argv[2], compression="snappy")
m = pq.ParquetFile(sys.argv[2]).metadata
print(f"corpus: {len(texts)} documents; parquet {m.num_row_groups} row groups")
PY
ls -l "$work/corpus.jsonl" "$work/corpus.parquet" | awk '{print $5, $9}'
"$bin/retro-tokenizer" train "$work/corpus.jsonl" --out "$work/tok" --vocab-size 8000 --max-sentences 200000 --quiet
run() {   # name input
    rm -rf "$work/db-$1"
    /usr/bin/time -f "$1 wall %e s cpu %U+%S s rss %M KB" "$bin/retro-chunk" "$2" --tokenizer "$work/tok" \
        --out "$work/db-$1" --threads "$threads" --quiet 2>&1 | tail -1
}
for ((r = 0; r < repeats; r++)); do
    if ((r % 2 == 0)); then run jsonl "$work/corpus.jsonl"; run parquet "$work/corpus.parquet"
    else run parquet "$work/corpus.parquet"; run jsonl "$work/corpus.jsonl"; fi
done
cmp "$work/db-jsonl/chunks.npy" "$work/db-parquet/chunks.npy" && echo "chunks.npy: the same bytes"
cmp "$work/db-jsonl/doc_ids.npy" "$work/db-parquet/doc_ids.npy" && echo "doc_ids.npy: the same bytes"
python3 - "$work/corpus.parquet" "$threads" <<'PY'
import sys, time
import pyarrow as pa, pyarrow.parquet as pq
pa.set_cpu_count(int(sys.argv[2]))
best = min((lambda t0: (pq.read_table(sys.argv[1], columns=["text"]), time.perf_counter() - t0)[1])(time.perf_counter())
           for _ in range(3))
print(f"pyarrow {pa.__version__} read_table(columns=['text']): {best:.3f} s (best of 3, {sys.argv[2]} threads)")
PY
