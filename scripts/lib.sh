#!/usr/bin/env bash
# Shared helpers for the pipeline scripts (sourced, not run).
# Steps are idempotent: a step writes its outputs, then a stamp file recording
# the outputs' line counts and checksums; a re-run skips a step whose stamp still
# matches its outputs and redoes one that was interrupted or altered.

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
