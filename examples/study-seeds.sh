# Sourced by examples/scratch-study.sh and examples/retrofit-study.sh: study_settings, run_eval, run_seeds, write_summary
# and mean_sd. run_seeds
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

# study_settings NAME SETTINGS: the study's first run records SETTINGS (KEY=VALUE lines: what shapes every training
# run) in OUT/settings.txt; a later run into the same OUT with other settings is refused in one line naming the first
# difference (its runs would be resumed or reused under the old settings). The runs themselves resume (--resume): a
# rerun continues an interrupted study and reuses the finished runs.
study_settings() {
  local file="$OUT/settings.txt" diff
  if [ -f "$file" ]; then
    diff=$(diff <(cat "$file") <(printf '%s\n' "$2") | sed -n 's/^> //p' | head -n 1) || true
    if [ -n "$diff" ] || [ "$(cat "$file")" != "$2" ]; then
      echo "$1: error: $OUT holds a study made with other settings (now ${diff:-fewer settings}; $file has the old ones) (fix: choose another OUT_DIR, or remove $OUT)" >&2
      exit 2
    fi
  else
    printf '%s\n' "$2" >"$file"
  fi
}

# run_eval NAME TXT retro-train eval ...: runs the command with its output in TXT; when it fails, its error line (and
# where the rest is) goes to stderr and the status is returned.
run_eval() {
  local name=$1 txt=$2 rc=0
  shift 2
  "$@" >"$txt" 2>&1 || rc=$?
  if ((rc != 0)); then
    echo "$name: $(grep -m 1 'error' "$txt" || tail -n 1 "$txt") (the eval's whole output: $txt)" >&2
  fi
  return "$rc"
}
