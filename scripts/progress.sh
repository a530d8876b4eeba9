# Progress of the long steps of the quickstart and the test command (sourced, not run, by
# scripts/install-deps.sh, scripts/build.sh and scripts/test.sh): a tool's own progress (apt's
# status lines, ninja's [k/n]) condensed to one line that updates in place on a terminal and to
# a line per 10 % elsewhere (CI logs, pipes), plus a line whenever 15 s pass with nothing new, so
# that a slow download, a long compile or a quiet command never looks hung.

# The longest stretch without a line, in seconds. SECONDS counts whole seconds and a read waits
# up to one, so the filter speaks once SECONDS has moved on by one less.
PROGRESS_QUIET_SECONDS=15

# progress_filter LABEL PARSER: shows the progress in a tool's output read on stdin. PARSER LINE
# returns 0 after setting progress_phase (may be empty), progress_percent (an integer) and
# progress_detail from a progress line, 1 for a line to show as it is (an error, a warning),
# and 2 for one to drop. With PARSER `false` every line is shown, and only the quiet-time lines
# are added.
progress_filter() {
  local label=$1 parse=$2 line partial="" kind read_status new quiet
  # Read by progress_line_ too: the status line, and whether it updates in place.
  local status="" on_tty=0
  local shown_phase="" shown_tenth=-1 news_at=$SECONDS said_at=$SECONDS
  [[ -t 1 ]] && on_tty=1
  while :; do
    read_status=0
    IFS= read -r -t 1 line || read_status=$?
    if ((read_status > 128)); then  # a second without a whole line: read keeps what came so far
      partial+=$line
    else
      line=$partial$line
      partial=""
      ((read_status == 0)) || [[ -n $line ]] || break
      kind=0
      "$parse" "$line" || kind=$?
      if ((kind == 0)); then
        new="$label: ${progress_phase:+$progress_phase }$progress_percent% $progress_detail"
        # Elsewhere than on a terminal, only a new phase or another tenth makes a line (a lower
        # one too: ninja starts counting again after it regenerated its build files).
        if { ((on_tty)) && [[ $new != "$status" ]]; } ||
          [[ $progress_phase != "$shown_phase" ]] || ((progress_percent / 10 != shown_tenth)); then
          status=$new
          shown_phase=$progress_phase
          shown_tenth=$((progress_percent / 10))
          if ((on_tty)); then printf '\r\033[K%s' "$status"; else echo "$status"; fi
          news_at=$SECONDS said_at=$SECONDS
        fi
      elif ((kind == 1)); then
        progress_line_ "$line"
        news_at=$SECONDS said_at=$SECONDS
      fi
      ((read_status == 0)) || break
    fi
    # Checked after every line too: lines that show nothing (a download stuck at one percentage)
    # must not hold the quiet-time line back.
    if ((SECONDS - said_at >= PROGRESS_QUIET_SECONDS - 1)); then
      quiet="still working, nothing new for $((SECONDS - news_at)) s"
      if [[ -z $status ]]; then
        progress_line_ "$label: $quiet"
      elif ((on_tty)); then
        printf '\r\033[K%s - %s' "$status" "$quiet"
      else
        echo "$status - $quiet"
      fi
      said_at=$SECONDS
    fi
  done
  if ((on_tty)) && [[ -n $status ]]; then printf '\r\033[K%s\n' "$status"; fi
  return 0
}

# progress_line_ TEXT: TEXT on a line of its own; on a terminal, above the updating status line
# of the progress_filter that calls it.
progress_line_() {
  if ((on_tty)); then printf '\r\033[K%s\n%s' "$1" "$status"; else echo "$1"; fi
}

# ninja's status lines, as scripts/build.sh sets them (NINJA_STATUS="[%f/%t] "): edges finished
# of all; its other lines (compiler warnings and errors, FAILED:) are shown. Regenerating the
# build files is a count of its own ([0/1]) that the build proper then starts again from, so it
# is shown as a line rather than as the progress.
progress_ninja() {
  if [[ $1 =~ ^\[([0-9]+)/([0-9]+)\]\ (.*) ]] && [[ ${BASH_REMATCH[3]} != "Regenerating build files." ]]; then
    progress_phase=""
    progress_percent=$((BASH_REMATCH[1] * 100 / BASH_REMATCH[2]))
    progress_detail="(${BASH_REMATCH[1]}/${BASH_REMATCH[2]})"
    return 0
  fi
  [[ $1 == "ninja: Entering directory"* ]] && return 2
  return 1
}

# apt-get's machine-readable status (-o APT::Status-Fd=1): "dlstatus:ITEM:PERCENT:Retrieving file
# K of N" while downloading, "pmstatus:PACKAGE:PERCENT:WHAT (ARCH)" while dpkg unpacks and sets
# up, PERCENT being of the whole phase. Errors (E:, dpkg's) and warnings are shown; the rest of
# apt's and dpkg's chatter is dropped (scripts/install-deps.sh keeps all of it in a log).
progress_apt() {
  local rest
  case $1 in
    dlstatus:* | pmstatus:*)
      rest=${1#*:*:}  # past the kind and the item
      [[ ${rest%%:*} =~ ^[0-9]+ ]] || return 2
      [[ $1 == dlstatus:* ]] && progress_phase=downloading || progress_phase=installing
      progress_percent=${BASH_REMATCH[0]}
      rest=${rest#*:}
      progress_detail="(${rest% (*)})"
      return 0
      ;;
    pmerror:* | E:* | W:* | dpkg:* | "Errors were encountered"*) return 1 ;;
  esac
  return 2
}
