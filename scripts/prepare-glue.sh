#!/usr/bin/env bash
# Prepare GLUE tasks for fine-tuning, as fairseq's RoBERTa GLUE recipe does
# (examples/roberta/preprocess_GLUE_tasks.sh). Idempotent and resumable.
#
# Usage: scripts/prepare-glue.sh --glue-dir DIR --src-dict DICT [--out DIR]
#            [--bpe gpt2|sentencepiece|wordpiece|byte_bpe|none] [--bpe-model PATH] [--tasks "CoLA SST-2 ..."]
#            [--workers N]
# Input:  the official GLUE folder (the GLUE download script's layout):
#         DIR/TASK/{train,dev,test}.tsv, MNLI with dev_matched, dev_mismatched,
#         test_matched and test_mismatched, and optionally
#         DIR/diagnostic/diagnostic.tsv (AX, prepared as MNLI's third test set).
#         `python -m fairseq_local_data.glue_fake --out DIR` writes a stand-in.
# --src-dict: the pretraining dictionary (dict.txt of the masked-LM data).
# --bpe: gpt2 (RoBERTa's byte-level BPE; --bpe-model is a folder with GPT-2's
#         encoder.json and vocab.bpe, default data-bin/gpt2-bpe, which
#         scripts/setup_env.sh fills with `python -m fairseq_local_data.bpe
#         fetch-gpt2`), sentencepiece (--bpe-model is the .model file of the
#         pretraining corpus), wordpiece (--bpe-model is the vocab.txt of a
#         BERT written by fairseq-local convert-hf, which holds its dict.txt and
#         tokenizer_config.json), byte_bpe (--bpe-model is the folder of a
#         RoBERTa written by convert-hf: vocab.json and merges.txt) or none
#         (text already tokenised). Default: gpt2. All are those of
#         fairseq_local_data/bpe.py, as for the pretraining corpus.
# --tasks: default all nine (CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE WNLI).
# Output: OUT/TASK-bin/{input0,input1,label}/ (default OUT: data-bin/glue), the
#         layout fairseq's sentence_prediction task reads: the columns the
#         recipe cuts, BPE-encoded and binarised with fairseq-preprocess
#         --only-source (inputs with --srcdict DICT, labels with their own
#         dictionary; STS-B labels stay text, scaled from [0, 5] to [0, 1]).
#         Splits: train, valid (MNLI: valid = matched, valid1 = mismatched),
#         test (MNLI: test, test1, and test2 = AX). Intermediate files are in
#         OUT/processed/TASK/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

GLUE="" OUT="$FAIRSEQ_LOCAL_ROOT/data-bin/glue" DICT="" BPE=gpt2 BPE_MODEL="" WORKERS=2
TASKS="CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE WNLI"
while [ $# -gt 0 ]; do
  case "$1" in
    --glue-dir|--out|--src-dict|--bpe|--bpe-model|--tasks|--workers) needs_value "$@" ;;&
    --glue-dir) GLUE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --src-dict) DICT="$2"; shift 2 ;;
    --bpe) BPE="$2"; shift 2 ;;
    --bpe-model) BPE_MODEL="$2"; shift 2 ;;
    --tasks) TASKS="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ -n "$GLUE" ] || die "--glue-dir is required (the GLUE folder; see --help)"
[ -n "$DICT" ] || die "--src-dict is required (the pretraining dict.txt)"
[ -s "$DICT" ] || die "missing or empty dictionary: $DICT"
case "$BPE" in
  gpt2) BPE_MODEL="${BPE_MODEL:-$FAIRSEQ_LOCAL_ROOT/data-bin/gpt2-bpe}"
        [ -f "$BPE_MODEL/encoder.json" ] && [ -f "$BPE_MODEL/vocab.bpe" ] \
          || die "--bpe gpt2: no encoder.json and vocab.bpe in '$BPE_MODEL' (give --bpe-model DIR, or run: python -m fairseq_local_data.bpe fetch-gpt2 --dest '$BPE_MODEL')" ;;
  sentencepiece) [ -f "$BPE_MODEL" ] || die "--bpe sentencepiece needs --bpe-model FILE.model" ;;
  wordpiece) [ -f "$BPE_MODEL" ] || die "--bpe wordpiece needs --bpe-model VOCAB.txt (BERT's WordPiece vocabulary)" ;;
  byte_bpe) [ -d "$BPE_MODEL" ] || die "--bpe byte_bpe needs --bpe-model DIR (with vocab.json and merges.txt)" ;;
  none) ;;
  *) die "unknown --bpe '$BPE' (gpt2, sentencepiece, wordpiece, byte_bpe or none)" ;;
esac
[ "$BPE" = none ] || check_bpe_model "$BPE" "$BPE_MODEL"
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer, not '$WORKERS'"
# OUT: not the GLUE folder (nor inside it, nor holding it), and the folders it
# rewrites (processed/, TASK-bin/) hold none of the inputs.
check_out_dir "$OUT" "--out"
check_apart "$OUT" "$GLUE"
for d in "$OUT/processed" $(for t in $TASKS; do echo "$OUT/$t-bin"; done); do check_apart "$d" "$DICT" "$BPE_MODEL"; done

