#!/usr/bin/env bash
# Analyse a trained run: dump the attention of every head, then the attention
# bias (Pande et al. §3.2), the head roles (Voita et al. 2019 §4-5), gradient
# sensitivity (§3.1) and Hidden Token Attribution per head (Pascual et al.), each with its JSON, Markdown table and
# the papers' figures. Works on NMT and RoBERTa runs. Idempotent: a re-run
# skips the steps whose checkpoint, input and options are unchanged.
#
# Usage: scripts/analyze.sh RUN_DIR [--checkpoint NAME] [--data DIR]
#            [--conllu FILE | --text FILE] [--out DIR] [--max-sentences N]
#            [--hta-sentences N] [--hta-max-len N] [--no-input] [-- OPTIONS...]
#
# RUN_DIR          a training run (fairseq --save-dir), e.g. runs/demo/f.
# --checkpoint     checkpoint file in RUN_DIR (default checkpoint_best.pt).
# --data DIR       the data folder (default: the one the run was trained on).
# --conllu FILE    sentences with gold syntax (default DATA/raw/test.src.conllu,
#                  which scripts/prepare-synthetic.sh writes); or --text FILE,
#                  whitespace-tokenised sentences (no syntactic scores).
# --out DIR        default RUN_DIR/analysis.
# --max-sentences  the first N sentences (default 200).
# --hta-sentences  HTA on the first N sentences only (default 50): its input
#                  contribution costs T x d forward passes a batch.
# --hta-max-len    longest sentence for HTA, in tokens (default: the model's
#                  head dimension, Pascual et al. §5).
# --no-input       HTA without the input contribution (its costly part).
# OPTIONS          passed to every fairseq-local command that loads the model,
#                  e.g. --bpe sentencepiece --bpe-model FILE.model.
#
# Output: OUT/attention.pt, OUT/{bias,roles,sensitivity,hta}.{json,md} and the PNG figures.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUN="" CKPT=checkpoint_best.pt DATA="" CONLLU="" TEXT="" OUT="" N=200 HTA_N=50 HTA_LEN="" NO_INPUT=0
parse_options "RUN --checkpoint=CKPT --data=DATA --conllu=CONLLU --text=TEXT --out=OUT --max-sentences=N \
  --hta-sentences=HTA_N --hta-max-len=HTA_LEN --no-input+NO_INPUT --" "$@"
EXTRA=(${REST[@]+"${REST[@]}"})
[ -n "$RUN" ] || die "missing RUN_DIR (see --help)"
[ -d "$RUN" ] || die "no run directory '$RUN'"
ckpt="$RUN/$CKPT"
[ -f "$ckpt" ] || die "no checkpoint '$ckpt' (see --checkpoint)"
[[ "$N" =~ ^[1-9][0-9]*$ ]] || die "--max-sentences must be a positive integer, not '$N'"
[[ "$HTA_N" =~ ^[1-9][0-9]*$ ]] || die "--hta-sentences must be a positive integer, not '$HTA_N'"
[ -z "$HTA_LEN" ] || [[ "$HTA_LEN" =~ ^[1-9][0-9]*$ ]] || die "--hta-max-len must be a positive integer, not '$HTA_LEN'"
[ -z "$CONLLU" ] || [ -z "$TEXT" ] || die "give --conllu or --text, not both"
if [ -z "$DATA" ]; then
  inspect_checkpoint "$ckpt" DATA=data || die "cannot read '$ckpt' (not a fairseq checkpoint, or truncated)"
fi
if [ -z "$CONLLU" ] && [ -z "$TEXT" ]; then
  CONLLU="$DATA/raw/test.src.conllu"
  [ -f "$CONLLU" ] || die "no $CONLLU: give --conllu FILE or --text FILE"
