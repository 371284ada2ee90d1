#!/usr/bin/env bash
# retro-tokenizer beside sentencepiece's own command-line tools (Debian's `sentencepiece` package: the same library
# version RetroKit links), in one run, on the same files:
#   - train: `retro-tokenizer train` and `spm_train` with the same trainer options, alternating which goes first, then
#     the two vocabularies compared (spm_export_vocab);
#   - encode and decode: the corpus's files joined into one text; `retro-tokenizer encode` (1 thread, then all) and
#     `spm_encode --output_format=id` with retro-tokenizer's model, then `retro-tokenizer decode` and `spm_decode`;
#     the outputs compared byte for byte, and the decoded text with the input.
# Run by hand (docs/performance.md, "retro-tokenizer"):
#
#   tests/peers/tokenizer_vs_spm.sh BIN_DIR [CORPUS_DIR] [GLOB] [VOCAB] [REPEATS]
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
for tool in spm_train spm_encode spm_decode spm_export_vocab; do
    command -v "$tool" >/dev/null || { echo "$tool missing: apt-get install sentencepiece" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "/usr/bin/time missing: apt-get install time" >&2; exit 2; }
bin=$(cd "$bin" && pwd)
work=$(mktemp -d /tmp/tok-vs-spm.XXXXXX)
trap 'rm -rf "$work"' EXIT
# the files in the order retro-tokenizer reads them (sorted by path, byte order)
mapfile -t files < <(find "$corpus" -type f -name "$glob" | LC_ALL=C sort)
[ ${#files[@]} -gt 0 ] || { echo "$corpus: no files match $glob" >&2; exit 2; }
for f in "${files[@]}"; do   # spm_train takes its files as one comma-separated list
    case $f in *,*) echo "$f: a comma in a file's path, which spm_train's --input cannot take" >&2; exit 2 ;; esac
done
input=$(IFS=,; echo "${files[*]}")
# retro-tokenizer's trainer options (lib/text/tokenizer.cpp), seed 1234 its default
spm_opts=(--input="$input" --vocab_size="$vocab" --model_type=unigram --character_coverage=0.9995 --pad_id=0 --unk_id=1
          --bos_id=2 --eos_id=3 --byte_fallback=true --hard_vocab_limit=false --normalization_rule_name=identity
          --remove_extra_whitespaces=false --max_sentence_length=16384 --num_threads="$threads" --random_seed=1234
          --minloglevel=2)

# timed LABEL IN OUT COMMAND...: runs COMMAND (stdin IN, stdout OUT), prints "LABEL wall, CPU, peak RSS" and records
# the wall time under LABEL for mean_ratio
timed() {
    local label=$1 in=$2 out=$3; shift 3
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" <"$in" >"$out" 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
    read -r wall user sys rss <"$work/time"
    awk -v l="$label" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" \
        'BEGIN { printf "%-20s wall %7.2f s  cpu %7.2f s  peak RSS %6.0f MiB\n", l, w, u + s, r / 1024 }'
    echo "$label $wall" >>"$work/walls"
}
# mean_ratio A B: the mean wall times of the runs labelled A and B, and A's over B's
mean_ratio() {
    awk -v a="$1" -v b="$2" '$1 == a { sa += $2; na++ } $1 == b { sb += $2; nb++ }
        END { printf "mean wall: %s %.2f s, %s %.2f s: ratio %.2f\n", a, sa / na, b, sb / nb, (sa / na) / (sb / nb) }' "$work/walls"
}

echo "corpus: $corpus ($glob, ${#files[@]} files, $(du -shc "${files[@]}" | tail -1 | cut -f1)), vocabulary $vocab, $threads threads"
run_ours() { timed retro-tokenizer /dev/null /dev/null "$bin/retro-tokenizer" train "$corpus" --glob "**/$glob" \
                 --vocab-size "$vocab" --threads "$threads" --out "$work/ours" --force --quiet; }
run_spm() { timed spm_train /dev/null /dev/null spm_train "${spm_opts[@]}" --model_prefix="$work/spm"; }
for r in $(seq 1 "$repeats"); do
    if [ $((r % 2)) = 1 ]; then run_ours; run_spm; else run_spm; run_ours; fi
done
mean_ratio retro-tokenizer spm_train
spm_export_vocab --model="$work/ours/tok.model" --output="$work/ours.vocab"
spm_export_vocab --model="$work/spm.model" --output="$work/spm.vocab"
cut -f1 "$work/ours.vocab" | LC_ALL=C sort >"$work/a"
cut -f1 "$work/spm.vocab" | LC_ALL=C sort >"$work/b"
echo "vocabularies: $(wc -l <"$work/a") and $(wc -l <"$work/b") pieces, $(LC_ALL=C comm -12 "$work/a" "$work/b" | wc -l) in both;" \
     "same pieces, same order and scores: $(cmp -s "$work/ours.vocab" "$work/spm.vocab" && echo yes || echo no)"

# encode and decode: one text of the corpus's files, retro-tokenizer's model on both sides
cat "${files[@]}" >"$work/text.txt"
model="$work/ours/tok.model"
echo "text: $(wc -c <"$work/text.txt") bytes, $(wc -l <"$work/text.txt") lines"
for r in $(seq 1 "$repeats"); do
    timed "encode-1-thread" "$work/text.txt" "$work/ours.ids" "$bin/retro-tokenizer" --threads 1 encode --model "$model"
    timed "encode-$threads-threads" "$work/text.txt" "$work/ours.ids" "$bin/retro-tokenizer" --threads "$threads" encode --model "$model"
    timed spm_encode "$work/text.txt" "$work/spm.ids" spm_encode --model="$model" --output_format=id
    timed decode "$work/ours.ids" "$work/ours.txt" "$bin/retro-tokenizer" decode --model "$model"
    timed spm_decode "$work/spm.ids" "$work/spm.txt" spm_decode --model="$model" --input_format=id
done
mean_ratio encode-1-thread spm_encode
mean_ratio "encode-$threads-threads" spm_encode
mean_ratio decode spm_decode
echo "ids: $(cmp -s "$work/ours.ids" "$work/spm.ids" && echo identical || echo DIFFERENT);" \
     "decoded text: $(cmp -s "$work/ours.txt" "$work/spm.txt" && echo identical || echo DIFFERENT)," \
     "$(cmp -s "$work/ours.txt" "$work/text.txt" && echo "the input's bytes" || echo "NOT the input's bytes")"
