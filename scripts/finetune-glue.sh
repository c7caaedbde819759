#!/usr/bin/env bash
# Fine-tune a pretrained (or converted) model on one GLUE task with fairseq-train.
#
# Usage: scripts/finetune-glue.sh --data DIR/TASK-bin --save-dir DIR
#            [--checkpoint PRETRAINED.pt] [--task TASK] [--arch ARCH]
#            [--recipe roberta|sparsebert|aaa] [--criterion NAME]
#            [--num-classes N] [--regression-target] [--classification-head-name NAME]
#            [--lr LR] [--batch-size N] [--max-epoch N] [--max-update N]
#            [--max-positions N] [--aaa-alpha A] [--aaa-target RHO] [--aaa-schedule linear|constant]
#            [--cpu] [--dry-run] [-- FAIRSEQ_ARGS...]
# --data: a folder written by scripts/prepare-glue.sh (input0/, input1/, label/).
# --task: the GLUE task (default: the --data folder's name without "-bin"); it
#     sets --num-classes (MNLI 3, STS-B 1 with --regression-target, else 2)
#     and the per-task hyperparameters.
# --checkpoint: the pretrained model, loaded with --finetune-from-model (the
#     classification head is new; re-running resumes from SAVE_DIR/checkpoint_last.pt).
# --arch: default the checkpoint's arch (another one is an error: convert the
#     checkpoint with fairseq-local convert-roberta), which also gives the
#     attention layout, mask mode and --max-positions; without a checkpoint
#     roberta_local_base and 512. --criterion: default
#     sentence_prediction_with_sparsity (fairseq's sentence_prediction plus the
#     sparsity terms of learned masks).
# Recipes:
#   roberta (default): fairseq's RoBERTa GLUE recipe (examples/roberta,
#     README.glue.md): Adam (0.9, 0.98), eps 1e-6, weight decay 0.1, no clipping,
#     polynomial decay with 6% warm-up, 10 epochs, dropout 0.1, lr 1e-5 (RTE,
#     STS-B, WNLI: 2e-5), batch 16 (CoLA, MRPC, STS-B, RTE, WNLI) or 32,
#     --max-positions 512, --max-tokens 4400, fp16 on GPU. On the official
#     training sets the schedule is fairseq's published one (e.g. RTE: 2036
#     updates, 122 warm-up); on other data, 10 epochs of the data's batches.
#   sparsebert: SparseBERT (Shi et al. 2021) Appendix C, Table 4: batch 32,
#     weight decay 0.01 (of 0.1, 0.01), warm-up proportion 0.1, linear decay,
#     3 epochs, lr 2e-5 (searched in 1e-5, 1.5e-5, 2e-5, 3e-5, 4e-5, 5e-5),
#     with BERT's Adam (0.9, 0.999), eps 1e-6, clipping 1.0.
#   aaa: Adaptive Axis Attention (§3.1, §4): 30k updates of batch 128 (32 per
#     device on 4 devices: --batch-size 32 --update-freq 4), Hugging Face's
#     defaults (Adam (0.9, 0.999), eps 1e-8, lr 5e-5, linear decay, no warm-up,
#     no weight decay, clipping 1.0), and the hinge loss alpha*max(0, rho_target - rho)
#     (Eq. 10) with --aaa-target RHO (required) and --aaa-alpha A (default 1.0),
#     alpha rising linearly to A at half the updates (--aaa-schedule linear,
#     the default) or constant. Use it with --arch roberta_aaa and a converted
#     full-attention checkpoint (fairseq-local convert-roberta).
# Sentence pairs: RoBERTa's <s> A </s> </s> B </s>; a checkpoint with segment embeddings
# and absolute positions (a BERT from fairseq-local convert-hf) gets BERT's <s> A </s> B </s>.
# --max-epoch / --max-update override the recipe's length (the decay and the
# warm-up follow). Anything after "--" is passed to fairseq-train last, so it
# overrides these defaults. Writes SAVE_DIR/{checkpoint_best.pt,
# checkpoint_last.pt,train.log,command.sh} and TensorBoard logs in SAVE_DIR/tb.
# Prints one progress line on stderr (fairseq's output: stdout and SAVE_DIR/train.log); Ctrl-C is one
# line saying what a re-run does. On a shared CPU machine set OMP_NUM_THREADS to the free cores
# (docs/commands.md, "Threads on a shared machine").
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA="" SAVE="" CKPT="" TASK="" ARCH="" RECIPE=roberta CRITERION=sentence_prediction_with_sparsity
NCLS="" REGRESSION=0 HEAD="" LR="" BSZ="" EPOCHS="" MAXUPD="" MAXPOS="" CPU=0 DRY=0
AAA_ALPHA=1.0 AAA_TARGET="" AAA_SCHEDULE=linear
parse_options "--data=DATA --save-dir=SAVE --checkpoint=CKPT --task=TASK --arch=ARCH --recipe=RECIPE \
  --criterion=CRITERION --num-classes=NCLS --regression-target+REGRESSION --classification-head-name=HEAD --lr=LR \
  --batch-size=BSZ --max-epoch=EPOCHS --max-update=MAXUPD --max-positions=MAXPOS --aaa-alpha=AAA_ALPHA \
  --aaa-target=AAA_TARGET --aaa-schedule=AAA_SCHEDULE --cpu+CPU --dry-run+DRY --=fairseq" "$@"
