#!/usr/bin/env bash
# Helpers of scripts/lib.sh (sourced from it, not run) for jobs on a shared
# machine or a cluster: one job per folder, results written whole, and data
# folders checked before fairseq reads them (docs/pipelines.md, "On a cluster").

# lock_dir DIR WHAT : one job per folder. Holds DIR/.lock (flock(2), the lock of
# fairseq_local/locks.py) until the script exits; a second job is one line naming
# the first one's process id. A lock left by a killed job is taken over, with a
# note; DIR/.*.PID.tmp files of this process are removed at exit (tmp_name).
lock_dir() {
  local dir="$1" what="$2" held
  command -v flock > /dev/null || { log "note: no flock command: a second job into '$dir' is not detected"; return 0; }
  # a script's next folder (pretrain-bert.sh's phases): the previous one is done, released cleanly
  [ -z "${LOCKED_DIR:-}" ] || { : > "$LOCKED_DIR/.lock"; flock -u "$LOCK_FD"; exec {LOCK_FD}>&-; }
  mkdir -p "$dir"
  exec {LOCK_FD}<>"$dir/.lock"
  if ! flock -n "$LOCK_FD"; then
    held="$(_lock_holder "$dir/.lock")"
    die "$dir is being written by ${held:-a process}: wait for it to end, or stop it, before running another $what there"
  fi
  held="$(_lock_holder "$dir/.lock")"
  [ -z "$held" ] || log "note: $dir was locked by $held, which has ended without releasing it; taking the lock over"
  printf '%s %s\n' "$$" "$what" > "$dir/.lock"
  LOCKED_DIR="$dir"
  trap '[ -z "${LOCKED_DIR:-}" ] || { : > "$LOCKED_DIR/.lock"; rm -f "$LOCKED_DIR"/.*."$$".tmp; }' EXIT
}

# _lock_holder LOCK_FILE : "process 123 (training)" from its "123 training", or nothing.
_lock_holder() {
  head -c 200 "$1" | awk 'NR == 1 && $1 ~ /^[0-9]+$/ { w = $0; sub(/^[0-9]+ */, "", w); print "process " $1 (w != "" ? " (" w ")" : "") }'
}

# tmp_name FILE : a temporary name beside FILE, unique to this process (removed
# at exit by lock_dir's trap); write it, then mv it onto FILE, so that a kill
# never leaves FILE empty or half written.
tmp_name() { echo "$(dirname "$1")/.$(basename "$1").$$.tmp"; }

# check_data DIR... : die (one line naming the file and what to re-run) if a
# fairseq data folder (or A:B shards) holds a truncated or foreign .idx/.bin
# or a malformed dictionary (python -m fairseq_local_data.databin).
check_data() { python -m fairseq_local_data.databin --quiet "$@" || exit 1; }

# on_interrupt NOTE : on Ctrl-C or SIGTERM (to the script's process group, as
# a terminal and Slurm send them), print one line "interrupted: NOTE" and exit
# 130, once the running command has ended. NOTE is text, or the name of a
# function that prints it then. Only the outermost script that asks speaks
# (FAIRSEQ_LOCAL_INTERRUPT_OWNER): the demo's line, not also train.sh's. Call
# again to change the line as the script goes on.
on_interrupt() {
  _INTERRUPT_NOTE="$1"
  [ -n "${FAIRSEQ_LOCAL_INTERRUPT_OWNER:-}" ] || export FAIRSEQ_LOCAL_INTERRUPT_OWNER="$$"
  _keep_stderr
  trap _interrupted INT TERM
}
_interrupted() {
  trap - INT TERM
  if [ "${FAIRSEQ_LOCAL_INTERRUPT_OWNER:-}" = "$$" ]; then
    if declare -F "$_INTERRUPT_NOTE" > /dev/null; then echo "interrupted: $("$_INTERRUPT_NOTE")"
    else echo "interrupted: $_INTERRUPT_NOTE"; fi >&"$_STDERR_FD"
  fi
  exit 130
}
# _keep_stderr : _STDERR_FD, the script's stderr, for lines printed inside follow_run's 2>/dev/null.
_keep_stderr() { [ -n "${_STDERR_FD:-}" ] || exec {_STDERR_FD}>&2; }

