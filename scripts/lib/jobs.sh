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
