#!/usr/bin/env bash
# Shared helpers for the pipeline scripts (sourced, not run).
# Steps are idempotent: a step writes its outputs, then a stamp file recording
# the line counts and checksums of its inputs (files, and its options written
# to a file) and outputs; a re-run skips a step whose stamp still matches and
# redoes one that was interrupted, altered, or whose inputs or options changed.
# A stamp must list every input the step reads.

FAIRSEQ_LOCAL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
USER_DIR="$FAIRSEQ_LOCAL_ROOT/fairseq_local"
# Use the checkout's virtual environment (scripts/setup_env.sh) when there is
# one and no other environment is active.
if [ -z "${VIRTUAL_ENV:-}" ] && [ -x "${VENV:-$FAIRSEQ_LOCAL_ROOT/.venv}/bin/python" ]; then
  export PATH="${VENV:-$FAIRSEQ_LOCAL_ROOT/.venv}/bin:$PATH"
fi
# Python never imports from the current folder (safe-path mode); the checkout is named instead.
export PYTHONSAFEPATH=1 PYTHONPATH="$FAIRSEQ_LOCAL_ROOT${PYTHONPATH:+:$PYTHONPATH}"

# use_python_on_path : for a script's --no-setup: the python on PATH as it is
# (no .venv, nothing installed or downloaded). Puts the checkout first on
# PYTHONPATH, and on PATH a folder (NO_SETUP_BIN, for the caller to remove)
# with `fairseq-local`, and fairseq's commands where the python has no
# scripts for them, run by that python; one line if it lacks torch or fairseq.
use_python_on_path() {
  local py tool
  py="$(command -v python || command -v python3)" || die "--no-setup: there is no python on PATH"
  "$py" -c "import torch, fairseq" 2> /dev/null \
    || die "--no-setup: $py lacks torch or fairseq (pip install --no-deps fairseq-fixed==0.12.3.1, or run without --no-setup)"
  export PYTHONPATH="$FAIRSEQ_LOCAL_ROOT${PYTHONPATH:+:$PYTHONPATH}" PIP_NO_INDEX=1
  NO_SETUP_BIN="$(mktemp -d)"
  printf '#!/bin/sh\nexec "%s" "$@"\n' "$py" > "$NO_SETUP_BIN/python"
  printf '#!/bin/sh\nexec "%s" -c "import sys; from fairseq_local_cli.main import main; sys.exit(main())" "$@"\n' \
    "$py" > "$NO_SETUP_BIN/fairseq-local"
  for tool in train generate preprocess; do
    command -v "fairseq-$tool" > /dev/null \
      || printf '#!/bin/sh\nexec "%s" -m fairseq_cli.%s "$@"\n' "$py" "$tool" > "$NO_SETUP_BIN/fairseq-$tool"
  done
  chmod +x "$NO_SETUP_BIN"/*
  export PATH="$NO_SETUP_BIN:$PATH"
}

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# usage: print the running script's header comment (from line 2 to the first
# line that is not a comment), without the leading "# ": its --help text.
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[-1]}"; }

# env_settings_only "$@" : for a script whose settings are environment
# variables: --help prints its usage, any argument is one error line.
env_settings_only() {
  case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    "") ;;
    *) die "unexpected argument '$1' (settings are environment variables; see --help)" ;;
  esac
}

# needs_value "$@" : in an option loop, die unless the option "$1" has a value.
needs_value() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }

# parse_options "SPEC" ARG... : the option loop of a script. SPEC is a list of
# words separated by spaces:
#   --name=VAR   an option with a value, stored in VAR
#   --name+VAR   a flag: VAR=1
#   VAR          a positional argument, stored in VAR (in order)
#   -- or --=WHO "--" ends the options: the arguments after it are kept in the
#                array REST (WHO: whose options they are, e.g. --=fairseq, for
#                the message on an unknown option)
# -h and --help print the script's --help text (usage) and exit. An unknown
# option, an option without its value and one argument too many are one line
# (die). Variables of options not given keep their values (set them first).
parse_options() {
  local _spec _w _hint="" _rest=0 _positional=() _i=0 _matched
  read -ra _spec <<< "${1//$'\n'/ }"; shift
  for _w in "${_spec[@]}"; do
    case "$_w" in
      --) _rest=1 ;;
      --=*) _rest=1 _hint="${_w#--=} options go after '--'; " ;;
      --*) ;;
      *) _positional+=("$_w") ;;
    esac
  done
  REST=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) usage; exit 0 ;;
      --) if [ "$_rest" = 1 ]; then shift; REST=("$@"); return 0; fi ;;
    esac
    _matched=0
    for _w in "${_spec[@]}"; do
      case "$_w" in
        "$1="*) needs_value "$@"; printf -v "${_w#*=}" '%s' "$2"; shift 2; _matched=1; break ;;
        "$1+"*) printf -v "${_w#*+}" '%s' 1; shift; _matched=1; break ;;
      esac
    done
    [ "$_matched" = 0 ] || continue
    case "$1" in -*) die "unknown option '$1' (${_hint}see --help)" ;; esac
    [ "$_i" -lt "${#_positional[@]}" ] || die "unexpected argument '$1' (see --help)"
    printf -v "${_positional[$_i]}" '%s' "$1"
    _i=$((_i + 1)); shift
  done
}

# fairseq_local ARGS... : "fairseq-local ARGS..." with its output; on failure
# prints its one-line error (without fairseq's import-time log lines; its
# whole stderr if it has no "error:" line) and returns its exit status.
fairseq_local() {
  local err out status=0
  err="$(mktemp)"
  out="$(fairseq-local "$@" 2> "$err")" || status=$?
  if [ "$status" != 0 ]; then
    if grep -q '^error: ' "$err"; then grep -m1 '^error: ' "$err" >&2; else cat "$err" >&2; fi
  fi
  rm -f "$err"
  [ "$status" != 0 ] || printf '%s\n' "$out"
  return "$status"
}

# resolve_configs KEY... : "NAME ARCH" per key, NAME being the paper letter or,
# for method archs, the arch name ("fairseq-local configs --resolve"). On an
# unknown key, prints its one-line error and returns 1.
resolve_configs() { fairseq_local configs --resolve "$@"; }

# _fingerprint FILE... : "name lines sha256" per file.
_fingerprint() {
  local f
  for f in "$@"; do
    [ -f "$f" ] || { echo "missing $f"; continue; }
    echo "$(basename "$f") $(wc -l < "$f") $(sha256sum < "$f" | cut -d' ' -f1)"
  done
}

# step_done STAMP FILE... : true if STAMP exists and matches the files.
step_done() {
  local stamp="$1"; shift
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(_fingerprint "$@")" ]
}

# step_finish STAMP FILE... : record the files' fingerprint.
step_finish() {
  local stamp="$1"; shift
  _fingerprint "$@" > "$stamp.$$.tmp" && mv "$stamp.$$.tmp" "$stamp"
}

# require_parallel A B : both exist, are non-empty and have equal line counts.
require_parallel() {
  [ -s "$1" ] || die "missing or empty corpus file: $1"
  [ -s "$2" ] || die "missing or empty corpus file: $2"
  local a b
  a=$(wc -l < "$1"); b=$(wc -l < "$2")
  [ "$a" = "$b" ] || die "parallel files differ in length: $1 has $a lines, $2 has $b"
}

# require_pair PAIR : PAIR is a WMT'14 pair this project prepares (en-de, en-ru).
require_pair() {
  case "$1" in
    en-de|en-ru) ;;
    "") die "missing language pair: en-de or en-ru (see --help)" ;;
    *) die "unsupported language pair '$1' (en-de or en-ru)" ;;
  esac
}

# inspect_checkpoint CKPT VAR=FIELD... : set each VAR to the FIELD of the
# fairseq checkpoint CKPT ("fairseq-local inspect CKPT --field FIELD"; empty
# where it records none). On failure, sets none of them, leaves the command's
# one-line error in INSPECT_ERROR and returns 1.
inspect_checkpoint() {
  local _ckpt="$1" _err _out _a _i=0 _fields=() _values=(); shift
  for _a in "$@"; do _fields+=(--field "${_a#*=}"); done
  _err="$(mktemp)"
  if ! _out="$(fairseq-local inspect "$_ckpt" "${_fields[@]}" 2> "$_err")"; then
    INSPECT_ERROR="$(grep -m1 '^error: ' "$_err" | sed 's/^error: //')"
    INSPECT_ERROR="${INSPECT_ERROR:-cannot read '$_ckpt' (fairseq-local inspect failed)}"
    rm -f "$_err"; return 1
  fi
  rm -f "$_err"
  mapfile -t _values <<< "$_out"
  for _a in "$@"; do printf -v "${_a%%=*}" '%s' "${_values[$_i]:-}"; _i=$((_i + 1)); done
}

# checkpoint_updates FILE : the update count stored in a fairseq checkpoint
# (0 when there is none); one line if FILE is not a checkpoint.
checkpoint_updates() {
  local updates
  [ -f "$1" ] || { echo 0; return 0; }
  inspect_checkpoint "$1" updates=num_updates || die "$INSPECT_ERROR"
  echo "$updates"
}

# require_roberta_archs ARCH... : each is a registered RoBERTa arch (this
# plugin's or fairseq's own), checked before any training starts.
require_roberta_archs() { fairseq_local configs --arch "$@" --roberta > /dev/null || exit 1; }

# demo_recipe : the demo's training recipe as fairseq flags in the global
# arrays MODEL, OPTIM and SPARSITY (scripts/demo.sh, scripts/demo-analysis.sh;
# MAX_UPDATE must be set).
demo_recipe() {
  # The demo's model size (fairseq-local configs --preset demo: d 128, FFN
  # 256, 2 decoder layers) as ordinary fairseq flags; the layouts keep 6
  # encoder layers with 8 heads each. Pre-norm and no dropout: with post-norm
  # the 6-layer all-global baseline barely trains within the demo's budget
  # (local heads get their positional pattern for free and hide that), and a
  # deterministic corpus seen for a few epochs does not overfit. Batches of
  # 1024 tokens: twice the updates of 2048-token batches in the same time,
  # which converges faster here.
  local size
  size="$(fairseq_local configs --preset demo)" || exit 1
  read -ra MODEL <<< "$size"
  MODEL+=(--encoder-normalize-before --decoder-normalize-before)
  OPTIM=(--lr 2e-3 --warmup-updates 400 --clip-norm 1.0 --dropout 0
    --max-tokens 1024 --max-update "$MAX_UPDATE" --seed 1
    --log-interval 100 --no-epoch-checkpoints)
  # The sparsity criterion logs the realised sparsity of every config; its terms
  # act only on the heads that have them (DAM, AAA, gates).
  SPARSITY=(--criterion label_smoothed_cross_entropy_with_sparsity --dam-max-len 128
    --dam-lambda 1e-4 --aaa-target 0.5 --aaa-alpha 0.05 --gate-lambda 0.1)
}

# ---------------------------------------------------------------- outputs
# Nothing lost: an output never lands on /proc, a regular file or one of the
# command's inputs, and every check runs before anything (even --dry-run's
# print) is done.

# _abspath PATH : PATH made absolute, symbolic links resolved, without
# requiring it to exist.
_abspath() { realpath -m -- "$1"; }

# check_out_dir DIR [WHAT] : DIR can be the output folder WHAT (default
# "output folder"): a folder, or creatable (its first existing ancestor is a
# writable folder), and not under /proc, /sys or /dev. Creates nothing.
check_out_dir() {
  local dir="$1" what="${2:-output folder}" abs up
  [ -n "$dir" ] || die "empty $what path"
  abs="$(_abspath "$dir")"
  case "$abs/" in /proc/*|/sys/*|/dev/*) die "$what '$dir' is under /$(cut -d/ -f2 <<< "$abs"), not a place for outputs" ;; esac
  if [ -e "$abs" ] || [ -L "$dir" ]; then
    [ -d "$abs" ] || die "$what '$dir' exists and is not a folder"
    [ -w "$abs" ] || die "$what '$dir' is not writable"
    return 0
  fi
  up="$abs"
  while [ ! -e "$up" ]; do up="$(dirname "$up")"; done
  [ -d "$up" ] || die "$what '$dir' is under '$up', which is a file, not a folder"
  [ -w "$up" ] || die "$what '$dir' cannot be created: '$up' is not writable"
}

# check_apart OUT INPUT... : die if the output path OUT is an INPUT, is inside
# an INPUT folder or holds an INPUT (empty INPUTs are skipped).
check_apart() { _check_apart strict "$@"; }

# check_run_dir_apart RUN_DIR DATA... : a training run folder (--save-dir,
# --runs-root) is not a data folder and does not hold one. It may lie inside
# one: fairseq writes only checkpoint*.pt, logs and tb/ there, never a data file.
check_run_dir_apart() { _check_apart inside-ok "$@"; }

_check_apart() {
  local rule="$1" out="$2" o i in; shift 2
  o="$(_abspath "$out")"
  for in in "$@"; do
    [ -n "$in" ] || continue
    i="$(_abspath "$in")"
    [ "$o" != "$i" ] || die "output '$out' is the input '$in': give another output path"
    if [ "$rule" = strict ]; then
      case "$o/" in "$i"/*) die "output '$out' is inside the input folder '$in': give another output path" ;; esac
    fi
    case "$i/" in "$o"/*) die "output folder '$out' holds the input '$in': give another output path" ;; esac
  done
}

# check_not_same OUTFILE INPUT... : die if the output file OUTFILE is one of the
# INPUT files (same path, or the same file through a link).
check_not_same() {
  local out="$1" in; shift
  for in in "$@"; do
    [ -n "$in" ] || continue
    if [ "$(_abspath "$out")" = "$(_abspath "$in")" ] || { [ -e "$out" ] && [ -e "$in" ] && [ "$out" -ef "$in" ]; }; then
      die "output '$out' is the input '$in': give another output path"
    fi
  done
}

# require_int NAME VALUE [MIN] : VALUE is a whole number >= MIN (default 1),
# else one line naming the option NAME.
require_int() {
  local min="${3:-1}"
  [[ "$2" =~ ^[0-9]+$ ]] && [ "$((10#$2))" -ge "$min" ] && return 0
  if [ "$min" = 0 ]; then die "$1 must be a whole number (0 or more), not '$2'"; fi
  die "$1 must be a whole number of at least $min, not '$2'"
}

# resolve_arch KEY : the fairseq arch that KEY names: a registered arch as it
# is, else a paper letter (a-l) or a configuration name, with or without
# "transformer_" ("fairseq-local configs --arch"); one line on an unknown KEY.
resolve_arch() { fairseq_local configs --arch "$1" || exit 1; }

# check_resume CKPT FAIRSEQ_TRAIN_ARGS... : die (one line) if fairseq-train
# with these arguments would resume CKPT as another model, or cannot read it.
check_resume() {
  local err
  err="$(mktemp)"
  if python -m fairseq_local_cli.check_resume "$@" > /dev/null 2> "$err"; then grep '^note: ' "$err" >&2 || true; rm -f "$err"; return 0; fi
  if grep -q '^error: ' "$err"; then
    grep -m1 '^error: ' "$err" >&2; rm -f "$err"; exit 1
  fi
  local last; last="$(grep -v '^\(INFO\|[0-9-]* [0-9:]* | INFO\)' "$err" | tail -1)"; rm -f "$err"
  die "cannot check '$1' before resuming: ${last:-unknown error}"
}

# resumed_checkpoint SAVE_DIR FAIRSEQ_TRAIN_ARGS... : the checkpoint that
# fairseq-train with these arguments would load when it starts (nothing if none):
# --restore-file (default SAVE_DIR/checkpoint_last.pt), else on a first launch
# --finetune-from-model.
resumed_checkpoint() {
  local save="$1" restore=checkpoint_last.pt finetune="" prev="" a; shift
  for a in "$@"; do
    case "$prev" in --restore-file) restore="$a" ;; --finetune-from-model) finetune="$a" ;; esac
    case "$a" in --restore-file=*) restore="${a#*=}" ;; --finetune-from-model=*) finetune="${a#*=}" ;; esac
    prev="$a"
  done
  if [ "$restore" = checkpoint_last.pt ]; then
    if [ -e "$save/checkpoint_last.pt" ]; then echo "$save/checkpoint_last.pt"
    elif [ -n "$finetune" ] && [ -e "$finetune" ]; then echo "$finetune"; fi
  elif [ -e "$restore" ]; then echo "$restore"; fi
}

# print_command WORD... : the command line, quoted for the shell, on one line.
print_command() { printf '%q ' "$@"; echo; }

# train_run SAVE_DIR NAME WHAT FAIRSEQ_TRAIN_COMMAND... : the training scripts'
# run step (train.sh, pretrain-bert.sh, finetune-glue.sh). Refuses (one line)
# to resume another model or an unreadable checkpoint (check_resume); skips a
# finished run: SAVE_DIR/checkpoint_last.pt at the command's (last)
# --max-update, which fairseq-train would train one more update ("skip: NAME
# already at update N"); else writes SAVE_DIR/command.sh and runs the command
# ("WHAT (log: ...)") with its whole output appended to SAVE_DIR/train.log, so
# that resumed runs keep their history, and one progress line on stderr
# (follow_run); an interruption is one line saying what a re-run does.
train_run() {
  local save="$1" name="$2" what="$3"; shift 3
  local resume max="" prev="" a trained
  check_data "$2"
  resume="$(resumed_checkpoint "$save" "${@:2}")"
  [ -z "$resume" ] || check_resume "$resume" "${@:2}"
  for a in "$@"; do
    [ "$prev" != --max-update ] || max="$a"
    case "$a" in --max-update=*) max="${a#*=}" ;; esac
    prev="$a"
  done
  [[ "$max" =~ ^[1-9][0-9]*$ ]] || max=""
  trained=0
  if [ -f "$save/checkpoint_last.pt" ]; then
    trained="$(checkpoint_updates "$save/checkpoint_last.pt")" || exit 1
    if [ -n "$max" ] && [ "$trained" -ge "$max" ]; then
      log "skip: $name already at update $trained of $max ($save/checkpoint_last.pt)"
      return 0
    fi
  fi
  lock_dir "$save" "training"
  print_command "$@" > "$save/command.sh"
  log "$what (log: $save/train.log)"
  thread_advice "$@"
  TRAINING="$name" TRAINING_DIR="$save"
  on_interrupt _training_note
  follow_run "$save/train.log" "$name" "$max" "$trained" "$@"
}
_training_note() {
  if [ -f "$TRAINING_DIR/checkpoint_last.pt" ]; then
    echo "training $TRAINING stopped; the same command resumes it from $TRAINING_DIR/checkpoint_last.pt"
  else echo "training $TRAINING stopped before its first checkpoint; the same command starts it again"; fi
}

# checkpoint_task CKPT : "TASK ARCH" of the fairseq checkpoint CKPT ("-" for
# what it does not record); one line if it is missing, truncated or not a
# fairseq checkpoint.
checkpoint_task() {
  local task arch
  inspect_checkpoint "$1" task=task arch=arch || die "$INSPECT_ERROR"
  echo "${task:--} ${arch:--}"
}

# check_bpe_model KIND PATH : PATH is a readable tokeniser of KIND
# (sentencepiece: a .model file; gpt2: a folder of encoder.json and vocab.bpe;
# auto: a folder is gpt2, a file sentencepiece), else one line, before any
# work is done (a non-UTF-8 or corrupt file is not a traceback later).
check_bpe_model() { fairseq_local inspect --bpe-model "$2" --bpe "${1:-auto}" --field bpe > /dev/null || exit 1; }

# One job per folder, results written whole, data folders checked: scripts/lib/jobs.sh.
source "$FAIRSEQ_LOCAL_ROOT/scripts/lib/jobs.sh"