set -- ${REST[@]+"${REST[@]}"}
[ -n "$DATA" ] && [ -n "$SAVE" ] || die "--data and --save-dir are required (see --help)"
[ -f "$DATA/input0/dict.txt" ] && [ -f "$DATA/input0/train.idx" ] \
  || die "no GLUE task data in '$DATA' (expected input0/, label/: run scripts/prepare-glue.sh)"
[ -z "$CKPT" ] || [ -f "$CKPT" ] || [ "$DRY" = 1 ] || die "no checkpoint '$CKPT'"
check_out_dir "$SAVE" "--save-dir"
check_run_dir_apart "$SAVE" "$DATA"
# fairseq-train writes SAVE_DIR/checkpoint*.pt: the pretrained model is not one of them.
if [ -n "$CKPT" ] && [ "$(_abspath "$(dirname "$CKPT")")" = "$(_abspath "$SAVE")" ]; then
  case "$(basename "$CKPT")" in checkpoint*.pt) die "--checkpoint '$CKPT' is in --save-dir '$SAVE', where fine-tuning writes its checkpoints: give another --save-dir" ;; esac
fi
# The pretrained model decides the arch, its attention layout and mode, and the
# positions: fixed-mask archs share their state-dict keys with the all-global
# one, so a different --arch would load "strictly" and fine-tune other heads.
# The model's size (layers, widths, heads) comes from the checkpoint too, so
# that fine-tuning builds the model that was pretrained or converted.
ATTN=()
if [ -f "$CKPT" ]; then
  inspect_checkpoint "$CKPT" CK_TASK=task CK_ARCH=arch || die "'$CKPT' is not a fairseq checkpoint"
  case "${CK_TASK:--}" in
    masked_lm|sentence_prediction|multilingual_masked_lm|sentence_ranking|-) ;;
    translation*) die "'$CKPT' is a translation checkpoint (arch $CK_ARCH), not a RoBERTa model" ;;
    *) die "'$CKPT' is a $CK_TASK checkpoint (arch $CK_ARCH), not a RoBERTa model" ;;
  esac
  [ -n "$ARCH" ] || ARCH="$CK_ARCH"
  [ "$ARCH" = "$CK_ARCH" ] || die "--arch $ARCH differs from the checkpoint's arch $CK_ARCH (convert it with fairseq-local convert-roberta)"
  inspect_checkpoint "$CKPT" CK_POS=max_positions CK_LAYOUT=attn_layout CK_MODE=mask_mode CK_LAYERS=encoder_layers \
    CK_DIM=encoder_embed_dim CK_FFN=encoder_ffn_embed_dim CK_HEADS=encoder_attention_heads || die "$INSPECT_ERROR"
  # BERT's options (--segment-embeddings, --layernorm-eps, --positions): this plugin's archs only
  inspect_checkpoint "$CKPT" CK_SEG=segment_embeddings || CK_SEG=""
  inspect_checkpoint "$CKPT" CK_EPS=layernorm_eps CK_POSITIONS=positions || { CK_EPS=""; CK_POSITIONS=""; }
  [ -n "$MAXPOS" ] || MAXPOS="$CK_POS"
  [ -z "$CK_LAYOUT" ] || ATTN+=(--attn-layout "$CK_LAYOUT")
  [ -z "$CK_MODE" ] || ATTN+=(--mask-mode "$CK_MODE")
  [ -z "$CK_LAYERS" ] || ATTN+=(--encoder-layers "$CK_LAYERS")
  [ -z "$CK_DIM" ] || ATTN+=(--encoder-embed-dim "$CK_DIM")
  [ -z "$CK_FFN" ] || ATTN+=(--encoder-ffn-embed-dim "$CK_FFN")
  [ -z "$CK_HEADS" ] || ATTN+=(--encoder-attention-heads "$CK_HEADS")
  [ "$CK_SEG" != True ] || ATTN+=(--segment-embeddings)
  [ -z "$CK_EPS" ] || ATTN+=(--layernorm-eps "$CK_EPS")
  [ -z "$CK_POSITIONS" ] || ATTN+=(--positions "$CK_POSITIONS")
