#!/usr/bin/env bash
# Packs a CUDA build made on this machine for a lent GPU machine (which has the CUDA toolkit but no
# Debian packages and no network): the tools, the test binary, libretrokit.so and every shared
# library they load that is not glibc's or CUDA's own, into .devkit/devkit.tar.gz (git-ignored).
# scripts/device-gpu-checks.sh unpacks it there. docs/gpu.md says how the two are used.
# Usage: scripts/devkit-stage.sh [BUILD_DIR]   (default build-cuda, configured with -DRETRO_CUDA=ON)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
[[ -f $build/libretrokit.so && -x $build/retro_tests ]] || { echo "devkit-stage: $build has no CUDA build (cmake -S . -B $build -DRETRO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build $build)" >&2; exit 2; }
grep -q 'RETRO_HAVE_CUDA' "$build/CMakeFiles/retrokit.dir/flags.make" || { echo "devkit-stage: $build was built without CUDA" >&2; exit 2; }
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
tar -C "$stage" -czf .devkit/devkit.tar.gz bin lib
echo "devkit-stage: .devkit/devkit.tar.gz ($(du -h .devkit/devkit.tar.gz | cut -f1)): $(ls "$stage/lib" | tr '\n' ' ')"
