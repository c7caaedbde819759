#!/usr/bin/env bash
# Masked-LM pretraining of one RoBERTa arch, in two phases as in Pande et al.
# §5.1: length 128, then a short phase at length 512 (Devlin et al.'s recipe).
#
# Usage: scripts/pretrain-bert.sh ARCH [--data DIR] [--save-dir DIR]
#            [--updates N] [--updates-512 N] [--batch-size B] [--update-freq U]
#            [--lr LR] [--warmup N] [--lengths L1,L2] [--max-positions N]
#            [--cpu] [--dry-run]
#            [-- FAIRSEQ_ARGS...]
#
# ARCH is a RoBERTa arch of this plugin (roberta_local_base, roberta_band6,
# roberta_band6_120_tied, roberta_dam_u, ...; `fairseq-local configs`) or
# fairseq's own roberta_base / roberta_large (the stock full-attention model,
# e.g. to start Adaptive Axis Attention from: fairseq-local convert-roberta).
# Defaults (the paper's settings):
#   --data DIR         data-bin/bert-corpus (scripts/prepare-bert-corpus.sh)
#   --save-dir DIR     runs/bert/ARCH; phase 1 in DIR/lenL1, phase 2 in DIR/lenL2
#   --updates N        300000 updates at length L1
#   --updates-512 N    1000 further updates at length L2 (0: no second phase)
#   --lengths L1,L2    128,512: block lengths (--tokens-per-sample) of the phases
#   --batch-size B     32 sequences per GPU and step, and
#   --update-freq U    64, i.e. 2K sequences per update on one GPU (Pande et
#                      al. §5.1); with G GPUs use U = 2048 / (32 G)
#   --lr LR            2e-4 peak, --warmup N 10000 updates, then linear decay
#                      to 0 at the last update (Pande et al. §5.1: lr in
#                      {1e-4, 2e-4}, 10K warm-up)
#   --max-positions N  512 (both phases build the same model; >= L1 and L2)
# Optimiser: Adam (0.9, 0.98), eps 1e-6, weight decay 0.01 (fairseq's RoBERTa
# recipe). The paper used LAMB, which needs apex; pass it after "--" if you
# have apex (--optimizer lamb ...). Criterion masked_lm_with_sparsity, which
# adds the DAM/AAA/gate penalties (--dam-lambda ..., after "--") and is plain
# masked_lm for fixed layouts. --cpu trains on the CPU (small runs). Anything
# after "--" goes to both phases' fairseq-train last and overrides these.
# TensorBoard logs in each phase's tb/; SAVE_DIR/checkpoint_last.pt links to
# the last phase's checkpoint (the model to fine-tune), and
# SAVE_DIR/checkpoint_best.pt to that phase's lowest dev loss (the model to
# fine-tune after training to a plateau, --patience N). Re-running resumes: a
# finished phase is skipped, an interrupted one resumes from its
# checkpoint_last.pt, and phase 2 starts from phase 1's last checkpoint.
# Prints one progress line on stderr (fairseq's output: stdout and SAVE_DIR/train.log); Ctrl-C is one
# line saying what a re-run does. On a shared CPU machine set OMP_NUM_THREADS to the free cores
# (docs/commands.md, "Threads on a shared machine").
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ARCH="" DATA="" SAVE="" UPD=300000 UPD512=1000 BSZ=32 UF=64 LR=2e-4 WARM=10000 MAXPOS=512 LENGTHS=128,512 CPU=0 DRY=0
parse_options "ARCH --data=DATA --save-dir=SAVE --updates=UPD --updates-512=UPD512 --batch-size=BSZ \
  --update-freq=UF --lr=LR --warmup=WARM --max-positions=MAXPOS --lengths=LENGTHS --cpu+CPU --dry-run+DRY \
  --=fairseq" "$@"
