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
# Prints one progress line on stderr (fairseq's output: stdout and SAVE_DIR/train.log); Ctrl-C is one
# line saying what a re-run does. On a shared CPU machine set OMP_NUM_THREADS to the free cores
# (docs/commands.md, "Threads on a shared machine").
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA="" ARCH="" SAVE="" DRY=0
parse_options "--data=DATA --arch=ARCH --save-dir=SAVE --dry-run+DRY --=fairseq" "$@"
set -- ${REST[@]+"${REST[@]}"}
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
if [ "$DRY" = 1 ]; then print_command "${cmd[@]}"; exit 0; fi
# Resuming another model, or a checkpoint that cannot be read, is refused
# before command.sh or train.log is touched; a run at its --max-update is
# left as it is.
train_run "$SAVE" "$ARCH" "training $ARCH into $SAVE" "${cmd[@]}"
