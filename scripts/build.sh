#!/usr/bin/env bash
# Configures (once) and builds trainctl into build/. nvcc is looked for in /usr/local/cuda/bin
# as well, where the CUDA Toolkit puts it; without it the CPU-only build is complete.
# Usage: scripts/build.sh [meson setup options...]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
elif [ $# -gt 0 ]; then
  meson configure build "$@"
fi
ninja -C build