set -- ${REST[@]+"${REST[@]}"}
[ -n "$ARCH" ] || die "missing ARCH: a RoBERTa arch such as roberta_band6 (see --help)"
[[ "$LENGTHS" =~ ^[0-9]+,[0-9]+$ ]] || die "--lengths must be two lengths 'L1,L2', not '$LENGTHS'"
LEN1="${LENGTHS%,*}" LEN2="${LENGTHS#*,}"
require_int --updates "$UPD" 1
require_int --updates-512 "$UPD512" 0
require_int --batch-size "$BSZ" 1
require_int --update-freq "$UF" 1
require_int --warmup "$WARM" 0
require_int --max-positions "$MAXPOS" 1
for n in "$LEN1" "$LEN2"; do
  [ "$n" -le "$MAXPOS" ] || die "length $n exceeds --max-positions $MAXPOS (see --lengths)"
done
DATA="${DATA:-$FAIRSEQ_LOCAL_ROOT/data-bin/bert-corpus}"
SAVE="${SAVE:-$FAIRSEQ_LOCAL_ROOT/runs/bert/$ARCH}"
check_out_dir "$SAVE" "--save-dir"
check_run_dir_apart "$SAVE" "$DATA"
[ -f "$DATA/dict.txt" ] || die "no fairseq dictionary '$DATA/dict.txt' (run scripts/prepare-bert-corpus.sh first)"
require_roberta_archs "$ARCH"
TOTAL=$((UPD + UPD512))
[ "$WARM" -lt "$TOTAL" ] || die "--warmup $WARM must be smaller than the $TOTAL updates of both phases"

# phase NAME LENGTH MAX_UPDATE [RESTORE]: one fairseq-train run.
phase() {
  local name="$1" len="$2" max="$3" restore="$4" dir="$SAVE/$1"
  shift 4
  local cmd=(fairseq-train "$DATA" --user-dir "$USER_DIR" --task masked_lm --arch "$ARCH"
    --criterion masked_lm_with_sparsity --sample-break-mode complete
    --tokens-per-sample "$len" --max-positions "$MAXPOS"
    --optimizer adam --adam-betas "(0.9, 0.98)" --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 0.0
    --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARM" --total-num-update "$TOTAL"
    --max-update "$max" --batch-size "$BSZ" --update-freq "$UF" --skip-invalid-size-inputs-valid-test
    --save-dir "$dir" --tensorboard-logdir "$dir/tb" --log-format simple)
  [ "$CPU" = 0 ] || cmd+=(--cpu)
  # Phase 2 starts from phase 1's weights, optimiser and update count, unless
  # it already has a checkpoint of its own (then it resumes from that).
  if [ -n "$restore" ] && [ ! -f "$dir/checkpoint_last.pt" ]; then
    cmd+=(--restore-file "$restore" --reset-dataloader)
  fi
  cmd+=("$@")
  if [ "$DRY" = 1 ]; then print_command "${cmd[@]}"; return 0; fi
  # Resuming another model, or an unreadable checkpoint, is refused before
  # anything is written; a finished phase is skipped.
  train_run "$dir" "$ARCH $name" "pretraining $ARCH, $name: length $len up to update $max" "${cmd[@]}"
}

phase "len$LEN1" "$LEN1" "$UPD" "" "$@"
LAST="len$LEN1"
if [ "$UPD512" -gt 0 ]; then
  FIRST="$SAVE/len$LEN1/checkpoint_last.pt"
  [ "$DRY" = 1 ] || [ -f "$FIRST" ] || die "phase 1 left no $FIRST"
  phase "len$LEN2" "$LEN2" "$TOTAL" "$FIRST" "$@"
  LAST="len$LEN2"
fi
if [ "$DRY" = 0 ]; then  # SAVE_DIR/checkpoint_last.pt: the pretrained model, for fine-tuning
  [ -f "$SAVE/$LAST/checkpoint_last.pt" ] || die "pretraining left no $SAVE/$LAST/checkpoint_last.pt"
  ln -sfn "$LAST/checkpoint_last.pt" "$SAVE/checkpoint_last.pt"
  log "pretrained model: $SAVE/checkpoint_last.pt -> $LAST/checkpoint_last.pt"
  if [ -f "$SAVE/$LAST/checkpoint_best.pt" ]; then
    ln -sfn "$LAST/checkpoint_best.pt" "$SAVE/checkpoint_best.pt"
    log "lowest dev loss: $SAVE/checkpoint_best.pt -> $LAST/checkpoint_best.pt"
  fi
fi
