#!/usr/bin/env bash
# Configures (once) and builds trainctl into build/. nvcc is looked for in /usr/local/cuda/bin
# as well, where the CUDA Toolkit puts it; without it the CPU-only build is complete. ninja's
# progress is condensed (scripts/progress.sh): compiler warnings and errors show as they come.
# Usage: scripts/build.sh [meson setup options...] [-- ninja targets...]   (no targets: all)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/progress.sh
export PATH="$PATH:/usr/local/cuda/bin"
options=() targets=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do options+=("$1"); shift; done
[ $# -eq 0 ] || { shift; targets=("$@"); }
if [ ! -f build/build.ninja ]; then
  echo "build: configuring build/ (meson setup)"
  meson setup build "${options[@]}"
elif [ ${#options[@]} -gt 0 ]; then
  meson configure build "${options[@]}"
fi
NINJA_STATUS='[%f/%t] ' ninja -C build "${targets[@]}" | progress_filter build progress_ninja
