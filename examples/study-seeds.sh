# Sourced by examples/scratch-study.sh and examples/retrofit-study.sh: run_seeds, write_summary and mean_sd. run_seeds
# HEADER runs the caller's `study_seed S` for each seed of SEEDS, JOBS at a time (on a GPU the seeds' runs share it side
# by side), then (HEADER not empty) writes OUT/summary.tsv: the tab-separated HEADER and each seed's OUT/row-sS.tsv, in
# seed order.
run_seeds() {
  local header=$1 pids=() s p
  for s in $SEEDS; do
    study_seed "$s" &
    pids+=($!)
    if ((${#pids[@]} >= JOBS)); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
  if [ -n "$header" ]; then write_summary "$header" row "$OUT/summary.tsv"; fi
}

# write_summary HEADER PREFIX FILE: FILE gets HEADER and each seed's OUT/PREFIX-sS.tsv, in seed order.
write_summary() {
  local s
  printf '%s\n' "$1" >"$3"
  for s in $SEEDS; do cat "$OUT/$2-s$s.tsv" >>"$3"; done
}

# mean_sd COL1 COL2 FORMAT [FILE]: the mean and sample sd over the seeds of FILE's (OUT/summary.tsv's) columns COL1 and
# COL2 (1-based), printed with FORMAT (printf: the seed count, then mean and sd of COL1, then of COL2).
mean_sd() {
  awk -F'\t' -v c1="$1" -v c2="$2" -v fmt="$3" 'NR > 1 {n++; a[n] = $c1; b[n] = $c2} END {
    if (n == 0) exit; for (i = 1; i <= n; i++) {ma += a[i]; mb += b[i]} ma /= n; mb /= n;
    for (i = 1; i <= n; i++) {va += (a[i] - ma)^2; vb += (b[i] - mb)^2}
    sa = n > 1 ? sqrt(va / (n - 1)) : 0; sb = n > 1 ? sqrt(vb / (n - 1)) : 0;
    printf fmt, n, ma, sa, mb, sb}' "${4:-$OUT/summary.tsv}"
}
