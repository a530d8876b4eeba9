#!/usr/bin/env bash
# Installs the Debian 12 packages trainctl builds, tests and runs with.
# Idempotent: packages already present are skipped, so a second call costs one dpkg query.
# Usage: scripts/install-deps.sh [--build | --bench]   (--build: only what the build needs, which the
# test command installs first, to build while the rest installs; --bench adds what the benchmarks
# need beyond the tests, patchelf for scripts/gpu_check.sh --pack among them)
set -euo pipefail

# What meson setup looks for and the build compiles and links with.
packages=(
  meson ninja-build pkg-config g++
  openmpi-bin libopenmpi-dev
  libhdf5-dev
  libcli11-dev libtomlplusplus-dev libfmt-dev doctest-dev nlohmann-json3-dev
  libpcre2-dev  # GPT-2's tokenizer: its pre-tokenizer regex, with Unicode properties and JIT
  libopenblas-dev
  libcairo2-dev  # trainctl plot draws its charts with cairo
  help2man  # the build generates trainctl(1) with help2man
  bash-completion  # the install puts the bash completion where its pkg-config file says
  python3
)
# What the tests and the programs run with.
[[ "${1:-}" == "--build" ]] || packages+=(
  hdf5-tools
  fonts-dejavu-core  # trainctl plot's charts are in DejaVu Sans (found by fontconfig)
  slurm-wlm munge
  procps  # pgrep: the cluster script and the tests watch daemons with it; minimal systems lack it
  curl  # trainctl notify posts [notify] webhooks with it
  python3-torch python3-h5py
  clang libclang-rt-14-dev  # libFuzzer and the sanitizers: scripts/fuzz.sh, the fuzz test
  prometheus  # promtool: the tests check the [metrics] prometheus textfile with it
  man-db  # a test renders trainctl(1) with man
  lmod  # the install's environment module, which tests load
)
# npm installs js-tiktoken, the GPT-2 tokenizer test's oracle; a Node.js from elsewhere that
# brings its own npm (and conflicts with Debian's npm package) serves as well.
[[ "${1:-}" == "--build" ]] || command -v npm >/dev/null || packages+=(nodejs npm)
# time: /usr/bin/time measures the benchmarks' peak memory; patchelf sets the GPU pack's rpath.
[[ "${1:-}" == "--bench" ]] && packages+=(bc patchelf time)

missing=()
for p in "${packages[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
  exit 0
fi

sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
source "$(dirname "$0")/progress.sh"
# What apt and dpkg say goes to a log, shown when apt fails; the screen gets apt's own progress
# (its machine-readable status lines), condensed. Not with Dpkg::Use-Pty=0: beside Status-Fd=1
# it makes every maintainer script's output fail with EIO ("echo: I/O error"), and the packages
# whose scripts print (fontconfig, libgstreamer1.0-0) fail to configure.
apt_log=$(mktemp /tmp/install-deps.XXXXXX.log)
apt_get() {
  "${sudo_cmd[@]}" apt-get -q -o APT::Status-Fd=1 "$@" 2>&1 | tee -a "$apt_log" |
    progress_filter apt progress_apt ||
    { tail -n 40 "$apt_log" >&2; echo "install-deps: apt-get $1 failed (above; all of it in $apt_log)" >&2; exit 1; }
}
echo "install-deps: updating the package lists (apt-get update)"
apt_get update
count=$(apt-get -s install --no-install-recommends "${missing[@]}" | grep -c '^Inst ' || true)
echo "install-deps: installing $count packages: ${missing[*]} and what they need"
started=$SECONDS
apt_get install -y --no-install-recommends "${missing[@]}"
echo "install-deps: installed $count packages in $((SECONDS - started)) s"
rm -f "$apt_log"
# Only promtool is wanted from the prometheus package: where systemd runs, the server it just
# enabled and started (listening on :9090) is stopped and disabled again.
if [[ " ${missing[*]} " == *" prometheus "* ]] && [[ -d /run/systemd/system ]]; then
  "${sudo_cmd[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
