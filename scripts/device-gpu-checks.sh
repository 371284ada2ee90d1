#!/usr/bin/env bash
# The GPU checks and benchmarks, run on a lent GPU machine from the repository root (docs/gpu.md):
#   scripts/device-gpu-checks.sh [STEP...]     logs and JSON under $OUT (default ./out-gpu)
# Steps: env, tests (the CUDA test cases, the BERT encoder's golden test among them), sanitize (compute-sanitizer
#        memcheck on the op harness's CUDA cases and CUDA exact search), racecheck (compute-sanitizer racecheck on the
#        op harness's CUDA cases: every kernel with shared memory; ~2-3 minutes on an H100, not in the default list), synccheck
#        (compute-sanitizer synccheck, barrier misuse, on the same cases, then again with the 16-warp retention walk),
#        retention (retro-bench retention --device
#        cuda), fla (tests/peers/fla_retention.py, the same shapes), knn (retro-bench knn --cuda), embed (retro-bench
#        embed --device cuda beside HF on the GPU, on a random BERT of all-MiniLM-L6-v2's shape), train (retro-bench
#        train --device cuda: the demo config, then TRAIN_CONFIG at TRAIN_BATCH x TRAIN_SEQ beside RETRO-pytorch on the
#        GPU in fp32 and bf16 autocast, when retro_pytorch imports there), generate (retro-bench generate --device cuda
#        at prompts 64 and 512, eager and with --cuda-graphs, beside rp_generate.py on the GPU; then GEN_BATCH = 8
#        sequences a step at prompt 512), curve (retro-train --device cuda, fp32 and bf16, on the
#        demo's db8/knn8 carried in CURVE_DATA = .devkit/curve, CURVE_STEPS = 100), profile (retro-bench train and
#        generate --device cuda --profile: the time of each op in a step of TRAIN_CONFIG and in a decoded token),
#        flash (the fused attention's mma.sync kernels: as planned, with one load stage, with CCA's backward as two kernels, classifying every
#        backward entry, over fp32 operands;
#        FLASH_KINDS, wmma on request: the op harness with each, then retro-bench ops and a bf16 training step alternating, FLASH_RUNS), retwalk (chunkwise retention's mma.sync walks
#        as planned against mma-1copy, one state copy, and mma16, 16 warps a block (RETWALK_KINDS; mma-split, mma64, mma1, wmma on request): the op harness with each of RETWALK_TEST_KINDS
#        (RETWALK_RACECHECK=1: also racecheck with mma16), then retro-bench
#        retention chunkwise bf16 alternating: RETWALK_RUNS, RETWALK_T), ab (retro-bench generate with graphs, the previous build's and this one's alternating: AB_RUNS, AB_ARGS,
#        .devkit/devkit-prev.tar.gz from scripts/devkit-stage.sh --keep-prev),
#        pdl (the decode kernels as programmatic dependent launches against RETRO_PDL=0: the generate tests with each,
#        then retro-bench generate with graphs at prompt 512 alternating, PDL_RUNS),
#        fused (the fused decode step, one cooperative kernel a token: its test plain and under memcheck, then
#        retro-bench generate's graph and fused columns with RETRO_DECODE_BLOCKS_PER_SM in FUSED_BLOCKS ("2 1") and
#        RETRO_DECODE_PREFETCH_MB in FUSED_PREFETCH_MB ("16 0"), the demo config at prompts 64 and 512 and the 172M
#        config at 512),
#        kernels (each kernel of eager decode steps timed alone by Nsight Compute, summed by name:
#        scripts/ncu-kernel-table.py; NCU_SKIP / NCU_COUNT launches), retrofit (examples/retrofit-study.sh with DEVICE=cuda on CURVE_DATA, seeds RETROFIT_SEEDS), studies (issue 17's
#        from-scratch and retro-fit studies on part of the documents, side by side; STUDY_* below). Needs
#        .devkit/devkit.tar.gz from scripts/devkit-stage.sh and, for fla, the wheels in .whl/ (docs/gpu.md).
# With no STEP it runs the default list, `env tests embed sanitize knn` with smaller embed and knn sizes, within
# GPU_CHECKS_BUDGET seconds (540) so that it ends, summary included, inside one 10-minute device call.
# Each step passes when every command in it exits 0 (124 or 137: killed by `timeout`); a step that the budget left
# no time for fails as "not run". The last line is the summary, e.g.
#   gpu-checks: PASS env tests embed | FAIL sanitize (rc 124, timeout) knn (not run: out of time)
# (also in $OUT/summary.txt); the exit status is 0 when every step passed, 1 when one failed, 2 on a usage error.
# Environment: STEP_TIMEOUT (300 s per command), GPU_CHECKS_BUDGET (seconds for the whole run; 0 = none, the default
# with named steps), CUDA_TESTS / SANITIZE_TESTS / RACECHECK_TESTS (doctest filters of the tests / sanitize / racecheck
# and synccheck steps), UNFUSED_TESTS (the tests step's rerun with RETRO_UNFUSE=all after a failure), EMBED_CHUNKS,
# EMBED_REPEATS (4096, 5; default list 1024, 3), TRAIN_CONFIG, TRAIN_BATCH, TRAIN_SEQ (retro-172m.json, 8, 1024), KNN_N, KNN_QUERIES (retro-bench's 1M, 4096; default list 262144,
# 2048), RET_T (T list), RET_DTYPES (bf16,fp32), RET_PAR_T (T list for parallel), RET_REPEATS, STUDY_FRACTIONS
# ("0.5 0.25"; 1 = every document), STUDY_RETROFIT_FRACTION (0.5; none: no retro-fit study), STUDY_STEPS (2000),
# STUDY_FIT_STEPS (1000), STUDY_SEEDS ("1 2 3"),
# STUDY_CONFIG (examples/configs/demo-retrieval.json; demo-retrieval-wide.json is a 37.7M-parameter variant),
# STUDY_OPTIONS (more retro-train options for every run, e.g. "--retrieval-lr-scale 0.3 --oracle-neighbours 0.3"),
# STUDY_RECIPES (the from-scratch study's RETRO recipes against one set of twins, ';'-separated: scratch-study.sh RECIPES).
set -uo pipefail

