#!/usr/bin/env bash
# RETRO from scratch against its no-retrieval twin at equal compute (issue 17; docs/retrieval.md section 9): for each
# seed, a run with retrieval and its twin without, the same steps, schedule, data and seed; retro-train eval compares
# them on the validation split (real vs shuffled neighbours, by overlap with what CCA reads).
# Usage: examples/scratch-study.sh BIN_DIR DATA_DIR OUT_DIR [SEEDS]
#   DATA_DIR holds db8/ and knn8/ made as examples/demo.sh makes them (chunk 8); SEEDS default "1 2 3".
# Environment: STEPS (3000), CONFIG (examples/configs/demo-retrieval.json), LR (2e-3), DEVICE (cpu, or cuda),
#   THREADS (0 = all cores), JOBS (1: seeds one after another; on a GPU, 3 runs the seeds side by side),
#   TRAIN_OPTIONS (more retro-train options for both runs, e.g. "--train-docs-fraction 0.5": train on half the
#   documents, retrieve from all).
# Prints one line per seed and the mean ± sd over seeds; every run and eval JSON stays in OUT_DIR.
set -euo pipefail
usage="usage: examples/scratch-study.sh BIN_DIR DATA_DIR OUT_DIR [SEEDS]"
BIN=${1:?$usage}
DATA=${2:?$usage}
OUT=${3:?$usage}
SEEDS=${4:-1 2 3}
STEPS=${STEPS:-3000}
CONFIG=${CONFIG:-$(dirname "$0")/configs/demo-retrieval.json}
LR=${LR:-2e-3}
DEVICE=${DEVICE:-cpu}
THREADS=${THREADS:-0}
JOBS=${JOBS:-1}
for d in "$DATA/db8" "$DATA/knn8"; do
  [ -d "$d" ] || { echo "scratch-study: $d is missing (make it as examples/demo.sh does)" >&2; exit 2; }
done
mkdir -p "$OUT"
COMMON=(--db "$DATA/db8" --knn "$DATA/knn8" --config "$CONFIG" --lr "$LR" --device "$DEVICE" --threads "$THREADS" --quiet
  --steps "$STEPS" --warmup 100 --val-every "$STEPS" --checkpoint-every 1000)
read -r -a EXTRA <<<"${TRAIN_OPTIONS:-}"
COMMON+=("${EXTRA[@]}")

# one seed: both runs, the eval, and its summary row in OUT/row-sS.tsv
study_seed() {
  local s=$1 run="$OUT/retro-s$1" twin="$OUT/twin-s$1"
  [ -f "$run/model.safetensors" ] || "$BIN/retro-train" "${COMMON[@]}" --seed "$s" --out "$run" --force
  [ -f "$twin/model.safetensors" ] || "$BIN/retro-train" "${COMMON[@]}" --seed "$s" --out "$twin" --force --no-retrieval
  "$BIN/retro-train" eval --run "$run" --db "$DATA/db8" --knn "$DATA/knn8" --baseline "$twin" --overlap-with read \
    --alphas 0.125,0.5 --max-batches "${EVAL_BATCHES:-0}" --threads "$THREADS" --json-out "$OUT/eval-s$s.json" >"$OUT/eval-s$s.txt" 2>&1
  # the "1 (all)" rows: retrieval, no retrieval, shuffled neighbours, baseline (= the twin)
  awk -v s="$s" '/^1 \(all\)/ {all = 1; re = $6} all && $1 == "no" {no = $3} all && $1 == "shuffled" {sh = $3}
    all && $1 == "baseline" {tw = $2}
    END {printf "%s\t%s\t%s\t%s\t%s\t%+.4f\t%+.4f\n", s, re, no, sh, tw, sh - re, tw - re}' "$OUT/eval-s$s.txt" >"$OUT/row-s$s.tsv"
  awk -F'\t' '{printf "seed %s: retrieval %s, shuffled %s, twin %s: real - shuffled %s, twin - real %s nats\n", $1, $2, $4, $5, $6, $7}' \
    "$OUT/row-s$s.tsv"
}

source "$(dirname "$0")/study-seeds.sh"
run_seeds "$(printf 'seed\tretrieval\tno_retrieval\tshuffled\ttwin\treal_minus_shuffled\ttwin_minus_real')"
mean_sd 7 6 "RETRO from scratch vs its twin at equal steps, %d seed(s): twin - real %+.4f ± %.4f nats; real - shuffled %+.4f ± %.4f\n"
