#!/usr/bin/env bash
# Without a scheduler: the shards of each stage as N local processes (xargs -P; GNU parallel works the same
# way: `parallel -j N retro-chunk ... --shard {}/N ::: $(seq 0 $((N-1)))`), each given --shard i/N, then
# `merge`: the same bytes as one run (tests/test_chunk.cpp, tests/test_knn.cpp). Threads per process =
# cores / N. Usage: examples/scale-out/shards-xargs.sh CORPUS_FOLDER OUT [N]
# Run again after a stop, it continues: a stage whose merged output has its manifest.json is skipped whole, shards
# resume (--resume), a merge stopped midway is made again (merge --resume), a tokenizer too (--force).
set -euo pipefail
CORPUS=${1:?corpus folder}
OUT=${2:?output folder}
N=${3:-4}
BIN=${RETRO_BIN:-build/bin}
T=$(( $(nproc) / N )); [ "$T" -ge 1 ] || T=1
mkdir -p "$OUT/shards"
[ -f "$OUT/tok/manifest.json" ] || "$BIN/retro-tokenizer" train "$CORPUS" --out "$OUT/tok" --vocab-size 8000 --quiet --force

if [ ! -f "$OUT/db/manifest.json" ]; then
  seq 0 $((N - 1)) | xargs -P "$N" -I{} "$BIN/retro-chunk" "$CORPUS" --tokenizer "$OUT/tok" --shard {}/"$N" \
      --threads "$T" --out "$OUT/shards/db.{}" --quiet --resume
  "$BIN/retro-chunk" merge "$OUT"/shards/db.* --out "$OUT/db" --quiet --resume
fi

if [ ! -f "$OUT/index/manifest.json" ]; then
  seq 0 $((N - 1)) | xargs -P "$N" -I{} "$BIN/retro-index" "$OUT/db" --shard {}/"$N" --threads "$T" \
      --out "$OUT/shards/index.{}" --quiet --resume
  "$BIN/retro-index" merge "$OUT"/shards/index.* --out "$OUT/index" --quiet --resume
fi

if [ ! -f "$OUT/knn/manifest.json" ]; then
  seq 0 $((N - 1)) | xargs -P "$N" -I{} "$BIN/retro-knn" "$OUT/index" --db "$OUT/db" --shard {}/"$N" --threads "$T" \
      --out "$OUT/shards/knn.{}" --quiet --resume
  "$BIN/retro-knn" merge "$OUT"/shards/knn.* --out "$OUT/knn" --quiet --resume
fi
echo "done: $OUT/db $OUT/index $OUT/knn"
