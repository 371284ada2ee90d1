#!/usr/bin/env bash
# RETRO from scratch against its no-retrieval twin at equal compute (issue 17; docs/retrieval.md section 9): for each
# seed, a run with retrieval and its twin without, the same steps, schedule, data and seed; retro-train eval compares
# them on the validation split (real vs shuffled neighbours, by overlap with what CCA reads).
# Usage: examples/scratch-study.sh BIN_DIR DATA_DIR OUT_DIR [SEEDS]
#   DATA_DIR holds db8/ and knn8/ made as examples/demo.sh makes them (chunk 8); SEEDS default "1 2 3".
# Environment: STEPS (3000), CONFIG (examples/configs/demo-retrieval.json), LR (2e-3), DEVICE (cpu, or cuda),
#   THREADS (0 = all cores), JOBS (1: seeds one after another; on a GPU, 3 runs the seeds side by side),
#   TRAIN_OPTIONS (more retro-train options for both runs, e.g. "--train-docs-fraction 0.5": train on half the
#   documents, retrieve from all), RECIPES (several RETRO recipes against the same twins: ';'-separated retro-train
#   options for the RETRO run only, e.g. "--retrieval-lr-scale 0.3;--oracle-neighbours 0.2 --oracle-until 1000"; the
#   twins train once, recipe I's runs are OUT_DIR/retro-rI-sS with eval-rI-sS.*, row-rI-sS.tsv and summary-rI.tsv;
#   each recipe's eval runs beside the next recipe's training).
# Prints one line per seed (and recipe) and the mean ± sd over seeds; every run and eval JSON stays in OUT_DIR. Run
# again, it resumes: finished runs are reused, interrupted ones continue from their last checkpoint; OUT_DIR/settings.txt
# records the settings above and OUT_DIR/recipe-rI.txt recipe I's options; a rerun with others is refused (a new
# study wants a new OUT_DIR; recipes may be added after the recorded ones).
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
source "$(dirname "$0")/study-seeds.sh"
study_require_data scratch-study "$DATA"
mkdir -p "$OUT"
study_settings scratch-study settings.txt "$(study_data_settings "$DATA" "$CONFIG")
$(printf 'STEPS=%s\nLR=%s\nDEVICE=%s\nTRAIN_OPTIONS=%s' "$STEPS" "$LR" "$DEVICE" "${TRAIN_OPTIONS:-}")"
COMMON=(--db "$DATA/db8" --knn "$DATA/knn8" --config "$CONFIG" --lr "$LR" --device "$DEVICE" --threads "$THREADS" --quiet
  --steps "$STEPS" --warmup 100 --val-every "$STEPS" --checkpoint-every 1000)
read -r -a EXTRA <<<"${TRAIN_OPTIONS:-}"
COMMON+=("${EXTRA[@]}")

IFS=';' read -r -a RECIPE_LIST <<<"${RECIPES:-}"
# each recipe's options, by position: recipe I's runs are reused only under the same options (recipes may be added)
for i in "${!RECIPE_LIST[@]}"; do
  study_settings scratch-study "recipe-r$((i + 1)).txt" "${RECIPE_LIST[$i]}" "retro-r$((i + 1))-s*"
done

# one recipe of one seed: its run (more options in $2), the eval against the seed's twin in the background, and its
# summary row in OUT/row-$4.tsv (retro-train's output folder OUT/$3), printed as "$5: ..."
study_recipe() {
  local s=$1 options=$2 run="$OUT/$3" tag=$4 label=$5 twin="$OUT/twin-s$1" more
  read -r -a more <<<"$options"
  # a finished run (its manifest.json) is reused; an interrupted one continues from its last checkpoint (--resume)
  [ -f "$run/manifest.json" ] || "$BIN/retro-train" "${COMMON[@]}" "${more[@]}" --seed "$s" --out "$run" --resume
  (
    run_eval "scratch-study: $label" "$OUT/eval-$tag.txt" \
      "$BIN/retro-train" eval --run "$run" --db "$DATA/db8" --knn "$DATA/knn8" --baseline "$twin" --overlap-with read \
      --alphas 0.125,0.5 --max-batches "${EVAL_BATCHES:-0}" --threads "$THREADS" --json-out "$OUT/eval-$tag.json"
    # the "1 (all)" rows: retrieval, no retrieval, shuffled neighbours, baseline (= the twin)
    awk -v s="$s" '/^1 \(all\)/ {all = 1; re = $6} all && $1 == "no" {no = $3} all && $1 == "shuffled" {sh = $3}
      all && $1 == "baseline" {tw = $2}
      END {printf "%s\t%s\t%s\t%s\t%s\t%+.4f\t%+.4f\n", s, re, no, sh, tw, sh - re, tw - re}' "$OUT/eval-$tag.txt" >"$OUT/row-$tag.tsv"
    awk -F'\t' -v t="$label" '{printf "%s: retrieval %s, shuffled %s, twin %s: real - shuffled %s, twin - real %s nats\n", t, $2, $4, $5, $6, $7}' \
      "$OUT/row-$tag.tsv"
  ) &
  EVAL_PIDS+=($!)
}

# one seed: its twin, then each recipe's run (the evals beside the next training), and their summary rows
study_seed() {
  local s=$1 twin="$OUT/twin-s$1" i p
  EVAL_PIDS=()
  [ -f "$twin/manifest.json" ] || "$BIN/retro-train" "${COMMON[@]}" --seed "$s" --out "$twin" --resume --no-retrieval
  if ((${#RECIPE_LIST[@]} == 0)); then
    study_recipe "$s" "" "retro-s$s" "s$s" "seed $s"
  else
    for i in "${!RECIPE_LIST[@]}"; do study_recipe "$s" "${RECIPE_LIST[$i]}" "retro-r$((i + 1))-s$s" "r$((i + 1))-s$s" \
      "recipe $((i + 1)) seed $s"; done
  fi
  local rc=0
  for p in "${EVAL_PIDS[@]}"; do wait "$p" || rc=$?; done   # every eval ends before a failed one fails the seed
  return "$rc"
}

header="$(printf 'seed\tretrieval\tno_retrieval\tshuffled\ttwin\treal_minus_shuffled\ttwin_minus_real')"
format="RETRO from scratch vs its twin at equal steps, %d seed(s): twin - real %+.4f ± %.4f nats; real - shuffled %+.4f ± %.4f\n"
if ((${#RECIPE_LIST[@]} == 0)); then
  run_seeds "$header"
  mean_sd 7 6 "$format"
else
  run_seeds ""
  for i in "${!RECIPE_LIST[@]}"; do
    write_summary "$header" "row-r$((i + 1))" "$OUT/summary-r$((i + 1)).tsv"
    echo "recipe $((i + 1)): ${RECIPE_LIST[$i]:-(no more options)}"
    mean_sd 7 6 "$format" "$OUT/summary-r$((i + 1)).tsv"
  done
fi