fi
INPUT=(--conllu "$CONLLU"); src="$CONLLU"
[ -z "$TEXT" ] || { INPUT=(--text "$TEXT"); src="$TEXT"; }
[ -f "$src" ] || die "no input file '$src'"
# A tokeniser given to the commands (--bpe-model PATH after "--") is checked
# before any work.
BPE_KIND=auto BPE_MODEL="" prev=""
for a in ${EXTRA[@]+"${EXTRA[@]}"}; do
  case "$prev" in --bpe) BPE_KIND="$a" ;; --bpe-model) BPE_MODEL="$a" ;; esac
  case "$a" in --bpe=*) BPE_KIND="${a#*=}" ;; --bpe-model=*) BPE_MODEL="${a#*=}" ;; esac
  prev="$a"
done
case "$BPE_KIND" in auto|gpt2|sentencepiece) ;; *) BPE_MODEL="" ;; esac
[ -z "$BPE_MODEL" ] || check_bpe_model "$BPE_KIND" "$BPE_MODEL"
OUT="${OUT:-$RUN/analysis}"
# The output folder: not the run or the data folder, and none of its outputs
# is an input file.
check_out_dir "$OUT" "--out"
[ "$(_abspath "$OUT")" != "$(_abspath "$RUN")" ] || die "--out '$OUT' is the run folder: give another output folder"
check_apart "$OUT" "$DATA"
case "$(_abspath "$RUN")/" in "$(_abspath "$OUT")"/*) die "--out '$OUT' holds the run folder '$RUN': give another output folder" ;; esac
OUT_FILES=(attention.pt {bias,sensitivity,hta}.{json,md})
for f in "$ckpt" "$src" "${EXTRA[@]}"; do
  [ -f "$f" ] || continue
  [ "$(_abspath "$(dirname "$f")")" = "$(_abspath "$OUT")" ] || continue
  case " ${OUT_FILES[*]} " in *" $(basename "$f") "*) die "input '$f' is one of the outputs in '$OUT': give another --out" ;; esac
  case "$f" in *.png) die "input '$f' is one of the outputs in '$OUT': give another --out" ;; esac
done
mkdir -p "$OUT"
MODEL=(--path "$ckpt" --data "$DATA" "${INPUT[@]}" "${EXTRA[@]}")
HTA=(--max-sentences "$HTA_N")
[ "$NO_INPUT" = 0 ] || HTA+=(--no-input)
[ -z "$HTA_LEN" ] || HTA+=(--max-len "$HTA_LEN")

# The data folder's dictionaries: the models read them.
shopt -s nullglob; DICTS=("$DATA"/dict*.txt); shopt -u nullglob

# step NAME OUTPUT COMMAND... : run COMMAND unless NAME's stamp matches every
# input it reads (the checkpoint, the sentences, the dictionaries, each file
# among its arguments, e.g. the dump for bias or a --bpe-model), its options
# (--max-sentences, ...) and OUTPUT.
step() {
  local name="$1" output="$2" a; shift 2
  local inputs=("$ckpt" "$src" ${DICTS[@]+"${DICTS[@]}"})
  for a in "$@"; do [ "$a" = "$output" ] || [ ! -f "$a" ] || inputs+=("$a"); done
  echo "$*" > "$OUT/.$name.options"
  if step_done "$OUT/.$name.done" "${inputs[@]}" "$OUT/.$name.options" "$output"; then
    log "$name: up to date ($output)"
    return 0
  fi
  log "$name"
  rm -f "$OUT/.$name.done"
  "$@" || die "$name failed"
  step_finish "$OUT/.$name.done" "${inputs[@]}" "$OUT/.$name.options" "$output"
}

step dump "$OUT/attention.pt" fairseq-local attention dump "${MODEL[@]}" --max-sentences "$N" --out "$OUT/attention.pt"
step bias "$OUT/bias.json" fairseq-local analyze bias "$OUT/attention.pt" --out "$OUT"
step roles "$OUT/roles.json" fairseq-local analyze roles "$OUT/attention.pt" --out "$OUT"
step sensitivity "$OUT/sensitivity.json" fairseq-local analyze sensitivity "${MODEL[@]}" --max-sentences "$N" --out "$OUT"
step hta "$OUT/hta.json" fairseq-local analyze hta "${MODEL[@]}" "${HTA[@]}" --out "$OUT"
log "analysis of $ckpt in $OUT: bias.md, roles.md, sensitivity.md, hta.md and the figures (*.png)"