DEFAULT_STEPS=(env tests embed sanitize knn)

# Settings from the environment; `default_list` (0/1) picks the smaller sizes and the budget of the default run.
configure() {
    local default_list=$1
    OUT=${OUT:-$PWD/out-gpu}
    KIT=${KIT:-/tmp/devkit}
    STEP_TIMEOUT=${STEP_TIMEOUT:-300}   # seconds per command, so one slow step cannot eat the whole call
    CUDA_TESTS=${CUDA_TESTS:-'*CUDA*,ops: every backend and dtype*,generate: retro-generate end to end*'}   # doctest filters ignore case
    SANITIZE_TESTS=${SANITIZE_TESTS:-'ops: every backend and dtype*,knn: CUDA exact search*,backend model: on a CUDA*,*sample_rows draws*,*fused decode step gives*'}
    RACECHECK_TESTS=${RACECHECK_TESTS:-'ops: every backend and dtype*,*sample_rows draws*,*fused decode step gives*'}
    UNFUSED_TESTS=${UNFUSED_TESTS:-'backend model: on a CUDA*,train device: on a CUDA*,generate: the backend decoder on a CUDA*,*RETRO_UNFUSE=all*'}
    TRAIN_CONFIG=${TRAIN_CONFIG:-examples/configs/retro-172m.json}
    TRAIN_BATCH=${TRAIN_BATCH:-8}
    TRAIN_SEQ=${TRAIN_SEQ:-1024}
    RET_T=${RET_T:-1024,2048,4096,8192,16384}
    RET_PAR_T=${RET_PAR_T:-1024,2048,4096}
    RET_DTYPES=${RET_DTYPES:-bf16,fp32}
    RET_REPEATS=${RET_REPEATS:-5}
    if ((default_list)); then
        GPU_CHECKS_BUDGET=${GPU_CHECKS_BUDGET:-540}
        EMBED_CHUNKS=${EMBED_CHUNKS:-1024} EMBED_REPEATS=${EMBED_REPEATS:-3}
        KNN_N=${KNN_N:-262144} KNN_QUERIES=${KNN_QUERIES:-2048}
    else
        GPU_CHECKS_BUDGET=${GPU_CHECKS_BUDGET:-0}
        EMBED_CHUNKS=${EMBED_CHUNKS:-4096} EMBED_REPEATS=${EMBED_REPEATS:-5}
        KNN_N=${KNN_N:-} KNN_QUERIES=${KNN_QUERIES:-}
    fi
    local cublas=(/usr/local/cuda/lib64/libcublas.so.*)
    if [[ -e ${cublas[0]} ]]; then cublas_dir=$(dirname "${cublas[0]}"); else cublas_dir=/usr/local/cuda/lib64; fi
    # libnccl.so.2 for --reduce nccl (opened with dlopen): the machine has it only inside PyTorch's nvidia-nccl wheel
    local nccl=(/opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2)
    nccl_dir=
    for f in "${nccl[@]}"; do [[ -e $f ]] && { nccl_dir=$(dirname "$f"); break; }; done
    CURVE_DATA=${CURVE_DATA:-.devkit/curve}
    CURVE_STEPS=${CURVE_STEPS:-100}
}

# Seconds the next command may run: STEP_TIMEOUT, or what is left of the budget when that is less (at least 1).
time_left() {
    local t=$STEP_TIMEOUT
    if ((GPU_CHECKS_BUDGET > 0)); then
        local rest=$((GPU_CHECKS_BUDGET - SECONDS))
        ((rest < t)) && t=$rest
        ((t < 1)) && t=1
    fi
    echo "$t"
}
limited() { timeout --kill-after=10 "$(time_left)" "$@"; }
# a devkit binary, with the devkit's libraries
rk() { LD_LIBRARY_PATH="$KIT/lib:$cublas_dir${nccl_dir:+:$nccl_dir}" limited "$@"; }

# The running step's status: the first non-zero exit status of its commands.
step_rc=0
track() {
    if ((step_rc == 0 && $1 != 0)); then step_rc=$1; fi
    return 0
}

step_env() {
    limited nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
    track $?
    head -2 /etc/os-release; nproc; ldd --version | head -1
    local libs
    libs=$(rk ldd "$KIT/bin/retro_tests")
    track $?
    grep -E "not found|cublas|cudart" <<<"$libs"
    if grep -q "not found" <<<"$libs"; then
        echo "retro_tests misses a library"
        track 1
    fi
    # cuBLAS is opened on first use (kernels/cublas_lazy.cu), so ldd does not list it: load the sonames the library
    # asks for here, with the tools' LD_LIBRARY_PATH, and print the files found (a miss fails this step, not the tests)
    local so
    for so in $(grep -ao 'libcublas\(Lt\)\?\.so\.[0-9]*' "$KIT/lib/libretrokit.so" | sort -u); do
        if ! rk python3 - "$so" <<'PY'
import ctypes, sys
name = sys.argv[1]
ctypes.CDLL(name)
stem = name.split(".so")[0] + ".so"
print(name, "->", next((l.split()[-1] for l in open("/proc/self/maps") if "/" + stem in l), "?"))
PY
        then
            echo "$so cannot be loaded: the GPU's matrix products would fail"
            track 1
        fi
    done
}

