#!/usr/bin/env bash
# Everything a session does here before its first call to a lent GPU machine (docs/gpu.md "The next GPU session: one
# runbook"), idempotent: the Debian packages (scripts/install-deps.sh), the CUDA build for Hopper in BUILD_DIR
# (configured once, then rebuilt incrementally), the devkit (scripts/devkit-stage.sh), the Python peers' wheels in
# .whl/ (fla for the retention peer, RETRO-pytorch for the training and decoding peers; the GPU machine has torch and
# triton but no network), and .devkit/ and .whl/ in .git/info/exclude (they travel as carried paths, not as files of
# the tree). Ends with the `run` carry list and the first call to make.
# Usage: scripts/gpu-session-prep.sh [--keep-prev] [BUILD_DIR]   (default build-cuda; --keep-prev: as devkit-stage.sh,
#        the devkit staged before kept for the `ab` step)
set -euo pipefail
cd "$(dirname "$0")/.."
keep=()
if [[ ${1:-} == --keep-prev ]]; then keep=(--keep-prev); shift; fi
build=${1:-build-cuda}
command -v nvcc >/dev/null || { echo "gpu-session-prep: no nvcc on PATH: the devkit needs a CUDA build" >&2; exit 2; }

bash scripts/install-deps.sh build
if [[ ! -f $build/CMakeCache.txt ]]; then
    generator=()   # Ninja where found, as `make build` (the Makefile says why)
    if command -v ninja >/dev/null; then generator=(-G Ninja); fi
    cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DRETRO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
fi
grep -Eq 'RETRO_CUDA:STRING=(ON|AUTO)' "$build/CMakeCache.txt" ||
    { echo "gpu-session-prep: $build is configured without CUDA (remove it or name another BUILD_DIR)" >&2; exit 2; }
echo "gpu-session-prep: building $build (about 20 minutes from scratch on 2 cores)"
cmake --build "$build" -j"$(nproc)" >/dev/null
scripts/devkit-stage.sh "${keep[@]}" "$build"

# the peers' wheels, pure Python (versions as the peers and docs/performance.md name them)
mkdir -p .whl
have() { compgen -G ".whl/$1" >/dev/null; }
have 'flash_linear_attention-0.5.2-*.whl' && have 'fla_core-0.5.2-*.whl' ||
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 -d .whl flash-linear-attention==0.5.2 fla-core==0.5.2
have 'retro_pytorch-0.3.9-*' || python3 -m pip download -q --no-deps -d .whl retro-pytorch==0.3.9

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
for p in .devkit/ .whl/; do grep -qxF "$p" "$exclude" 2>/dev/null || echo "$p" >>"$exclude"; done

echo "gpu-session-prep: ready at $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (uncommitted changes in the build)');" \
    ".devkit: $(ls .devkit | tr '\n' ' ')| .whl: $(ls .whl | tr '\n' ' ')"
# (the runbook's first call, as docs/gpu.md "The next GPU session" names it: keep the two in step)
echo "gpu-session-prep: carry [\".devkit\", \".whl\"]; first call (docs/gpu.md runbook):" \
    "STEP_TIMEOUT=200 GPU_CHECKS_BUDGET=540 scripts/device-gpu-checks.sh env tests fused sanitize"
