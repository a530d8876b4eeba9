#!/usr/bin/env bash
# The layers (docs/runtime.md, README "Layout"): the CLI and the SLURM side include no header of
# runtime/ (shared contracts live in common/), and the trainctl program links neither MPI nor
# CUDA, so it runs on login nodes without either.
source "$(dirname "$0")/lib.sh"
src=$TRAINCTL_SOURCE_DIR
for header in "$src"/runtime/*.h; do
  name=$(basename "$header")
  if grep -lE "#include [\"<]$name[\">]" "$src"/cli/* "$src"/slurm/* 2>/dev/null; then
    fail "the files above include runtime/$name"
  fi
done
ldd "$TRAINCTL" >libraries.txt
if grep -iE 'libmpi|libcudart|libcublas|libnccl' libraries.txt; then fail "trainctl links MPI or CUDA (above)"; fi
echo "PASS"