GLUE_PY=(python -m fairseq_local_data.glue)
# A missing task folder or TSV is reported before any work is done.
# shellcheck disable=SC2086
"${GLUE_PY[@]}" check --glue-dir "$GLUE" --tasks $TASKS || exit 1

MODEL_FILES=("$DICT")
case "$BPE" in
  gpt2) MODEL_FILES+=("$BPE_MODEL/encoder.json" "$BPE_MODEL/vocab.bpe") ;;
  sentencepiece|wordpiece) MODEL_FILES+=("$BPE_MODEL") ;;
  byte_bpe) MODEL_FILES+=("$BPE_MODEL/vocab.json" "$BPE_MODEL/merges.txt") ;;
esac

# bin_files TASK : the files fairseq-preprocess writes for TASK.
bin_files() {
  local f b
  for f in "$OUT/processed/$1"/*.input[0-9]; do
    b="$(basename "$f")"; echo "$OUT/$1-bin/${b#*.}/${b%%.*}.idx"
  done
  if [ "$1" = STS-B ]; then echo "$OUT/$1-bin/label/train.label" "$OUT/$1-bin/label/valid.label"
  else echo "$OUT/$1-bin/label/train.idx"; fi
}

n=0; total=$(echo $TASKS | wc -w); pending=()
for TASK in $TASKS; do
  n=$((n + 1))
  WORK="$OUT/processed/$TASK"
  mkdir -p "$WORK"
  tsvs=("$GLUE/$TASK"/*.tsv)
  [ "$TASK" != MNLI ] || [ ! -f "$GLUE/diagnostic/diagnostic.tsv" ] || tsvs+=("$GLUE/diagnostic/diagnostic.tsv")

  # 1. The columns of fairseq's recipe: SPLIT.raw.inputK and SPLIT.label.
  if ! step_done "$WORK/.extract.done" "${tsvs[@]}" "$WORK"/*.raw.input* "$WORK"/*.label; then
    log "[$n/$total] $TASK: reading $GLUE/$TASK"
    rm -f "$WORK"/*.raw.input* "$WORK"/*.label "$WORK"/*.input*
    "${GLUE_PY[@]}" extract --glue-dir "$GLUE" --task "$TASK" --out "$WORK"
    step_finish "$WORK/.extract.done" "${tsvs[@]}" "$WORK"/*.raw.input* "$WORK"/*.label
  fi

  # 2. BPE.
  raws=("$WORK"/*.raw.input*)
  encoded=()
  for f in "${raws[@]}"; do encoded+=("${f/.raw./.}"); done
  if ! step_done "$WORK/.bpe.done" "${MODEL_FILES[@]}" "${raws[@]}" "${encoded[@]}"; then
    log "[$n/$total] $TASK: BPE ($BPE) of ${#raws[@]} files"
    "${GLUE_PY[@]}" encode --bpe "$BPE" ${BPE_MODEL:+--bpe-model "$BPE_MODEL"} \
      --inputs "${raws[@]}" --outputs "${encoded[@]}"
    step_finish "$WORK/.bpe.done" "${MODEL_FILES[@]}" "${raws[@]}" "${encoded[@]}"
  fi
  # shellcheck disable=SC2046
  step_done "$OUT/$TASK-bin/.binarize.done" "${MODEL_FILES[@]}" "$WORK"/*.input[0-9] "$WORK"/*.label \
    $(bin_files "$TASK") || pending+=("$TASK")
done

# 3. fairseq-preprocess --only-source into TASK-bin/{input0,input1,label}
# (one process for all tasks: fairseq is imported once).
if [ "${#pending[@]}" -gt 0 ]; then
  log "binarising ${pending[*]} into $OUT/TASK-bin (log: $OUT/processed/preprocess.out)"
  for TASK in "${pending[@]}"; do rm -rf "${OUT:?}/$TASK-bin"; done
  "${GLUE_PY[@]}" binarize --tasks "${pending[@]}" --out "$OUT" --src-dict "$DICT" \
    --workers "$WORKERS" > "$OUT/processed/preprocess.out" 2>&1 \
    || { for TASK in "${pending[@]}"; do rm -rf "${OUT:?}/$TASK-bin"; done; binarise_failed "$OUT/processed/preprocess.out"; }
  for TASK in "${pending[@]}"; do
    # shellcheck disable=SC2046
    step_finish "$OUT/$TASK-bin/.binarize.done" "${MODEL_FILES[@]}" "$OUT/processed/$TASK"/*.input[0-9] \
      "$OUT/processed/$TASK"/*.label $(bin_files "$TASK")
  done
fi
for TASK in $TASKS; do
  log "$TASK ready: $OUT/$TASK-bin ($("${GLUE_PY[@]}" count "$OUT/$TASK-bin/input0/train") train sentences)"
done
