#!/usr/bin/env bash
# Packs a CUDA build made on this machine for a lent GPU machine (which has the CUDA toolkit but no
# Debian packages and no network): the tools, the test binary, libretrokit.so and every shared
# library they load that is not glibc's or CUDA's own, into .devkit/devkit.tar.gz (git-ignored).
# scripts/device-gpu-checks.sh unpacks it there. docs/gpu.md says how the two are used.
# Usage: scripts/devkit-stage.sh [--keep-prev] [BUILD_DIR]   (default build-cuda, configured with -DRETRO_CUDA=ON)
#   --keep-prev: first keep the devkit staged before as .devkit/devkit-prev.tar.gz, its retro-bench and
#   libretrokit.so only (~5 MB: two whole devkits and the tree pass a device call's 64 MiB), for the `ab` step of
#   scripts/device-gpu-checks.sh (the previous build against this one in one call)
set -euo pipefail
cd "$(dirname "$0")/.."
keep_prev=0
if [[ ${1:-} == --keep-prev ]]; then keep_prev=1; shift; fi
build=${1:-build-cuda}
[[ -f $build/libretrokit.so && -x $build/retro_tests ]] || { echo "devkit-stage: $build has no CUDA build (cmake -S . -B $build -DRETRO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build $build)" >&2; exit 2; }
grep -q 'RETRO_HAVE_CUDA=1' "$build/compile_commands.json" || { echo "devkit-stage: $build was built without CUDA" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "$build"/bin/retro-* "$build/retro_tests" "$stage/bin/"
cp "$build/libretrokit.so" "$stage/lib/"
# glibc, the dynamic loader, the C++ runtime (newer there: Ubuntu 24.04) and CUDA's libraries come from the GPU
# machine itself, so a Python peer started under the devkit's LD_LIBRARY_PATH still finds what torch needs
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libretrokit)'
for f in "$stage"/bin/* "$stage/lib/libretrokit.so"; do
    ldd "$f" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    [[ $name =~ $skip ]] || cp -L "$path" "$stage/lib/$name"
done
mkdir -p .devkit
if ((keep_prev)); then
    [[ -f .devkit/devkit.tar.gz ]] || { echo "devkit-stage: --keep-prev: no .devkit/devkit.tar.gz staged before" >&2; exit 2; }
    prev=$(mktemp -d)
    trap 'rm -rf "$stage" "$prev"' EXIT
    tar -C "$prev" -xzf .devkit/devkit.tar.gz bin/retro-bench lib/libretrokit.so
    tar -C "$prev" -czf .devkit/devkit-prev.tar.gz bin lib
    echo "devkit-stage: kept the previous devkit's retro-bench as .devkit/devkit-prev.tar.gz ($(du -h .devkit/devkit-prev.tar.gz | cut -f1))"
fi
tar -C "$stage" -czf .devkit/devkit.tar.gz bin lib
echo "devkit-stage: .devkit/devkit.tar.gz ($(du -h .devkit/devkit.tar.gz | cut -f1)): $(ls "$stage/lib" | tr '\n' ' ')"