fi
ARCH="${ARCH:-roberta_local_base}" MAXPOS="${MAXPOS:-512}"
TASK="${TASK:-$(basename "${DATA%/}")}"; TASK="${TASK%-bin}"
for v in "${NCLS:-1}" "${BSZ:-1}" "${EPOCHS:-1}" "${MAXUPD:-1}" "$MAXPOS"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "--num-classes, --batch-size, --max-epoch, --max-update and --max-positions take positive integers, not '$v'"
done

# Per task: classes, fairseq's lr and batch size, official training rows, and
# fairseq's published total and warm-up updates (README.glue.md; WNLI is not
# in fairseq's recipe: RTE's settings, schedule from the data).
case "$TASK" in
  CoLA)  C=2 T_LR=1e-5 T_BSZ=16 ROWS=8551   T_TOTAL=5336   T_WARM=320 ;;
  SST-2) C=2 T_LR=1e-5 T_BSZ=32 ROWS=67349  T_TOTAL=20935  T_WARM=1256 ;;
  MRPC)  C=2 T_LR=1e-5 T_BSZ=16 ROWS=3668   T_TOTAL=2296   T_WARM=137 ;;
  STS-B) C=1 T_LR=2e-5 T_BSZ=16 ROWS=5749   T_TOTAL=3598   T_WARM=214 ;;
  QQP)   C=2 T_LR=1e-5 T_BSZ=32 ROWS=363846 T_TOTAL=113272 T_WARM=28318 ;;
  MNLI)  C=3 T_LR=1e-5 T_BSZ=32 ROWS=392702 T_TOTAL=123873 T_WARM=7432 ;;
  QNLI)  C=2 T_LR=1e-5 T_BSZ=32 ROWS=104743 T_TOTAL=33112  T_WARM=1986 ;;
  RTE)   C=2 T_LR=2e-5 T_BSZ=16 ROWS=2490   T_TOTAL=2036   T_WARM=122 ;;
  WNLI)  C=2 T_LR=2e-5 T_BSZ=16 ROWS=635    T_TOTAL=""     T_WARM="" ;;
  *) [ -n "$NCLS" ] || die "unknown GLUE task '$TASK': give --task or --num-classes"
     C="" T_LR=1e-5 T_BSZ=16 ROWS=0 T_TOTAL="" T_WARM="" ;;
esac
NCLS="${NCLS:-$C}"
[ "$NCLS" != 1 ] || REGRESSION=1
N=$(python -m fairseq_local_data.glue count "$DATA/input0/train")

UPDATE_FREQ=1 CLIP=0.0 WD=0.1 BETAS="(0.9, 0.98)" EPS=1e-6 WARM_FRAC="" EXTRA=()
case "$RECIPE" in
  roberta) LR="${LR:-$T_LR}" BSZ="${BSZ:-$T_BSZ}" EPOCHS="${EPOCHS:-10}" WARM_FRAC=0.06 ;;
  sparsebert) LR="${LR:-2e-5}" BSZ="${BSZ:-32}" EPOCHS="${EPOCHS:-3}" WD=0.01 BETAS="(0.9, 0.999)" CLIP=1.0 WARM_FRAC=0.1 ;;
  aaa)
    [ -n "$AAA_TARGET" ] || die "--recipe aaa needs --aaa-target RHO (the target sparsity of Eq. 10)"
    LR="${LR:-5e-5}" BSZ="${BSZ:-32}" UPDATE_FREQ=4 WD=0.0 BETAS="(0.9, 0.999)" EPS=1e-8 CLIP=1.0 WARM_FRAC=0
    [ -n "$EPOCHS" ] || MAXUPD="${MAXUPD:-30000}" ;;
  *) die "unknown --recipe '$RECIPE' (roberta, sparsebert or aaa)" ;;
