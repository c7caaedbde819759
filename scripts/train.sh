#!/usr/bin/env bash
# Train one configuration with fairseq-train and this plugin.
#
# Usage: scripts/train.sh --data DIR --arch ARCH --save-dir DIR [--dry-run] [-- FAIRSEQ_ARGS...]
#
# ARCH is a fairseq arch, a paper letter (a-l) or a configuration name with or
# without "transformer_" (fairseq-local configs). Resuming SAVE_DIR as another
# model (other arch, layout or mask options), or from an unreadable
# checkpoint, is refused before anything is written.
#
# Defaults are the training setup of Pande et al. (§5.1): Adam with
# betas (0.9, 0.997) and eps 1e-9, the inverse-sqrt schedule with 16k warmup
# updates (peak lr 3.5e-4 = 512^-0.5 * 16000^-0.5, Vaswani et al.'s formula),
# label smoothing 0.1, shared embeddings over the joined dictionary. Anything
# after "--" is passed to fairseq-train last, so it overrides these defaults.
# Writes SAVE_DIR/{checkpoint*.pt,train.log,command.sh} and TensorBoard logs
# under SAVE_DIR/tb. Re-running resumes from SAVE_DIR/checkpoint_last.pt; a run
# that has reached its --max-update is skipped.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA="" ARCH="" SAVE="" DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --data|--arch|--save-dir) needs_value "$@" ;;&
    --data) DATA="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --save-dir) SAVE="$2"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (fairseq options go after '--'; see --help)" ;;
  esac
done
[ -n "$DATA" ] && [ -n "$ARCH" ] && [ -n "$SAVE" ] || die "--data, --arch and --save-dir are required"
[ -f "$DATA/dict.src.txt" ] || ls "$DATA"/dict.*.txt >/dev/null 2>&1 || die "no fairseq dictionary in '$DATA' (run a prepare script first)"
check_out_dir "$SAVE" "--save-dir"
check_run_dir_apart "$SAVE" "$DATA"
# A paper letter or configuration name -> its arch (README, Architectures);
# an unknown name is one line, not fairseq's usage. (train-wmt14.sh has
# resolved it already.)
if [ "${FAIRSEQ_LOCAL_RESOLVED_ARCH:-}" != "$ARCH" ]; then ARCH="$(resolve_arch "$ARCH")"; fi

cmd=(fairseq-train "$DATA" --user-dir "$USER_DIR" --arch "$ARCH"
  --share-all-embeddings
  --optimizer adam --adam-betas "(0.9, 0.997)" --adam-eps 1e-9
  --lr 3.5e-4 --lr-scheduler inverse_sqrt --warmup-updates 16000 --warmup-init-lr 1e-7
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1
  --save-dir "$SAVE" --tensorboard-logdir "$SAVE/tb" --log-format simple "$@")
if [ "$DRY" = 1 ]; then printf '%q ' "${cmd[@]}"; echo; exit 0; fi
# Resuming another model, or a checkpoint that cannot be read, is refused
# before command.sh or train.log is touched.
resume="$(resumed_checkpoint "$SAVE" "${cmd[@]:1}")"
[ -z "$resume" ] || check_resume "$resume" "${cmd[@]:1}"
# fairseq-train, re-run on a finished --max-update run, would train one more
# update: a finished run is left as it is.
max_update="" prev=""
for a in "$@"; do
  [ "$prev" != --max-update ] || max_update="$a"
  case "$a" in --max-update=*) max_update="${a#*=}" ;; esac
  prev="$a"
done
if [[ "$max_update" =~ ^[1-9][0-9]*$ ]] && [ -f "$SAVE/checkpoint_last.pt" ]; then
  trained="$(checkpoint_updates "$SAVE/checkpoint_last.pt")"
  if [ "$trained" -ge "$max_update" ]; then
    log "$SAVE is trained ($trained of $max_update updates): nothing to do"
    exit 0
  fi
fi
mkdir -p "$SAVE"
{ printf '%q ' "${cmd[@]}"; echo; } > "$SAVE/command.sh"
log "training $ARCH into $SAVE (log: $SAVE/train.log)"
# The whole output goes to train.log (appended, so resumed runs keep their history).
"${cmd[@]}" 2>&1 | tee -a "$SAVE/train.log"
