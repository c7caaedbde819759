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

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# usage: print the calling script's header comment (from line 2 to the first
# line that is not a comment), without the leading "# ": its --help text.
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[1]}"; }

# needs_value "$@" : in an option loop, die unless the option "$1" has a value.
needs_value() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }

# resolve_configs KEY... : "NAME ARCH" per key, NAME being the paper letter or,
# for method archs, the arch name ("fairseq-local configs --resolve"). On an
# unknown key, prints its one-line error (without fairseq's import-time log
# lines) and returns 1.
resolve_configs() {
  local err out
  err="$(mktemp)"
  if out="$(fairseq-local configs --resolve "$@" 2> "$err")"; then
    rm -f "$err"; echo "$out"; return 0
  fi
  if grep -q '^error: ' "$err"; then grep '^error: ' "$err" >&2; else cat "$err" >&2; fi
  rm -f "$err"; return 1
}

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
  _fingerprint "$@" > "$stamp.tmp" && mv "$stamp.tmp" "$stamp"
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

# checkpoint_updates FILE : the update count stored in a fairseq checkpoint
# (0 when there is none). fairseq-train, re-run on a finished --max-update
# run, would train one more update, so the training scripts check this first.
checkpoint_updates() {
  [ -f "$1" ] || { echo 0; return 0; }
  python - "$1" <<'PY'
import sys
import torch
state = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
print(int((state.get("optimizer_history") or [{}])[-1].get("num_updates", 0)))
PY
}

# require_roberta_archs ARCH... : each is a registered RoBERTa arch (this
# plugin's or fairseq's own), checked before any training starts.
require_roberta_archs() {
  local err
  err="$(python - "$@" 2>/dev/null <<'PY'
import sys
import fairseq_local  # noqa: F401  (registers the archs)
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.models.roberta import RobertaModel
bad = [a for a in sys.argv[1:] if not issubclass(ARCH_MODEL_REGISTRY.get(a, object), RobertaModel)]
if bad:
    print(f"'{bad[0]}' is not a RoBERTa arch (roberta_local_base, roberta_band6, ..., or fairseq's "
          "roberta_base; see fairseq-local configs)")
PY
)" || die "cannot check the arch names (run scripts/setup_env.sh)"
  [ -z "$err" ] || die "$err"
}

# demo_recipe : the demo's training recipe as fairseq flags in the global
# arrays MODEL, OPTIM and SPARSITY (scripts/demo.sh, scripts/demo-analysis.sh;
# MAX_UPDATE must be set).
demo_recipe() {
  # Reduced dimensions as ordinary fairseq flags; the layouts keep 6 encoder
  # layers with 8 heads each. Pre-norm and no dropout: with post-norm the 6-layer
  # all-global baseline barely trains within the demo's budget (local heads get
  # their positional pattern for free and hide that), and a deterministic corpus
  # seen for a few epochs does not overfit. Batches of 1024 tokens: twice the
  # updates of 2048-token batches in the same time, which converges faster here.
  MODEL=(--encoder-embed-dim 128 --encoder-ffn-embed-dim 256
    --decoder-embed-dim 128 --decoder-ffn-embed-dim 256 --decoder-layers 2
    --encoder-normalize-before --decoder-normalize-before)
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

# check_out_file FILE [WHAT] : FILE can be written (its folder exists or can be
# created, see check_out_dir) and is not a folder.
check_out_file() {
  local file="$1" what="${2:-output file}"
  [ -n "$file" ] || die "empty $what path"
  [ ! -d "$file" ] || die "$what '$file' is a folder"
  check_out_dir "$(dirname -- "$file")" "folder of the $what '$file'"
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
# "transformer_" ("fairseq-local configs --resolve"); one line on an unknown KEY.
resolve_arch() {
  local out
  out="$(python - "$1" 2>/dev/null <<'PY'
import sys
import fairseq_local  # noqa: F401  (registers the archs)
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq_local.cli.configs import resolve
key = sys.argv[1]
if key in ARCH_MODEL_REGISTRY:
    print("ok", key)
else:
    try:
        print("ok", resolve([key])[0].split()[1])
    except KeyError as e:
        print("error:", e.args[0])
PY
)" || die "cannot check the arch name '$1' (run scripts/setup_env.sh)"
  case "$out" in
    "ok "*) echo "${out#ok }" ;;
    "error: "*) die "${out#error: }" ;;
    *) die "cannot check the arch name '$1' (run scripts/setup_env.sh)" ;;
  esac
}

