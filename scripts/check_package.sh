#!/usr/bin/env bash
# Checks the Debian package end to end, as a site would use it: builds the .deb
# (dpkg-buildpackage -b -uc -us), makes a fresh Debian 12 (bookworm) root with mmdebstrap from
# this machine's apt sources, installs the .deb there with apt-get (which pulls in its Depends),
# and there runs `trainctl --version`, a 2-rank `trainctl run` of the installed MLP demo config
# on `trainctl data synth` data, and `trainctl ckpt verify` of the run; lintian errors fail it
# too. Prints each phase's time and "check_package: OK" at the end.
# Slow (a full build and a bootstrap over the network), so it is not part of the test command.
# Needs root (mmdebstrap, chroot, mounts) and a reachable Debian mirror.
# Usage: scripts/check_package.sh [--keep] [--deb FILE]
#   --keep      leave the chroot (its path is printed) instead of deleting it
#   --deb FILE  check this .deb instead of building one
set -euo pipefail

keep=0
deb=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) keep=1 ;;
    --deb) deb=$(realpath "$2"); shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "check_package: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

[[ $(id -u) -eq 0 ]] || { echo "check_package: needs root (mmdebstrap, chroot, mounts)" >&2; exit 2; }
source_dir=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/check_package.XXXXXX)
root="$work/root"
mounted=()

cleanup() {
  local status=$?
  # Unmounted in reverse order, /dev/shm before /dev: a mount left behind would keep the host's
  # /dev under the rm -rf below.
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -l "${mounted[i]}" 2>/dev/null || true
  done
  if [[ $keep -eq 1 ]]; then
    echo "check_package: kept the chroot in $root"
  else
    rm -rf --one-file-system "$work"
  fi
  exit "$status"
}
trap cleanup EXIT

started_all=$SECONDS
phase_started=$SECONDS
phase() {
  echo "check_package: === $1"
  phase_started=$SECONDS
}
phase_done() {
  echo "check_package: --- $1 took $((SECONDS - phase_started)) s"
}

missing=()
command -v dpkg-buildpackage >/dev/null || missing+=(dpkg-dev)
command -v dh >/dev/null || missing+=(debhelper)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v lintian >/dev/null || missing+=(lintian)
if [[ ${#missing[@]} -gt 0 ]]; then
  phase "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  phase_done "installing tools"
fi

if [[ -z "$deb" ]]; then
  phase "building the .deb (dpkg-buildpackage -b -uc -us)"
  version=$(dpkg-parsechangelog -l "$source_dir/debian/changelog" -S Version)
  arch=$(dpkg-architecture -q DEB_HOST_ARCH)
  parent=$(dirname "$source_dir")
  (cd "$source_dir" && nice dpkg-buildpackage -b -uc -us)
  deb="$work/trainctl_${version}_${arch}.deb"
  mv "$parent/trainctl_${version}_${arch}.deb" "$deb"
  # dpkg-buildpackage writes its results beside the source tree; only this build's own files are
  # removed, by their exact names, since that directory holds other people's work.
  rm -f "$parent/trainctl_${version}_${arch}.buildinfo" "$parent/trainctl_${version}_${arch}.changes" \
    "$parent/trainctl-dbgsym_${version}_${arch}.deb" "$parent/trainctl-dbgsym_${version}_${arch}.ddeb"
  (cd "$source_dir" && debian/rules clean >/dev/null)
  phase_done "build"
fi
echo "check_package: package $deb"
dpkg-deb -f "$deb" Package Version Depends Recommends

phase "lintian"
# Errors fail the check; warnings (no man page for the two helper programs) are printed only.
lintian --fail-on error "$deb"
phase_done "lintian"

phase "bootstrapping Debian 12 (bookworm) with mmdebstrap"
# The host's own sources (its mirror or snapshot, its keys), so that the chroot sees what this
# machine sees; disabled files (other suffixes) stay out.
sources=()
[[ -f /etc/apt/sources.list ]] && sources+=(/etc/apt/sources.list)
for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [[ -f "$f" ]] && sources+=("$f")
done
[[ ${#sources[@]} -gt 0 ]] || sources=(http://deb.debian.org/debian)
echo "check_package: apt sources ${sources[*]}"
mmdebstrap --variant=apt --include=ca-certificates bookworm "$root" "${sources[@]}"
phase_done "bootstrap"

# Open MPI needs /proc (its process and topology discovery), /sys (hwloc), /dev/shm (the shared
# memory transport between the two ranks) and /dev.
for m in proc sys dev dev/shm; do
  mount --bind "/$m" "$root/$m"
  mounted+=("$root/$m")
done

phase "installing the .deb in the chroot (apt-get install ./trainctl_*.deb)"
cp "$deb" "$root/tmp/"
chmod 644 "$root/tmp/$(basename "$deb")"
in_root() {
  # A clean environment: the host's (its PATH, TRAINCTL_* variables) must not leak in. mpirun
  # refuses root without the two OMPI_ALLOW variables, and the chroot has only root.
  chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    bash -euo pipefail -c "$1"
}
# mmdebstrap empties the package lists at its end, so apt must fetch them again to resolve the
# package's Depends.
in_root "apt-get update -q && cd /tmp && apt-get install -y --no-install-recommends ./$(basename "$deb")"
phase_done "install"

phase "trainctl --version"
in_root "trainctl --version"
phase_done "version"

phase "local 2-rank trainctl run of the MLP demo"
# The installed config names its data relative to itself (../demo-data/), so it is copied into a
# directory layout like the source's, beside the data that `trainctl data synth` writes.
in_root "mkdir -p /root/demo/configs && cd /root/demo &&
  cp /usr/share/trainctl/configs/mlp_demo.toml configs/ &&
  trainctl data synth -o demo-data/demo_train.h5 --val-out demo-data/demo_val.h5 --samples 16384 &&
  trainctl run configs/mlp_demo.toml --ranks 2 --run-dir runs/local"
phase_done "run"

phase "trainctl ckpt verify of the run"
in_root "cd /root/demo && ls runs/local/checkpoints && trainctl ckpt verify runs/local"
phase_done "verify"

echo "check_package: total $((SECONDS - started_all)) s"
echo "check_package: OK"
