#!/usr/bin/env bash
# The layers (docs/runtime.md, docs/development.md, "Layout"): the CLI, the SLURM side and program/ include no
# header of runtime/ (shared contracts live in common/), and neither trainctl nor trainctl-launch
# links MPI or CUDA: trainctl runs on login nodes without either, and a user's program brings
# its own.
source "$(dirname "$0")/lib.sh"
src=$TRAINCTL_SOURCE_DIR
for header in "$src"/runtime/*.h; do
  name=$(basename "$header")
  if grep -rlE "#include [\"<]$name[\">]" "$src"/cli "$src"/slurm "$src"/program 2>/dev/null; then
    fail "the files above include runtime/$name"
  fi
done
for program in "$TRAINCTL" "${TRAINCTL_LAUNCH:?meson passes trainctl-launch}"; do
  ldd "$program" >libraries.txt
  if grep -iE 'libmpi|libcudart|libcublas|libnccl' libraries.txt; then fail "$program links MPI or CUDA (above)"; fi
done
echo "PASS"
