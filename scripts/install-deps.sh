#!/usr/bin/env bash
# Installs the Debian packages RetroKit needs, only those missing: quiet when all are present,
# 'apt-get update' only when something must be installed. Usage: install-deps.sh [build|demo]
# (demo adds the demo corpus and gnuplot). Reasons for each package: docs/dependencies.md.
set -euo pipefail

build_packages=(build-essential cmake pkg-config git
  libcli11-dev nlohmann-json3-dev doctest-dev libsentencepiece-dev libfaiss-dev libopenblas-dev
  libxxhash-dev libzstd-dev zlib1g-dev libsnappy-dev liblz4-dev libbrotli-dev libxapian-dev libopenmpi-dev openmpi-bin
  libjpeg62-turbo-dev libpng-dev libzip-dev libboost-context-dev ninja-build)
demo_packages=(python3.11-doc gnuplot-nox)

wanted=("${build_packages[@]}")
if [ "${1:-build}" = "demo" ]; then wanted+=("${demo_packages[@]}"); fi

missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing packages: ${missing[*]}; run as root or install sudo" >&2; exit 2
  fi
else SUDO=""; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
