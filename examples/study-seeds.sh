# Sourced by examples/scratch-study.sh and examples/retrofit-study.sh: study_require_data, study_settings,
# study_data_settings, run_eval, run_seeds, write_summary and mean_sd.

# study_require_data NAME DATA: DATA must hold db8/ and knn8/ (exit 2 naming the missing one).
study_require_data() {
  local d
  for d in "$2/db8" "$2/knn8"; do
    [ -d "$d" ] || { echo "$1: error: $d is missing (fix: make db8/ and knn8/ as examples/demo.sh does, or give the folder holding them)" >&2; exit 2; }
  done
}

# run_seeds HEADER runs the caller's `study_seed S` for each seed of SEEDS, JOBS at a time (on a GPU the seeds' runs share it side
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

# study_settings NAME FILE SETTINGS [RUNS]: the study's first run records SETTINGS (KEY=VALUE lines: what shapes the
# training runs) in OUT/FILE; a later run into the same OUT with other settings is refused in one line naming the first
# difference, once OUT holds a run they shaped (RUNS, a glob of run folders in OUT, default every one: a finished run
# would be reused, an unfinished one resumed, under the old settings); before that (a first attempt that failed early)
# the new settings replace the old.
study_settings() {
  local name=$1 file="$OUT/$2" settings=$3 runs=${4:-*} diff
  if [ -f "$file" ] && [ "$(cat "$file")" != "$settings" ] && compgen -G "$OUT/$runs/config.json" >/dev/null; then
    diff=$(diff <(cat "$file") <(printf '%s\n' "$settings") | sed -n 's/^> //p' | head -n 1) || true
    echo "$name: error: $OUT holds a study made with other settings (now ${diff:-fewer settings}; $file has the old ones) (fix: choose another OUT_DIR, or remove $OUT)" >&2
    exit 2
  fi
  printf '%s\n' "$settings" >"$file"
}

# study_data_settings DATA CONFIG: the KEY=VALUE lines every study records for its data and config: the data folder
# resolved (db8/knn8 by their manifests' fingerprints would be stricter; retro-train refuses other files on a resume)
# and the config by its content, so that `examples/...` and `./examples/...` are one study.
study_data_settings() {
  [ -r "$2" ] || { echo "study: error: CONFIG $2 cannot be read" >&2; exit 2; }
  printf 'DATA=%s\nCONFIG=%s' "$(cd "$1" && pwd -P)" "$(cksum <"$2" | cut -d' ' -f1,2)"
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