step_tests() {
    # the CLI tests run the devkit's tools and read this checkout (tests/test_util.cpp: the paths compiled in are
    # the dev machine's build tree)
    export RETRO_TEST_BIN_DIR=$KIT/bin RETRO_TEST_SOURCE_DIR=$PWD
    rk "$KIT/bin/retro_tests" -tc="$CUDA_TESTS" 2>&1 | tee "$OUT/tests.log" |
        grep -E 'rms ratio|min cosine|ERROR|CHECK|values|test cases|skipped'
    track "${PIPESTATUS[0]}"
    if grep -q "skipped: no CUDA device" "$OUT/tests.log"; then   # a pass without the GPU is no pass here
        echo "the CUDA test cases saw no device"
        track 1
    fi
    if ((step_rc != 0)); then
        # to tell a fused op's fault from the rest without a rebuild: the whole-model tests again with every fused op
        # run as the ops it stands for (RETRO_UNFUSE=all, docs/gpu.md); the step's status stays the failure's
        RETRO_UNFUSE=all rk "$KIT/bin/retro_tests" -tc="$UNFUSED_TESTS" >"$OUT/tests_unfused.log" 2>&1
        echo "with RETRO_UNFUSE=all the model tests exit $? ($(grep -E '^\[doctest\] test cases' "$OUT/tests_unfused.log"))"
    fi
}

step_sanitize() {
    rk compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 "$KIT/bin/retro_tests" -tc="$SANITIZE_TESTS" 2>&1 |
        tee "$OUT/sanitize.log" | tail -30
    track "${PIPESTATUS[0]}"
}

step_racecheck() {
    rk compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 "$KIT/bin/retro_tests" -tc="$RACECHECK_TESTS" 2>&1 |
        tee "$OUT/racecheck.log" | tail -30
    track "${PIPESTATUS[0]}"
}

# synccheck: barriers misused (a __syncthreads or bar.sync that not every thread it names reaches, divergent named
# barriers): the op harness's CUDA cases with the default kernels, then with the 16-warp retention walk (named
# barriers, one per row strip) — what the host emulator checks by its own model of the barriers
step_synccheck() {
    rk compute-sanitizer --tool synccheck --error-exitcode 99 --print-limit 20 "$KIT/bin/retro_tests" -tc="$RACECHECK_TESTS" 2>&1 |
        tee "$OUT/synccheck.log" | tail -30
    track "${PIPESTATUS[0]}"
    RETRO_RETENTION_KERNELS=mma16 rk compute-sanitizer --tool synccheck --error-exitcode 99 --print-limit 20 \
        "$KIT/bin/retro_tests" -tc='ops: every backend and dtype*' >"$OUT/synccheck_mma16.log" 2>&1
    track $?
    tail -3 "$OUT/synccheck_mma16.log" | sed "s/^/mma16 synccheck: /"
}

step_retention() {
    rk "$KIT/bin/retro-bench" retention --device cuda --modes chunkwise,recurrent --T "$RET_T" --dtype "$RET_DTYPES" \
        --repeats "$RET_REPEATS" --json "$OUT/rk_retention.json" 2>&1 | tee "$OUT/rk_retention.log"
    track "${PIPESTATUS[0]}"
    rk "$KIT/bin/retro-bench" retention --device cuda --modes parallel --T "$RET_PAR_T" --dtype "$RET_DTYPES" \
        --repeats 3 --json "$OUT/rk_retention_parallel.json" 2>&1 | tee "$OUT/rk_retention_parallel.log"
    track "${PIPESTATUS[0]}"
}

step_fla() {
    limited python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
    track $?
    # Triton configs pinned from tests/peers/fla_configs.json when it exists (else fla tunes: minutes); the configs
    # this run used go to $OUT/fla_configs.json: commit that as tests/peers/fla_configs.json (docs/gpu.md)
    PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 limited python3 tests/peers/fla_retention.py --modes chunkwise,parallel,recurrent \
        --T "$RET_T" --dtype "$RET_DTYPES" --pin-configs tests/peers/fla_configs.json --record-configs "$OUT/fla_configs.json" \
        --json "$OUT/fla_retention.json" 2>&1 | grep -v '^ ' | tail -40 | tee "$OUT/fla.log"
    track "${PIPESTATUS[0]}"
}