# check_resume CKPT FAIRSEQ_TRAIN_ARGS... : die (one line) if fairseq-train
# with these arguments would resume CKPT as another model, or cannot read it.
check_resume() {
  local err
  err="$(mktemp)"
  if python -m fairseq_local.cli.check_resume "$@" > /dev/null 2> "$err"; then rm -f "$err"; return 0; fi
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

# checkpoint_task CKPT : "TASK ARCH" of the fairseq checkpoint CKPT ("-" for
# what it does not record); one line if it is missing, truncated or not a
# fairseq checkpoint.
checkpoint_task() {
  [ -f "$1" ] || die "no checkpoint '$1'"
  local out
  out="$(python - "$1" 2>/dev/null <<'PY'
import sys
import torch
try:
    state = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
    assert isinstance(state, dict) and "model" in state
except Exception:
    print("!")
    sys.exit(0)
def get(c, k):
    return c.get(k) if hasattr(c, "get") else getattr(c, k, None)
top = state.get("cfg")
model = get(top, "model") if top is not None else state.get("args")
task = get(top, "task") if top is not None else state.get("args")
name = (get(task, "_name") or get(task, "task")) if task is not None else None
arch = (get(model, "arch") or get(model, "_name")) if model is not None else None
print(name or "-", arch or "-")
PY
)" || true
  case "$out" in
    ""|"!") die "'$1' is not a fairseq checkpoint (truncated, or not a torch file)" ;;
    *) echo "$out" ;;
  esac
}

# check_bpe_model KIND PATH : PATH is a readable tokeniser of KIND
# (sentencepiece: a .model file; gpt2: a folder of encoder.json and vocab.bpe;
# auto: a folder is gpt2, a file sentencepiece), else one line, before any
# work is done (a non-UTF-8 or corrupt file is not a traceback later).
check_bpe_model() {
  local kind="$1" path="$2" err
  [ -e "$path" ] || die "no --bpe-model '$path'"
  if [ "$kind" = auto ] || [ -z "$kind" ]; then if [ -d "$path" ]; then kind=gpt2; else kind=sentencepiece; fi; fi
  err="$(python - "$kind" "$path" 2>/dev/null <<'PY'
import json
import sys
from pathlib import Path
kind, path = sys.argv[1], Path(sys.argv[2])
try:
    if kind == "sentencepiece":
        if not path.is_file():
            raise ValueError("is not a file (a SentencePiece .model file)")
        import sentencepiece as spm
        try:
            spm.SentencePieceProcessor(model_file=str(path))
        except Exception:
            raise ValueError("is not a SentencePiece model (corrupt, or another kind of file)") from None
    elif kind == "gpt2":
        if not path.is_dir():
            raise ValueError("is not a folder of GPT-2's encoder.json and vocab.bpe")
        for name in ("encoder.json", "vocab.bpe"):
            f = path / name
            if not f.is_file():
                raise ValueError(f"has no {name}")
            try:
                text = f.read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"holds {name}, which is not UTF-8 text (byte {e.start})") from None
            if name == "encoder.json":
                try:
                    assert isinstance(json.loads(text), dict)
                except Exception:
                    raise ValueError("has an encoder.json that is not GPT-2's JSON vocabulary") from None
except ValueError as e:
    print(f"--bpe-model '{path}' ({kind}) {e}")
PY
)" || die "cannot check --bpe-model '$path' (run scripts/setup_env.sh)"
  [ -z "$err" ] || die "$err"
}