esac
# Schedule length: fairseq's published numbers on the official data, else
# epochs x batches per epoch (or --max-update).
if [ -n "$MAXUPD" ]; then
  TOTAL="$MAXUPD"
elif [ "$RECIPE" = roberta ] && [ -n "$T_TOTAL" ] && [ "$EPOCHS" = 10 ] && [ $((N * 10)) -ge $((ROWS * 9)) ]; then
  TOTAL="$T_TOTAL"
else
  TOTAL=$(( EPOCHS * ((N + BSZ * UPDATE_FREQ - 1) / (BSZ * UPDATE_FREQ)) ))
fi
if [ "$TOTAL" = "${T_TOTAL:-x}" ] && [ "$RECIPE" = roberta ]; then WARM="$T_WARM"
else WARM=$(awk -v f="$WARM_FRAC" -v t="$TOTAL" 'BEGIN { w = f * t; r = int(w); d = w - r
  if (d > 0.5 || (d == 0.5 && r % 2 == 1)) r++; print r }'); fi  # round half to even, as Python's round()

# A pair is RoBERTa's <s> A </s> </s> B </s> (--separator-token 2), or for a BERT
# (segment embeddings, absolute positions: convert-hf) [CLS] A [SEP] B [SEP]: <s> A </s> B </s>.
SEPARATOR=(--separator-token 2)
[ "${CK_SEG:-}" != True ] || [ "${CK_POSITIONS:-}" != absolute ] || SEPARATOR=()
cmd=(fairseq-train "$DATA" --user-dir "$USER_DIR" --task sentence_prediction --arch "$ARCH"
  --criterion "$CRITERION" --num-classes "$NCLS" --init-token 0 ${SEPARATOR[@]+"${SEPARATOR[@]}"}
  --max-positions "$MAXPOS" --batch-size "$BSZ" --max-tokens 4400 --required-batch-size-multiple 1
  --update-freq "$UPDATE_FREQ" --dropout 0.1 --attention-dropout 0.1
  --optimizer adam --adam-betas "$BETAS" --adam-eps "$EPS" --weight-decay "$WD" --clip-norm "$CLIP"
  --lr-scheduler polynomial_decay --lr "$LR" --total-num-update "$TOTAL" --warmup-updates "$WARM")
if [ -n "$EPOCHS" ] && [ -z "$MAXUPD" ]; then cmd+=(--max-epoch "$EPOCHS"); else cmd+=(--max-update "$TOTAL"); fi
[ -z "$CKPT" ] || cmd+=(--finetune-from-model "$CKPT")
[ -z "$HEAD" ] || cmd+=(--classification-head-name "$HEAD")
if [ "$REGRESSION" = 1 ]; then cmd+=(--regression-target)
else cmd+=(--best-checkpoint-metric accuracy --maximize-best-checkpoint-metric); fi
if [ "$RECIPE" = aaa ]; then
  ALPHA_UPD=0; [ "$AAA_SCHEDULE" = constant ] || ALPHA_UPD=$((TOTAL / 2))
  case "$AAA_SCHEDULE" in linear|constant) ;; *) die "unknown --aaa-schedule '$AAA_SCHEDULE' (linear or constant)" ;; esac
  cmd+=(--aaa-alpha "$AAA_ALPHA" --aaa-target "$AAA_TARGET" --aaa-alpha-updates "$ALPHA_UPD")
fi
if [ "$CPU" = 1 ]; then cmd+=(--cpu)
else cmd+=(--fp16 --fp16-init-scale 4 --threshold-loss-scale 1 --fp16-scale-window 128 --find-unused-parameters); fi
cmd+=(--no-epoch-checkpoints --save-dir "$SAVE" --tensorboard-logdir "$SAVE/tb"
  --log-format simple --log-interval 100 ${ATTN[@]+"${ATTN[@]}"} "$@")
if [ "$DRY" = 1 ]; then print_command "${cmd[@]}"; exit 0; fi
# Resuming SAVE_DIR as another model, or from an unreadable checkpoint, is
# refused before anything is written; a run at its --max-update is skipped.
train_run "$SAVE" "$ARCH on $TASK" "fine-tuning $ARCH on $TASK ($N sentences; recipe $RECIPE: lr $LR, batch $BSZ x \
$UPDATE_FREQ, $TOTAL updates, $WARM warm-up) into $SAVE" "${cmd[@]}"
