#!/usr/bin/env bash
# The bash completion and the man page an install puts in place (meson install into a staging
# directory), both generated from trainctl's own command line (cli/command_reference.h):
# - the completion, sourced, registers itself (complete -p); it completes `trainctl ckpt <TAB>`
#   with exactly the subcommands `trainctl ckpt --help` lists, `trainctl submit --<TAB>` with
#   exactly the long options `trainctl submit --help` lists, an option's set of values, a run
#   directory with directories only and a config with *.toml files and directories;
# - `man -l` renders trainctl(1) without a warning, and it has a section for every command and
#   subcommand that --help lists.
source "$(dirname "$0")/lib.sh"
: "${TRAINCTL_BUILD_DIR:?meson passes the build directory}"
command -v man >/dev/null || { echo "SKIP: man is missing (scripts/install-deps.sh installs man-db)"; exit 77; }

meson install -C "$TRAINCTL_BUILD_DIR" --no-rebuild --destdir "$work/stage" --quiet >install.log ||
  fail "meson install: $(cat install.log)"
prefix=$(dirname "$(dirname "$(find "$work/stage" -path '*/bin/trainctl' -type f)")")
installed=$prefix/bin/trainctl
completion=$(find "$prefix" -path '*/bash-completion/completions/trainctl*' -type f)
[ -n "$completion" ] || fail "no completion script installed under $prefix"
page=$prefix/share/man/man1/trainctl.1
[ -f "$page" ] || { echo "SKIP: this build has no man page (help2man was missing when it was configured)"; exit 77; }

# help_list SECTION COMMAND...: the names `trainctl COMMAND... --help` lists under SECTION
# ("Subcommands", or "Options" for the long options), sorted.
help_list() {
  local section=$1
  shift
  "$installed" "$@" --help | sed -n "/^$section:\$/,/^\$/p" | awk 'NR > 1 && NF { print $1 }' | tr ',' '\n' |
    { if [ "$section" = Options ]; then grep -- '^--'; else cat; fi; } | sort
}

# completions WORD...: what the completion offers for the last WORD, the cursor at its end, sorted.
completions() {
  bash --norc -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _trainctl; printf "%s\n" "${COMPREPLY[@]}"' \
    completion "$completion" "$@" | sort
}

expect_completions() {
  local expected=$1 got
  shift
  got=$(completions "$@" | paste -sd ' ')
  [ "$got" = "$expected" ] || fail "completing '$*': got '$got', expected '$expected'"
}

[ "$(bash --norc -c 'source "$1" && complete -p trainctl' completion "$completion")" = "complete -F _trainctl trainctl" ] ||
  fail "sourcing $completion does not register the completion of trainctl"

expect_completions "$(help_list Subcommands | paste -sd ' ')" trainctl ''
ckpt_commands=$(help_list Subcommands ckpt | paste -sd ' ')
[ "$ckpt_commands" = "diff inspect ls verify" ] || fail "trainctl ckpt --help lists '$ckpt_commands'"
expect_completions "$ckpt_commands" trainctl ckpt ''
submit_options=$(help_list Options submit | paste -sd ' ')
for option in --resume --run-dir --no-preflight; do
  [[ " $submit_options " == *" $option "* ]] || fail "trainctl submit --help lacks $option: $submit_options"
done
expect_completions "$submit_options" trainctl submit --
expect_completions "best_val_loss loss rung task" trainctl sweep status --sort ''

mkdir -p tree/runs/first && touch tree/job.toml tree/notes.txt
cd tree
expect_completions "runs" trainctl status ''
expect_completions "runs" trainctl submit --run-dir ''
expect_completions "job.toml runs" trainctl submit ''
expect_completions "job.toml notes.txt runs" trainctl data tokenize notes.txt ''
cd ..

MANWIDTH=120 man --warnings -l "$page" 2>man.err | col -b >man.txt
[ -s man.txt ] || fail "man -l rendered nothing: $(cat man.err)"
[ ! -s man.err ] || fail "man -l warns: $(cat man.err)"
grep -q "^ *trainctl - SLURM-native batch training launcher$" man.txt || fail "the man page has no NAME line"
for command in $(help_list Subcommands); do
  grep -qx "   trainctl $command" man.txt || fail "the man page has no section for trainctl $command"
  for subcommand in $(help_list Subcommands "$command"); do
    grep -qx "   trainctl $command $subcommand" man.txt ||
      fail "the man page has no section for trainctl $command $subcommand"
  done
done
echo "completion and man page cover $(grep -c '^   trainctl ' man.txt) commands"
