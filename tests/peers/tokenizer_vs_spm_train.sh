#!/usr/bin/env bash
# retro-tokenizer train beside sentencepiece's own spm_train (Debian's `sentencepiece` package: the same library
# version RetroKit links) on the same files with the same trainer options, in one run, alternating which goes
# first; then the two vocabularies compared (spm_export_vocab). Run by hand (docs/performance.md, "retro-tokenizer"):
#
#   tests/peers/tokenizer_vs_spm_train.sh BIN_DIR [CORPUS_DIR] [GLOB] [VOCAB] [REPEATS]
#
# defaults: the demo's corpus (/usr/share/doc/python3.11/html/_sources, '*.rst.txt', vocabulary 8000), 2 repeats.
# Prints one line per run (wall seconds, CPU seconds, peak RSS) and a summary; writes nothing outside a temp folder.
set -euo pipefail
bin=${1:?usage: $0 BIN_DIR [CORPUS_DIR] [GLOB] [VOCAB] [REPEATS]}
corpus=${2:-/usr/share/doc/python3.11/html/_sources}
glob=${3:-*.rst.txt}
vocab=${4:-8000}
repeats=${5:-2}
threads=$(nproc)
command -v spm_train >/dev/null || { echo "spm_train missing: apt-get install sentencepiece" >&2; exit 2; }
work=$(mktemp -d /tmp/tok-vs-spm.XXXXXX)
trap 'rm -rf "$work"' EXIT
# the files in the order retro-tokenizer reads them (sorted by path, byte order)
mapfile -t files < <(find "$corpus" -type f -name "$glob" | LC_ALL=C sort)
[ ${#files[@]} -gt 0 ] || { echo "$corpus: no files match $glob" >&2; exit 2; }
input=$(IFS=,; echo "${files[*]}")
# retro-tokenizer's trainer options (lib/text/tokenizer.cpp), seed 1234 its default
spm_opts=(--input="$input" --vocab_size="$vocab" --model_type=unigram --character_coverage=0.9995 --pad_id=0 --unk_id=1
          --bos_id=2 --eos_id=3 --byte_fallback=true --hard_vocab_limit=false --normalization_rule_name=identity
          --remove_extra_whitespaces=false --max_sentence_length=16384 --num_threads="$threads" --random_seed=1234
          --minloglevel=2)
timed() {   # label, command...: one line "label wall_s cpu_s peak_rss_MiB"
    local label=$1; shift
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
    read -r wall user sys rss <"$work/time"
    awk -v l="$label" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" \
        'BEGIN { printf "%-16s wall %7.2f s  cpu %7.2f s  peak RSS %6.0f MiB\n", l, w, u + s, r / 1024 }'
    echo "$label $wall" >>"$work/walls"
}
echo "corpus: $corpus ($glob, ${#files[@]} files, $(du -shc "${files[@]}" | tail -1 | cut -f1)), vocabulary $vocab, $threads threads"
for r in $(seq 1 "$repeats"); do
    run_ours() { timed retro-tokenizer "$bin/retro-tokenizer" train "$corpus" --glob "**/$glob" --vocab-size "$vocab" \
                     --threads "$threads" --out "$work/ours" --force --quiet; }
    run_spm() { timed spm_train spm_train "${spm_opts[@]}" --model_prefix="$work/spm"; }
    if [ $((r % 2)) = 1 ]; then run_ours; run_spm; else run_spm; run_ours; fi
done
awk '{ s[$1] += $2; n[$1]++ } END { printf "mean wall: retro-tokenizer %.2f s, spm_train %.2f s: ratio %.2f\n",
     s["retro-tokenizer"] / n["retro-tokenizer"], s["spm_train"] / n["spm_train"],
     (s["retro-tokenizer"] / n["retro-tokenizer"]) / (s["spm_train"] / n["spm_train"]) }' "$work/walls"
spm_export_vocab --model="$work/ours/tok.model" --output="$work/ours.vocab"
spm_export_vocab --model="$work/spm.model" --output="$work/spm.vocab"
cut -f1 "$work/ours.vocab" | LC_ALL=C sort >"$work/a"
cut -f1 "$work/spm.vocab" | LC_ALL=C sort >"$work/b"
echo "vocabularies: $(wc -l <"$work/a") and $(wc -l <"$work/b") pieces, $(LC_ALL=C comm -12 "$work/a" "$work/b" | wc -l) in both;" \
     "same pieces, same order and scores: $(cmp -s "$work/ours.vocab" "$work/spm.vocab" && echo yes || echo no)"