step_embed() {
    # a random BERT of all-MiniLM-L6-v2's shape (no network there for the real weights; speed does not depend
    # on the values); the peer runs with the machine's own libraries, not the devkit's
    limited python3 tests/peers/make_bert_shape.py --out /tmp/bert-minilm-shape >/dev/null
    track $?
    cat docs/*.md >/tmp/docs-text.txt
    printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec python3 "$@"\n' >/tmp/python-clean && chmod +x /tmp/python-clean
    rk "$KIT/bin/retro-bench" embed --device cuda --model /tmp/bert-minilm-shape --chunks "$EMBED_CHUNKS" --batch 256 \
        --repeats "$EMBED_REPEATS" --texts /tmp/docs-text.txt --peer tests/peers/hf_embed.py --python /tmp/python-clean \
        --json "$OUT/rk_embed_cuda.json" 2>&1 | tee "$OUT/rk_embed_cuda.log"
    track "${PIPESTATUS[0]}"
}

step_train() {
    # RETRO-pytorch and einops from .whl/ (docs/gpu.md); torch is the machine's own
    limited python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
    printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexport PYTHONPATH=/tmp/site\nexec python3 "$@"\n' >/tmp/python-clean && chmod +x /tmp/python-clean
    rk "$KIT/bin/retro-bench" train --device cuda --dtype fp32,bf16 --batch 8 --steps 5 --warmup 2 --peer --python /tmp/python-clean \
        --json "$OUT/rk_train_demo.json" 2>&1 | tee "$OUT/rk_train_demo.log"
    track "${PIPESTATUS[0]}"
    rk "$KIT/bin/retro-bench" train --device cuda --dtype fp32,bf16-unfused,bf16 --config "$TRAIN_CONFIG" --batch "$TRAIN_BATCH" --seq-len "$TRAIN_SEQ" \
        --steps 3 --warmup 1 --peer --python /tmp/python-clean --json "$OUT/rk_train_big.json" 2>&1 | tee "$OUT/rk_train_big.log"
    track "${PIPESTATUS[0]}"
}

step_generate() {
    limited python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
    printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexport PYTHONPATH=/tmp/site\nexec python3 "$@"\n' >/tmp/python-clean && chmod +x /tmp/python-clean
    rk "$KIT/bin/retro-bench" generate --device cuda --cuda-graphs --prompt 64,512 --output 128 --peer tests/peers/rp_generate.py \
        --python /tmp/python-clean --json "$OUT/rk_generate.json" 2>&1 | tee "$OUT/rk_generate.log"
    track "${PIPESTATUS[0]}"
    # batch decoding: GEN_BATCH sequences a step (no peer: RP's loop decodes one)
    rk "$KIT/bin/retro-bench" generate --device cuda --prompt 512 --output 128 --batch "${GEN_BATCH:-8}" --peer-steps 0 \
        --json "$OUT/rk_generate_batch.json" 2>&1 | tee "$OUT/rk_generate_batch.log"
    track "${PIPESTATUS[0]}"
}

step_profile() {
    # where a training step's and a decoded token's time goes, op by op (retro-bench --profile), no peers
    rk "$KIT/bin/retro-bench" train --device cuda --dtype bf16,bf16-unfused --config "$TRAIN_CONFIG" --batch "$TRAIN_BATCH" \
        --seq-len "$TRAIN_SEQ" --steps 3 --warmup 1 --profile 2 --json "$OUT/rk_train_profile.json" 2>&1 |
        tee "$OUT/rk_train_profile.log"
    track "${PIPESTATUS[0]}"
    rk "$KIT/bin/retro-bench" generate --device cuda --prompt 512 --output 128 --peer-steps 0 --profile 64 \
        --json "$OUT/rk_generate_profile.json" 2>&1 | tee "$OUT/rk_generate_profile.log"
    track "${PIPESTATUS[0]}"
}

step_kernels() {
    # where a decoded token's GPU time goes without the profile's synchronizes: ncu times each kernel of eager decode
    # steps at prompt 512 alone (gpu__time_duration; launches NCU_SKIP .. NCU_SKIP + NCU_COUNT: past the prefill)
    rk ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu_decode.csv" \
        --launch-skip "${NCU_SKIP:-2000}" --launch-count "${NCU_COUNT:-400}" \
        "$KIT/bin/retro-bench" generate --device cuda --prompt 512 --output 64 --peer-steps 0 >"$OUT/ncu_decode.log" 2>&1
    track $?
    python3 scripts/ncu-kernel-table.py "$OUT/ncu_decode.csv" --per embedding_forward_k | tee "$OUT/ncu_decode.txt"
    track "${PIPESTATUS[0]}"
}

step_flash() {
    # the fused attention's kernel sets in one build (kernels/nn_flash_attention_cuda.cu: RETRO_FLASH_KERNELS=mma, the
    # default, over bf16 copies of the operands where there is no null column or mask, with dQ, dK and dV in one
    # block where Nq <= 64 (CCA), tiles in two stages; mma-1stage, one stage (the next step's tiles not loaded during
    # this one's products); mma-2kernel, the two backward kernels where Nq <= 64 (RETRO_UNFUSE=
    # flash_backward_one_block); mma-classes, the backward classifying every entry of every step (RETRO_UNFUSE=
    # flash_fast_steps: session 27's branch-free steps set aside); mma-fp32, the kernels reading the fp32 operands;
    # wmma, the older ones): FLASH_KINDS (mma mma-1stage mma-2kernel mma-classes mma-fp32), their op-harness case
    # (CUDA vs CPU in double), then each timed alternately FLASH_RUNS
    # (2) times, the op alone (retro-bench ops: the 172M decoder's 8 x 1024 x 8 x 64 causal attention, its CCA and its
    # encoder's masked self-attention, forward + backward) and a bf16 training step of TRAIN_CONFIG; rows labelled in
    # $OUT/flash.txt
    local i kind fk unf
    local kinds=${FLASH_KINDS:-mma mma-1stage mma-2kernel mma-classes mma-fp32}
    flash_kind() {   # RETRO_FLASH_KERNELS and RETRO_UNFUSE of a kind
        fk=$1 unf=
        if [[ $1 == mma-2kernel ]]; then fk=mma unf=flash_backward_one_block; fi
        if [[ $1 == mma-classes ]]; then fk=mma unf=flash_fast_steps; fi
    }
    for kind in $kinds; do
        flash_kind "$kind"
        RETRO_FLASH_KERNELS=$fk RETRO_UNFUSE=$unf rk "$KIT/bin/retro_tests" -tc='ops: every backend and dtype*' >"$OUT/flash_tests_$kind.log" 2>&1
        track $?
        tail -3 "$OUT/flash_tests_$kind.log" | sed "s/^/$kind tests: /" | tee -a "$OUT/flash.txt"
    done
    for ((i = 1; i <= ${FLASH_RUNS:-2}; i++)); do
        for kind in $kinds; do
            flash_kind "$kind"
            RETRO_FLASH_KERNELS=$fk RETRO_UNFUSE=$unf rk "$KIT/bin/retro-bench" ops --device cuda --ops nn.flash_attention,nn.flash_cca,nn.flash_encoder \
                --json "$OUT/flash_ops_${kind}_$i.json" >"$OUT/flash_ops_${kind}_$i.log" 2>&1
            track $?
            grep -E 'flash' "$OUT/flash_ops_${kind}_$i.log" | sed "s/^/$kind $i ops: /" | tee -a "$OUT/flash.txt"
            RETRO_FLASH_KERNELS=$fk RETRO_UNFUSE=$unf rk "$KIT/bin/retro-bench" train --device cuda --dtype bf16 --config "$TRAIN_CONFIG" \
                --batch "$TRAIN_BATCH" --seq-len "$TRAIN_SEQ" --steps 3 --warmup 1 \
                --json "$OUT/flash_train_${kind}_$i.json" >"$OUT/flash_train_${kind}_$i.log" 2>&1
            track $?
            grep -E 'retrokit' "$OUT/flash_train_${kind}_$i.log" | sed "s/^/$kind $i train: /" | tee -a "$OUT/flash.txt"
        done
    done
}

step_retwalk() {
    # chunkwise retention's tensor-core walks in one build (kernels/retention_chunkwise.cu, RETRO_RETENTION_KERNELS):
    # mma (the mma.sync walks as planned: 128 columns a block at K = V = 128, dk and dv in one dual walk, two copies
    # of the state where they fit: one barrier a chunk), mma-1copy (one copy: session 23's walks), mma-split (dk and
    # dv as two walks), mma64 (also 64 columns a block: two blocks a head), mma1 (one load stage: the sm_86/89 form),
    # mma16 (16 warps a block at <= 128 registers: the forward's and dq's walks; session 27) and wmma (the older walk).
    # The op harness with each of RETWALK_TEST_KINDS (CUDA vs CPU in double; the racecheck step runs it with the
    # default, RETWALK_RACECHECK=1 also with mma16), then retro-bench retention chunkwise bf16 at RETWALK_T
    # (4096,16384) with each of RETWALK_KINDS (session 23 measured mma-split, mma64 and wmma), alternating RETWALK_RUNS
    # (2) times; rows labelled in $OUT/retwalk.txt
    local i kind
    for kind in ${RETWALK_TEST_KINDS:-mma mma-1copy mma1 mma16}; do
        RETRO_RETENTION_KERNELS=$kind rk "$KIT/bin/retro_tests" -tc='ops: every backend and dtype*' >"$OUT/retwalk_tests_$kind.log" 2>&1
        track $?
        tail -3 "$OUT/retwalk_tests_$kind.log" | sed "s/^/$kind tests: /" | tee -a "$OUT/retwalk.txt"
    done
    if [ "${RETWALK_RACECHECK:-0}" = 1 ]; then   # the 16-warp walk's named barriers under racecheck
        RETRO_RETENTION_KERNELS=mma16 rk compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 "$KIT/bin/retro_tests" \
            -tc='ops: every backend and dtype*' >"$OUT/retwalk_racecheck_mma16.log" 2>&1
        track $?
        tail -3 "$OUT/retwalk_racecheck_mma16.log" | sed "s/^/mma16 racecheck: /" | tee -a "$OUT/retwalk.txt"
    fi
    for ((i = 1; i <= ${RETWALK_RUNS:-2}; i++)); do
        for kind in ${RETWALK_KINDS:-mma mma-1copy mma16}; do
            RETRO_RETENTION_KERNELS=$kind rk "$KIT/bin/retro-bench" retention --device cuda --modes chunkwise \
                --T "${RETWALK_T:-4096,16384}" --dtype bf16 --repeats 3 --json "$OUT/retwalk_${kind}_$i.json" \
                >"$OUT/retwalk_${kind}_$i.log" 2>&1
            track $?
            grep -E '^ *chunkwise' "$OUT/retwalk_${kind}_$i.log" | sed "s/^/$kind $i: /" | tee -a "$OUT/retwalk.txt"
        done
    done
}

step_pdl() {
    # the decode kernels as programmatic dependent launches (sm_90+, the default) against ordinary launches
    # (RETRO_PDL=0), one build: the generate tests with each, then retro-bench generate with graphs at prompt 512
    # alternating PDL_RUNS (2) times; rows labelled in $OUT/pdl.txt
    local i kind
    for kind in 1 0; do
        RETRO_PDL=$kind rk "$KIT/bin/retro_tests" -tc='generate: the backend decoder on a CUDA device*,ops: every backend and dtype*' \
            >"$OUT/pdl_tests_$kind.log" 2>&1
        track $?
        tail -3 "$OUT/pdl_tests_$kind.log" | sed "s/^/pdl=$kind tests: /" | tee -a "$OUT/pdl.txt"
    done
    for ((i = 1; i <= ${PDL_RUNS:-2}; i++)); do
        for kind in 1 0; do
            RETRO_PDL=$kind rk "$KIT/bin/retro-bench" generate --device cuda --cuda-graphs --prompt 512 --output 128 \
                --peer-steps 0 --json "$OUT/pdl_${kind}_$i.json" >"$OUT/pdl_${kind}_$i.log" 2>&1
            track $?
            grep -E '^ *prompt |^ +[0-9]+ +[0-9]+ ' "$OUT/pdl_${kind}_$i.log" | sed "s/^/pdl=$kind $i: /" | tee -a "$OUT/pdl.txt"
        done
    done
}

# Why a retro-bench generate run's fused column does not count as a pass ("" where it does): a row whose fused steps
# sampled other tokens, failed (fused_error; the log's "the fused decode step failed"), ran none fused (fused_steps 0:
# every step fell back to a graph), or no fused column at all (its warm-up failed). $1: the JSON, $2: the log.
fused_shortfall() {
    local json=$1 log=$2
    if [[ ! -s $json ]]; then echo "no JSON written"; return; fi
    if grep -q '"fused_same_tokens": *false' "$json"; then echo "the fused step sampled other tokens"; return; fi
    if grep -q '"fused_error": *true' "$json" || grep -q 'the fused decode step failed' "$log" 2>/dev/null; then
        echo "the fused step failed: $(grep -m1 'the fused decode step failed' "$log" 2>/dev/null)"; return
    fi
    if grep -Eq '"fused_steps": *0([^0-9.]|$)' "$json"; then echo "no step ran fused (each fell back to a graph)"; return; fi
    if ! grep -q '"fused_decode_ms_per_token"' "$json"; then echo "no fused column (its warm-up failed)"; fi
}

step_fused() {
    # the fused decode step (kernels/nn_decode_program_cuda.cu, session 50: one cooperative kernel a token): its test
    # (the captured graphs' bits) plain and under memcheck, then retro-bench generate (its graph and fused columns side
    # by side, and whether the fused steps sampled the same tokens) with RETRO_DECODE_BLOCKS_PER_SM in FUSED_BLOCKS
    # (2 1) and RETRO_DECODE_PREFETCH_MB in FUSED_PREFETCH_MB (16 0) on the demo config at prompts 64 and 512, and the
    # 172M config at 512 (weights 5x the demo's: launch costs weigh less); rows in $OUT/fused.txt
    local b blocks=${FUSED_BLOCKS:-2 1}
    rk "$KIT/bin/retro_tests" -tc='*fused decode step*' -s >"$OUT/fused_tests.log" 2>&1
    track $?
    grep -E 'fused decode steps|test cases|ERROR|skipped' "$OUT/fused_tests.log" | sed 's/^/fused tests: /' | tee -a "$OUT/fused.txt"
    if grep -q "skipped: no CUDA device" "$OUT/fused_tests.log"; then   # a pass without the GPU is no pass here
        echo "the fused test saw no device"
        track 1
    fi
    rk compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 "$KIT/bin/retro_tests" \
        -tc='*fused decode step gives*' >"$OUT/fused_memcheck.log" 2>&1
    track $?
    tail -3 "$OUT/fused_memcheck.log" | sed 's/^/fused memcheck: /' | tee -a "$OUT/fused.txt"
    local mb short
    for b in $blocks; do
        for mb in ${FUSED_PREFETCH_MB:-16 0}; do
            RETRO_DECODE_BLOCKS_PER_SM=$b RETRO_DECODE_PREFETCH_MB=$mb rk "$KIT/bin/retro-bench" generate --device cuda \
                --cuda-graphs --prompt 64,512 --output 128 --peer-steps 0 --json "$OUT/fused_demo_${b}_$mb.json" \
                >"$OUT/fused_demo_${b}_$mb.log" 2>&1
            track $?
            grep -E '^ *prompt |^ +[0-9]+ +[0-9]+ |warning|error' "$OUT/fused_demo_${b}_$mb.log" |
                sed "s/^/demo blocks=$b prefetch=${mb}MB: /" | tee -a "$OUT/fused.txt"
            short=$(fused_shortfall "$OUT/fused_demo_${b}_$mb.json" "$OUT/fused_demo_${b}_$mb.log")
            if [[ -n $short ]]; then   # (the bench itself only warns, and exits 0)
                echo "demo blocks=$b prefetch=${mb}MB: $short" | tee -a "$OUT/fused.txt"
                track 1
            fi
        done
    done
    RETRO_DECODE_BLOCKS_PER_SM=${blocks%% *} rk "$KIT/bin/retro-bench" generate --device cuda --cuda-graphs \
        --config examples/configs/retro-172m.json --prompt 512 --output 128 --peer-steps 0 \
        --json "$OUT/fused_172m.json" >"$OUT/fused_172m.log" 2>&1
    track $?
    grep -E '^ *prompt |^ +[0-9]+ +[0-9]+ |memory bound|warning|error' "$OUT/fused_172m.log" | sed 's/^/172m: /' | tee -a "$OUT/fused.txt"
    short=$(fused_shortfall "$OUT/fused_172m.json" "$OUT/fused_172m.log")
    if [[ -n $short ]]; then
        echo "172m: $short" | tee -a "$OUT/fused.txt"
        track 1
    fi
}

step_ab() {
    # the previous build against this one in one call (lent machines of one kind differ ~20 % in host speed, so decode
    # figures compare only side by side): retro-bench generate with graphs (AB_ARGS), the previous build
    # (.devkit/devkit-prev.tar.gz: its bin/retro-bench and lib/libretrokit.so, kept by scripts/devkit-stage.sh
    # --keep-prev) and this devkit alternating AB_RUNS times; each run's table rows, labelled, in $OUT/ab.txt
    local prev=${AB_PREV_KIT:-/tmp/devkit-prev} i k dir
    if [[ ! -d $prev ]]; then
        if [[ ! -f .devkit/devkit-prev.tar.gz ]] || ! { mkdir -p "$prev" && tar -C "$prev" -xzf .devkit/devkit-prev.tar.gz; }; then
            rm -rf "$prev"
            echo "no .devkit/devkit-prev.tar.gz: stage with scripts/devkit-stage.sh --keep-prev and carry it"
            track 2
            return
        fi
    fi
    for ((i = 1; i <= ${AB_RUNS:-2}; i++)); do
        for k in prev new; do
            dir=$KIT
            [[ $k == prev ]] && dir=$prev
            # shellcheck disable=SC2086 # AB_ARGS is a list of options
            LD_LIBRARY_PATH="$dir/lib:$KIT/lib:$cublas_dir" limited "$dir/bin/retro-bench" generate --device cuda \
                --cuda-graphs ${AB_ARGS:---prompt 64,512 --output 128} --peer-steps 0 >"$OUT/ab_${k}_$i.log" 2>&1
            track $?
            grep -E '^ *prompt |^ +[0-9]+ +[0-9]+ |other tokens' "$OUT/ab_${k}_$i.log" | sed "s/^/$k $i: /" | tee -a "$OUT/ab.txt"
        done
    done
}

# The demo's db8/knn8 in CURVE_DATA (made here with examples/demo.sh's commands, carried); fails the step without.
have_curve_data() {
    [[ -d $CURVE_DATA/db8 && -d $CURVE_DATA/knn8 ]] && return 0
    echo "no $CURVE_DATA/db8 or knn8: make the demo's db8 and knn8 here and carry them"
    track 2
    return 1
}

step_curve() {
    # retro-train --device cuda on the demo's 8-token-chunk data (CURVE_DATA: tok/, db8/, knn8/ made here with
    # examples/demo.sh's commands and carried), fp32 and bf16, CURVE_STEPS steps each; the CPU curve is made here
    have_curve_data || return
    local dtype
    for dtype in fp32 bf16-unfused bf16; do   # bf16: with the fused self-attention kernels (retro-train's default)
        rk "$KIT/bin/retro-train" --db "$CURVE_DATA/db8" --knn "$CURVE_DATA/knn8" --config examples/configs/demo-retrieval.json \
            --warmup 20 --lr 2e-3 --steps "$CURVE_STEPS" --val-every "$CURVE_STEPS" --device cuda --dtype "${dtype%-unfused}" \
            $([[ $dtype == *-unfused ]] && echo --no-fused-attention) --out "/tmp/curve-$dtype" --force 2>&1 | tail -3
        track "${PIPESTATUS[0]}"
        cp "/tmp/curve-$dtype/metrics.jsonl" "$OUT/curve_$dtype.jsonl" 2>/dev/null
    done
}

step_retrofit() {
    # examples/retrofit-study.sh on the GPU (issue 17): retro-fit vs its continued twin at equal steps, seeds
    # RETROFIT_SEEDS, on the demo's db8/knn8 carried in CURVE_DATA; the eval runs on the CPU cores there
    have_curve_data || return
    # a fresh folder: the study skips runs whose model exists, which must not carry over between TRAIN_OPTIONS
    local dir=/tmp/retrofit
    rm -rf "$dir"
    LD_LIBRARY_PATH="$KIT/lib:$cublas_dir" DEVICE=${RETROFIT_DEVICE:-cuda} THREADS=0 limited examples/retrofit-study.sh "$KIT/bin" \
        "$CURVE_DATA" "$dir" "${RETROFIT_SEEDS:-1 2 3}" 2>&1 | tee "$OUT/retrofit.log"
    track "${PIPESTATUS[0]}"
    cp "$dir/summary.tsv" "$OUT/retrofit_summary.tsv" 2>/dev/null
    tar -C "$dir" -czf "$OUT/retrofit_evals.tgz" --wildcards 'eval-*' 2>/dev/null
}

step_studies() {
    # issue 17's equal-compute studies side by side on the GPU (docs/retrieval.md section 9): examples/scratch-study.sh
    # at each --train-docs-fraction in STUDY_FRACTIONS and examples/retrofit-study.sh at STUDY_RETROFIT_FRACTION, each
    # with its seeds (STUDY_SEEDS) running at once; STUDY_STEPS steps from scratch (the retro-fit's base too, then
    # STUDY_FIT_STEPS more). The evals run on the CPU cores there, 2 threads each. Logs and eval JSON: $OUT/studies.tgz
    have_curve_data || return
    local root=/tmp/studies f pids=() names=() i rc
    rm -rf "$root"
    mkdir -p "$root"
    local env=(LD_LIBRARY_PATH="$KIT/lib:$cublas_dir" DEVICE="${STUDY_DEVICE:-cuda}" THREADS=2 JOBS=3
        EVAL_BATCHES="${STUDY_EVAL_BATCHES:-0}" CONFIG="${STUDY_CONFIG:-examples/configs/demo-retrieval.json}"
        RECIPES="${STUDY_RECIPES:-}")
    for f in ${STUDY_FRACTIONS:-0.5 0.25}; do
        limited env "${env[@]}" STEPS="${STUDY_STEPS:-2000}" TRAIN_OPTIONS="--train-docs-fraction $f ${STUDY_OPTIONS:-}" \
            examples/scratch-study.sh "$KIT/bin" "$CURVE_DATA" "$root/scratch-f$f" "${STUDY_SEEDS:-1 2 3}" \
            >"$root/scratch-f$f.log" 2>&1 &
        pids+=($!) names+=("scratch-f$f")
    done
    f=${STUDY_RETROFIT_FRACTION:-0.5}
    if [[ $f != none ]]; then
        limited env "${env[@]}" BASE_STEPS="${STUDY_STEPS:-2000}" FIT_STEPS="${STUDY_FIT_STEPS:-1000}" \
            TRAIN_OPTIONS="--train-docs-fraction $f ${STUDY_OPTIONS:-}" \
            examples/retrofit-study.sh "$KIT/bin" "$CURVE_DATA" "$root/retrofit-f$f" "${STUDY_SEEDS:-1 2 3}" \
            >"$root/retrofit-f$f.log" 2>&1 &
        pids+=($!) names+=("retrofit-f$f")
    fi
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"
        rc=$?
        track "$rc"
        echo "--- ${names[$i]} (rc $rc)"
        cat "$root/${names[$i]}.log"
    done
    # the logs, summaries and eval reports (not the weights), also when a study was cut short
    (cd "$root" && find . -name '*.log' -o -name '*.tsv' -o -name 'eval-*' -o -name metrics.jsonl |
        tar -czf "$OUT/studies.tgz" -T -)
}

step_knn() {
    local size=()
    [[ -n $KNN_N ]] && size+=(--n "$KNN_N")
    [[ -n $KNN_QUERIES ]] && size+=(--queries "$KNN_QUERIES")
    rk "$KIT/bin/retro-bench" knn --cuda --thread-counts "$(nproc)" --ivf-nlist 0 "${size[@]}" --json "$OUT/rk_knn.json" 2>&1 |
        tee "$OUT/rk_knn.log"
    track "${PIPESTATUS[0]}"
}

# "(rc N)", with what 124 / 137 mean
describe_rc() {
    case $1 in
    124 | 137) echo "(rc $1, timeout)" ;;
    *) echo "(rc $1)" ;;
    esac
}

main() {
    local steps=("$@") default_list=0
    if ((${#steps[@]} == 0)); then steps=("${DEFAULT_STEPS[@]}") default_list=1; fi
    local s
    for s in "${steps[@]}"; do
        if ! declare -F "step_$s" >/dev/null; then
            echo "unknown step $s (steps: env tests sanitize racecheck synccheck retwalk retention fla knn embed train generate curve profile kernels pdl fused ab retrofit studies)" >&2
            exit 2
        fi
    done
    configure "$default_list"
    mkdir -p "$OUT"
    if [[ ! -d $KIT ]]; then
        if ! { mkdir -p "$KIT" && tar -C "$KIT" -xzf .devkit/devkit.tar.gz; }; then
            rm -rf "$KIT"
            echo "no .devkit/devkit.tar.gz: run scripts/devkit-stage.sh and carry .devkit" >&2
            echo "gpu-checks: FAIL setup (no devkit)" | tee "$OUT/summary.txt"
            exit 2
        fi
    fi
    local passed=() failed=()
    for s in "${steps[@]}"; do
        echo
        echo "=== $s ($(date -u +%H:%M:%S))"
        if ((GPU_CHECKS_BUDGET > 0 && SECONDS >= GPU_CHECKS_BUDGET)); then
            echo "not run: the budget of $GPU_CHECKS_BUDGET s is spent"
            failed+=("$s (not run: out of time)")
            continue
        fi
        step_rc=0
        "step_$s"
        if ((step_rc == 0)); then passed+=("$s"); else failed+=("$s $(describe_rc "$step_rc")"); fi
    done
    local summary="gpu-checks:"
    ((${#passed[@]})) && summary+=" PASS ${passed[*]}"
    ((${#passed[@]} && ${#failed[@]})) && summary+=" |"
    ((${#failed[@]})) && summary+=" FAIL ${failed[*]}"
    echo
    echo "$summary" | tee "$OUT/summary.txt"
    pack_logs
    ((${#failed[@]} == 0))
}

# The device call brings back at most 8 files from $OUT: past 8, the logs and curves go into logs.tgz (the JSON and
# summary.txt stay loose), and if that is not enough, every file but summary.txt and the archives into results.tgz.
# Session 14's `curve train profile` left 12 files and lost 4, the profile among them.
pack_logs() {
    pack_into logs.tgz '*.log' '*.jsonl' '*.txt'
    pack_into results.tgz '*'
    local left
    left=$(find "$OUT" -maxdepth 1 -type f | wc -l)
    ((left > 8)) && echo "warning: $left files in $OUT, and a device call brings back 8"
    return 0
}

# pack_into ARCHIVE PATTERN...: when $OUT holds more than 8 files, the ones matching a PATTERN (never summary.txt or
# a .tgz) go into $OUT/ARCHIVE
pack_into() {
    local archive=$1 files f pattern picked=()
    shift
    mapfile -t files < <(cd "$OUT" && find . -maxdepth 1 -type f -printf '%P\n' | sort)
    ((${#files[@]} <= 8)) && return 0
    for f in "${files[@]}"; do
        [[ $f == summary.txt || $f == *.tgz ]] && continue
        for pattern in "$@"; do
            # shellcheck disable=SC2053 # the pattern is a glob
            if [[ $f == $pattern ]]; then picked+=("./$f"); break; fi
        done
    done
    ((${#picked[@]})) || return 0
    if tar -C "$OUT" -czf "$OUT/$archive" "${picked[@]}"; then
        (cd "$OUT" && rm -f -- "${picked[@]}")
        echo "packed ${#picked[@]} files into $OUT/$archive (a device call brings back 8)"
    fi
}

# run when executed; when sourced (a dry run of the control flow with steps of one's own), only define
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
