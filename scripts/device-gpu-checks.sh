#!/usr/bin/env bash
# The GPU checks and benchmarks, run on a lent GPU machine from the repository root (docs/gpu.md):
#   scripts/device-gpu-checks.sh STEP...      logs and JSON under $OUT (default ./out-gpu)
# Steps: env, tests (the CUDA test cases), sanitize (compute-sanitizer memcheck on them),
#        retention (retro-bench retention --device cuda), fla (tests/peers/fla_retention.py, the same
#        shapes), knn (retro-bench knn --cuda), embed (retro-bench embed --device cuda beside HF on the GPU,
#        on a random BERT of all-MiniLM-L6-v2's shape). Needs .devkit/devkit.tar.gz from scripts/devkit-stage.sh
#        and, for fla, the wheels in .whl/ (flash-linear-attention and fla-core, docs/gpu.md).
# Environment: STEP_TIMEOUT (300 s per command), RET_T (T list), RET_DTYPES (bf16,fp32), RET_PAR_T (T list for parallel), RET_REPEATS.
set -uo pipefail
OUT=${OUT:-$PWD/out-gpu}
mkdir -p "$OUT"
kit=/tmp/devkit
if [[ ! -d $kit ]]; then
    mkdir -p $kit && tar -C $kit -xzf .devkit/devkit.tar.gz || { echo "no .devkit/devkit.tar.gz: run scripts/devkit-stage.sh and carry .devkit" >&2; exit 2; }
fi
cublas_dir=$(dirname "$(ls /usr/local/cuda/lib64/libcublas.so.* 2>/dev/null | head -1)" 2>/dev/null)
STEP_TIMEOUT=${STEP_TIMEOUT:-300}   # seconds per command, so one slow step cannot eat the whole call
rk() { LD_LIBRARY_PATH="$kit/lib:${cublas_dir:-/usr/local/cuda/lib64}" timeout "$STEP_TIMEOUT" "$@"; }
RET_T=${RET_T:-1024,2048,4096,8192,16384}
RET_PAR_T=${RET_PAR_T:-1024,2048,4096}
RET_DTYPES=${RET_DTYPES:-bf16,fp32}
RET_REPEATS=${RET_REPEATS:-5}
step() { echo; echo "=== $1 ($(date -u +%H:%M:%S))"; }
for s in "$@"; do
    case $s in
    env)
        step env
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
        head -2 /etc/os-release; nproc; ldd --version | head -1
        rk ldd $kit/bin/retro_tests | grep -E "not found|cublas|cudart" ;;
    tests)
        step tests
        # the tests run tools from the build tree they were compiled in (RETRO_BIN_DIR, RETRO_SOURCE_DIR): recreate it
        bindir=$(strings $kit/bin/retro_tests | grep -m1 -E '^/[^ ]*/bin$')   # <source>/<build>/bin
        src=$(dirname "$(dirname "$bindir")")
        if [[ -n $src && ! -e $src/tests ]]; then mkdir -p "$src" && for f in tests docs examples; do ln -sfn "$PWD/$f" "$src/$f"; done; fi
        if [[ -n $bindir && ! -e $bindir ]]; then mkdir -p "$(dirname "$bindir")" && ln -sfn $kit/bin "$bindir"; fi
        rk $kit/bin/retro_tests -tc='*CUDA*,*cuda*' 2>&1 | tee "$OUT/tests.log" | grep -E 'rms ratio|ERROR|CHECK|values|test cases|skipped' ;;
    sanitize)
        step sanitize
        rk compute-sanitizer --tool memcheck --print-limit 20 $kit/bin/retro_tests -tc='retention CUDA fp32*,knn: CUDA*' 2>&1 | tail -30 | tee "$OUT/sanitize.log" ;;
    retention)
        step retention
        rk $kit/bin/retro-bench retention --device cuda --modes chunkwise,recurrent --T "$RET_T" --dtype "$RET_DTYPES" \
            --repeats "$RET_REPEATS" --json "$OUT/rk_retention.json" 2>&1 | tee "$OUT/rk_retention.log"
        rk $kit/bin/retro-bench retention --device cuda --modes parallel --T "$RET_PAR_T" --dtype "$RET_DTYPES" \
            --repeats 3 --json "$OUT/rk_retention_parallel.json" 2>&1 | tee "$OUT/rk_retention_parallel.log" ;;
    fla)
        step fla
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
        PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout "$STEP_TIMEOUT" python3 tests/peers/fla_retention.py --modes chunkwise,parallel,recurrent \
            --T "$RET_T" --dtype "$RET_DTYPES" --json "$OUT/fla_retention.json" 2>&1 | grep -v '^ ' | tail -40 | tee "$OUT/fla.log" ;;
    embed)
        step embed
        # a random BERT of all-MiniLM-L6-v2's shape (no network there for the real weights; speed does not depend
        # on the values); the peer runs with the machine's own libraries, not the devkit's
        python3 tests/peers/make_bert_shape.py --out /tmp/bert-minilm-shape > /dev/null
        cat docs/*.md > /tmp/docs-text.txt
        printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec python3 "$@"\n' > /tmp/python-clean && chmod +x /tmp/python-clean
        rk $kit/bin/retro-bench embed --device cuda --model /tmp/bert-minilm-shape --chunks 4096 --batch 256 --repeats 5 \
            --texts /tmp/docs-text.txt --peer tests/peers/hf_embed.py --python /tmp/python-clean \
            --json "$OUT/rk_embed_cuda.json" 2>&1 | tee "$OUT/rk_embed_cuda.log" ;;
    knn)
        step knn
        rk $kit/bin/retro-bench knn --cuda --thread-counts "$(nproc)" --ivf-nlist 0 --json "$OUT/rk_knn.json" 2>&1 | tee "$OUT/rk_knn.log" ;;
    *) echo "unknown step $s" >&2; exit 2 ;;
    esac
done