# follow_run LOG NAME MAX_UPDATE START COMMAND... : run a fairseq-train
# COMMAND with its whole output appended to LOG and copied to stdout, and one
# progress line for NAME on stderr (python -m fairseq_local_data.progress).
# The shell's own "Terminated" report of a killed command is not printed.
follow_run() {
  local log="$1" name="$2" max="$3" start="$4"; shift 4
  _keep_stderr
  { "$@" 2>&1 | python -m fairseq_local_data.progress --log "$log" --name "$name" \
      ${max:+--max-update "$max"} --start "$start" 2>&"$_STDERR_FD"; } 2> /dev/null
}

# up_to_date SETTINGS NEW_SETTINGS OUTPUT... -- INPUT... : true when the
# OUTPUTs were made with the same settings (the file SETTINGS, one of them,
# equals NEW_SETTINGS) and each exists and is newer than every INPUT.
up_to_date() {
  local settings="$1" new="$2" out in; shift 2
  local -a outs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do outs+=("$1"); shift; done
  shift
  cmp -s "$settings" "$new" || return 1
  for out in "${outs[@]}"; do
    [ -f "$out" ] || return 1
    for in in "$@"; do [ "$out" -nt "$in" ] || return 1; done
  done
}

# default_threads : unless OMP_NUM_THREADS is set, set it to the cores that
# are not busy (the cores less the 1-minute load, at least 1), in one line.
# torch's threads wait at OpenMP barriers: on a 2-core machine running two
# other jobs, 40 demo updates took 195 s with two threads and 18 s with one
# (docs/commands.md, "Threads on a shared machine").
default_threads() {
  [ -z "${OMP_NUM_THREADS:-}" ] || return 0
  _cores_and_load
  OMP_NUM_THREADS="$(awk -v c="$CORES" -v l="$LOAD" 'BEGIN { f = int(c - l + 0.5); print (f < 1 ? 1 : f) }')"
  export OMP_NUM_THREADS
  log "threads: $OMP_NUM_THREADS of $CORES cores (1-minute load $LOAD); OMP_NUM_THREADS=N chooses"
}

# _cores_and_load : CORES (those this process may use) and LOAD (the machine's 1-minute load).
_cores_and_load() {
  CORES="$(nproc 2> /dev/null || echo 1)"
  LOAD="$(cut -d' ' -f1 /proc/loadavg 2> /dev/null || echo 0)"
}

# thread_advice COMMAND... : a note when a --cpu COMMAND runs with torch's
# default threads on a busy machine (see default_threads).
thread_advice() {
  [ -z "${OMP_NUM_THREADS:-}" ] || return 0
  case " $* " in *" --cpu "*) ;; *) return 0 ;; esac
  _cores_and_load
  if awk -v l="$LOAD" 'BEGIN { exit !(l >= 1) }'; then
    log "note: the 1-minute load is $LOAD on $CORES cores; torch's threads slow down badly on a busy machine: set OMP_NUM_THREADS to the free cores (docs/commands.md, \"Threads on a shared machine\")"
  fi
}

# binarise_failed LOG FILE... : after fairseq-preprocess failed with its
# output in LOG, remove the partial FILEs (the step, unstamped, is redone)
# and die in one line: a full disk as such, else the error's last line.
binarise_failed() {
  local log="$1" last; shift
  rm -f -- "$@"
  if grep -q "No space left on device" "$log" 2> /dev/null; then
    die "cannot binarise: No space left on device (fairseq-preprocess; its partial files are removed: free space and re-run; log: $log)"
  fi
  last="$(grep -v '^[[:space:]]*$' "$log" 2> /dev/null | tail -1)"
  die "fairseq-preprocess failed: ${last:-no output} (log: $log)"
}
