#!/usr/bin/env bash
# Installs the Debian 12 packages trainctl builds, tests and runs with.
# Idempotent: packages already present are skipped, so a second call costs one dpkg query.
# Usage: scripts/install-deps.sh [--bench]   (--bench adds what the benchmarks need beyond the tests,
# patchelf for scripts/gpu_check.sh --pack among them)
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++
  openmpi-bin libopenmpi-dev
  libhdf5-dev hdf5-tools
  libcli11-dev libtomlplusplus-dev libfmt-dev doctest-dev nlohmann-json3-dev
  libpcre2-dev  # GPT-2's tokenizer: its pre-tokenizer regex, with Unicode properties and JIT
  libopenblas-dev
  libcairo2-dev fonts-dejavu-core  # trainctl plot: cairo draws the charts, in DejaVu Sans (found by fontconfig)
  slurm-wlm munge
  procps  # pgrep: the cluster script and the tests watch daemons with it; minimal systems lack it
  python3 python3-torch python3-h5py
  clang libclang-rt-14-dev  # libFuzzer and the sanitizers: scripts/fuzz.sh, the fuzz test
  prometheus  # promtool: the tests check the [metrics] prometheus textfile with it
)
# npm installs js-tiktoken, the GPT-2 tokenizer test's oracle; a Node.js from elsewhere that
# brings its own npm (and conflicts with Debian's npm package) serves as well.
command -v npm >/dev/null || packages+=(nodejs npm)
# time: /usr/bin/time measures the benchmarks' peak memory; patchelf sets the GPU pack's rpath.
[[ "${1:-}" == "--bench" ]] && packages+=(bc patchelf time)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Only promtool is wanted from the prometheus package: where systemd runs, the server it just
# enabled and started (listening on :9090) is stopped and disabled again.
if [[ " ${missing[*]} " == *" prometheus "* ]] && [[ -d /run/systemd/system ]]; then
  "${sudo_cmd[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
