#!/usr/bin/env bash
# Retro-fitting at equal compute (issue 17; docs/retrieval.md section 8): for each seed, a baseline trained without
# retrieval (BASE_STEPS), then FIT_STEPS more steps two ways from it: RETRO's CCA + encoder retro-fitted onto the
# frozen baseline (RETRO §4.2), and the baseline itself trained on without retrieval (its twin at the same steps and
# schedule). retro-train eval compares them on the validation split (real vs shuffled neighbours, by overlap).
# Usage: examples/retrofit-study.sh BIN_DIR DATA_DIR OUT_DIR [SEEDS]
#   DATA_DIR holds db8/ and knn8/ made as examples/demo.sh makes them (chunk 8); SEEDS default "1 2 3".
# Environment: BASE_STEPS (3000), FIT_STEPS (1000), CONFIG (examples/configs/demo-retrieval.json), LR (2e-3),
#   DEVICE (cpu, or cuda), THREADS (0 = all cores), EVAL_BATCHES (0 = the whole validation split), JOBS (1: seeds one after another; on a GPU, 3 runs the seeds
#   side by side), TRAIN_OPTIONS (more retro-train options for every run, e.g.
#   "--train-docs-fraction 0.5": train on half the documents, retrieve from all).
# Prints one line per seed and the mean ± sd over seeds; every run and eval JSON stays in OUT_DIR. Run again, it
# resumes: finished runs are reused, interrupted ones continue from their last checkpoint; OUT_DIR/settings.txt
# records the settings above and a rerun with others is refused (a new study wants a new OUT_DIR).
set -euo pipefail
BIN=${1:?usage: examples/retrofit-study.sh BIN_DIR DATA_DIR OUT_DIR [SEEDS]}
DATA=${2:?usage: examples/retrofit-study.sh BIN_DIR DATA_DIR OUT_DIR [SEEDS]}
OUT=${3:?usage: examples/retrofit-study.sh BIN_DIR DATA_DIR OUT_DIR [SEEDS]}
SEEDS=${4:-1 2 3}
BASE_STEPS=${BASE_STEPS:-3000}
FIT_STEPS=${FIT_STEPS:-1000}
CONFIG=${CONFIG:-$(dirname "$0")/configs/demo-retrieval.json}
LR=${LR:-2e-3}
DEVICE=${DEVICE:-cpu}
THREADS=${THREADS:-0}
JOBS=${JOBS:-1}
source "$(dirname "$0")/study-seeds.sh"
study_require_data retrofit-study "$DATA"
mkdir -p "$OUT"
study_settings retrofit-study settings.txt "$(study_data_settings "$DATA" "$CONFIG")
$(printf 'BASE_STEPS=%s\nFIT_STEPS=%s\nLR=%s\nDEVICE=%s\nTRAIN_OPTIONS=%s' "$BASE_STEPS" "$FIT_STEPS" "$LR" "$DEVICE" "${TRAIN_OPTIONS:-}")"
COMMON=(--db "$DATA/db8" --knn "$DATA/knn8" --config "$CONFIG" --lr "$LR" --device "$DEVICE" --threads "$THREADS" --quiet)
read -r -a EXTRA <<<"${TRAIN_OPTIONS:-}"
COMMON+=("${EXTRA[@]}")
# one seed: the base, the retro-fit and the continued twin, the eval, and its summary row in OUT/row-sS.tsv
study_seed() {
  local s=$1 base="$OUT/base-s$1" fit="$OUT/fit-s$1" cont="$OUT/cont-s$1"
  # a finished run (its manifest.json) is reused; an interrupted one continues from its last checkpoint (--resume)
  [ -f "$base/manifest.json" ] || "$BIN/retro-train" "${COMMON[@]}" --seed "$s" --out "$base" --resume \
    --steps "$BASE_STEPS" --warmup 100 --val-every "$BASE_STEPS" --checkpoint-every 500 --no-retrieval
  [ -f "$fit/manifest.json" ] || "$BIN/retro-train" "${COMMON[@]}" --seed "$s" --out "$fit" --resume \
    --steps "$FIT_STEPS" --warmup 20 --val-every "$FIT_STEPS" --init-from "$base" --train-only cca,encoder
  [ -f "$cont/manifest.json" ] || "$BIN/retro-train" "${COMMON[@]}" --seed "$s" --out "$cont" --resume \
    --steps "$FIT_STEPS" --warmup 20 --val-every "$FIT_STEPS" --init-from "$base" --no-retrieval
  run_eval "retrofit-study: seed $s" "$OUT/eval-s$s.txt" \
    "$BIN/retro-train" eval --run "$fit" --db "$DATA/db8" --knn "$DATA/knn8" --baseline "$cont" --overlap-with read \
    --alphas 0.125,0.5 --max-batches "${EVAL_BATCHES:-0}" --threads "$THREADS" --json-out "$OUT/eval-s$s.json"
  # the "1 (all)" rows: retrieval, no retrieval, shuffled neighbours, baseline (= the continued twin)
  awk -v s="$s" '/^1 \(all\)/ {all = 1; fit = $6} all && $1 == "shuffled" {sh = $3} all && $1 == "baseline" {bl = $2}
    END {printf "%s\t%s\t%s\t%s\t%+.4f\t%+.4f\n", s, fit, sh, bl, bl - fit, sh - fit}' "$OUT/eval-s$s.txt" >"$OUT/row-s$s.tsv"
  awk -F'\t' '{printf "seed %s: retro-fit %s, continued twin %s: twin - fit %s nats; shuffled - fit %s (the reading)\n", $1, $2, $4, $5, $6}' \
    "$OUT/row-s$s.tsv"
}

run_seeds "$(printf 'seed\tfit\tfit_shuffled\tcontinued\tcontinued_minus_fit\tshuffled_minus_fit')"
mean_sd 5 6 "retro-fit vs its continued twin at equal steps, %d seed(s): %+.4f ± %.4f nats; shuffled - fit %+.4f ± %.4f\n"
