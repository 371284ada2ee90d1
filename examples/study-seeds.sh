# Sourced by examples/scratch-study.sh and examples/retrofit-study.sh: run_seeds HEADER runs the caller's
# `study_seed S` for each seed of SEEDS, JOBS at a time (on a GPU the seeds' runs share it side by side), then writes
# OUT/summary.tsv: the tab-separated HEADER and each seed's OUT/row-sS.tsv, in seed order.
run_seeds() {
  local header=$1 pids=() s p
  for s in $SEEDS; do
    study_seed "$s" &
    pids+=($!)
    if ((${#pids[@]} >= JOBS)); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
  printf '%s\n' "$header" >"$OUT/summary.tsv"
  for s in $SEEDS; do cat "$OUT/row-s$s.tsv" >>"$OUT/summary.tsv"; done
}
