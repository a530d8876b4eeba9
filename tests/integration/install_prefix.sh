#!/usr/bin/env bash
# An administrator's install (docs/install.md), used with nothing of the build tree. meson install
# stages it in a directory of its own (DESTDIR), where it works as it is: each installed piece
# finds the others relative to itself. With the build tree off PATH, no TRAINCTL_RUNTIME or
# TRAINCTL_LAUNCH, and from another directory, the installed trainctl:
# - --version names the source revision; alone, it prints the overview of the commands, exit 0;
# - validates a config and submits it to the local cluster; the batch script runs the installed
#   runtime by its absolute path, and its [job] setup loads the environment module (Lmod), which
#   puts the installed trainctl on PATH; the job completes.
# The module, loaded here too, sets TRAINCTL_HOME and MANPATH and keeps man's own pages.
source "$(dirname "$0")/lib.sh"
require_cluster 1
: "${TRAINCTL_BUILD_DIR:?meson passes the build directory}"
lmod_init=/usr/share/lmod/lmod/init/bash
[ -f "$lmod_init" ] || { echo "SKIP: Lmod is missing (scripts/install-deps.sh installs it)"; exit 77; }

meson install -C "$TRAINCTL_BUILD_DIR" --no-rebuild --destdir "$work/stage" --quiet >install.log ||
  fail "meson install: $(cat install.log)"
prefix=$(dirname "$(dirname "$(find "$work/stage" -path '*/bin/trainctl' -type f)")")
TRAINCTL=$prefix/bin/trainctl
# without_build_tree LIST: the colon-separated LIST less what is in the build or source tree.
without_build_tree() {
  tr ':' '\n' <<<"$1" | { grep -v -e "^$TRAINCTL_BUILD_DIR" -e "^$TRAINCTL_SOURCE_DIR" || true; } | paste -sd ':'
}
PATH=$(without_build_tree "$PATH")
# meson points it at the build's kernels/, where the runtime would find the CUDA backend first.
LD_LIBRARY_PATH=$(without_build_tree "${LD_LIBRARY_PATH:-}")
unset TRAINCTL_RUNTIME TRAINCTL_LAUNCH TRAINCTL_CUDA_BACKEND
mkdir elsewhere
cd elsewhere

version=$("$TRAINCTL" --version)
[[ $version =~ ^trainctl\ [0-9.]+\ \((revision [^ ]+|unknown revision)\)$ ]] || fail "--version printed '$version'"
if [ -d "$TRAINCTL_SOURCE_DIR/.git" ]; then
  [[ $version == *"(revision "* ]] || fail "built from a git checkout, but --version names no revision: $version"
fi
"$TRAINCTL" >overview.txt 2>&1 || fail "trainctl alone exited $?: $(cat overview.txt)"
grep -qx "Commands:" overview.txt || fail "trainctl alone printed no overview: $(cat overview.txt)"
for command in validate submit status ckpt sweep; do
  grep -q "^  $command  " overview.txt || fail "the overview lacks $command: $(cat overview.txt)"
done

# The module, here: the installed trainctl and its man page, and man's own pages still found.
# shellcheck disable=SC2016 # expanded by the inner shell
bash --norc -c 'source "$1" && module use "$2/share/modulefiles" && module load trainctl &&
  echo "$(command -v trainctl) $TRAINCTL_HOME $(man -w trainctl)" && man -w bash >/dev/null' \
  module "$lmod_init" "$prefix" >module.txt 2>&1 || fail "module load trainctl: $(cat module.txt)"
[ "$(cat module.txt)" = "$TRAINCTL $prefix $prefix/share/man/man1/trainctl.1" ] ||
  fail "module load trainctl gives '$(cat module.txt)'"

make_data
module_path=$prefix/share/modulefiles
write_config job.toml installed \
  "job.setup=['source $lmod_init', 'module use $module_path', 'module load trainctl', 'command -v trainctl >\"\$TRAINCTL_RUN_DIR/module-trainctl\"']"
"$TRAINCTL" validate job.toml >validate.txt && grep -q "job.toml: valid" validate.txt || fail "the installed trainctl does not validate"
job=$(submit job.toml)
wait_for_job "$job" 180 COMPLETED FAILED CANCELLED
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/installed/logs/*; fail "job $job did not complete"; }
grep -qx "rank_executable='$prefix/bin/trainctl-runtime'" runs/installed/job.sbatch ||
  fail "the batch script does not run the installed runtime: $(grep rank_executable= runs/installed/job.sbatch)"
[ "$(cat runs/installed/module-trainctl)" = "$TRAINCTL" ] ||
  fail "module load trainctl in the job's setup put '$(cat runs/installed/module-trainctl)' on PATH"
grep -q "trainctl: training complete" runs/installed/logs/* || fail "the job's log lacks the completion line"
echo "installed under $prefix: job $job completed with the installed runtime and module"
