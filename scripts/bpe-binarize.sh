#!/usr/bin/env bash
# Learn joint BPE on the training data, apply it to every split, and binarise
# with fairseq-preprocess (--joined-dictionary). Idempotent and resumable.
#
# Usage: scripts/bpe-binarize.sh --raw DIR --out DIR [--src L] [--tgt L]
#            [--merges N] [--splits "train valid test"] [--workers N] [--sentencepiece]
# Input:  DIR/{split}.{src,tgt}, tokenised text, one sentence per line.
# Output: OUT/bpe/{code,split.L}, OUT/{fairseq-preprocess files}, OUT/summary.txt
# Splits: train, valid, test and further test sets test1, test2, ... (given to
# fairseq-preprocess as --testpref test,test1,test2; they need test).
# --sentencepiece: a joint SentencePiece BPE model of N pieces (--merges N),
# OUT/bpe/spm.model, instead of N subword-nmt merges.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RAW="" OUT="" SRC=src TGT=tgt MERGES=8000 SPLITS="train valid test" WORKERS=2 SPM=0
while [ $# -gt 0 ]; do
  case "$1" in
    --raw|--out|--src|--tgt|--merges|--splits|--workers) needs_value "$@" ;;&
    --raw) RAW="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --src) SRC="$2"; shift 2 ;;
    --tgt) TGT="$2"; shift 2 ;;
    --merges) MERGES="$2"; shift 2 ;;
    --splits) SPLITS="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --sentencepiece) SPM=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ -n "$RAW" ] && [ -n "$OUT" ] || die "--raw and --out are required"
[[ "$MERGES" =~ ^[1-9][0-9]*$ ]] || die "--merges must be a positive integer, not '$MERGES'"
case " $SPLITS " in *" train "*) ;; *) die "--splits must include train" ;; esac
# Test splits, in fairseq-preprocess's order: test, test1, test2, ...
tests=()
for split in $SPLITS; do if [[ "$split" =~ ^test[0-9]*$ ]]; then tests+=("$split"); fi; done
for k in "${!tests[@]}"; do
  name=test; [ "$k" = 0 ] || name="test$k"
  case " ${tests[*]} " in *" $name "*) ;; *) die "--splits: test sets must be named test, test1, test2, ... without gaps ('$name' is missing)" ;; esac
done
[ -d "$RAW" ] || die "--raw: no folder '$RAW'"
for split in $SPLITS; do require_parallel "$RAW/$split.$SRC" "$RAW/$split.$TGT"; done
# OUT may hold RAW (prepare-synthetic.sh: OUT/raw), but is not RAW or inside
# it, and OUT/bpe, written here, does not hold it.
check_out_dir "$OUT" "--out"
[ "$(_abspath "$OUT")" != "$(_abspath "$RAW")" ] || die "--out '$OUT' is the --raw folder: give another output folder"
check_apart "$OUT/bpe" "$RAW"

BPE="$OUT/bpe"
WMT_PY=(python -m fairseq_local_data.wmt)
CODES="$BPE/codes"; [ "$SPM" = 0 ] || CODES="$BPE/spm.model"
mkdir -p "$BPE"
# Every stamp covers the step's inputs too: the settings (BPE.config), the raw
# text it reads, and the codes or encoded text.
settings="$BPE/.settings"
echo "src=$SRC tgt=$TGT merges=$MERGES sentencepiece=$SPM" > "$settings.new"
if cmp -s "$settings.new" "$settings"; then rm "$settings.new"; else mv "$settings.new" "$settings"; fi
if [ "$SPM" = 1 ]; then
  if ! step_done "$BPE/.spm.done" "$settings" "$RAW/train.$SRC" "$RAW/train.$TGT" "$CODES"; then
    log "training a joint SentencePiece model of $MERGES pieces on $RAW/train.{$SRC,$TGT}"
    "${WMT_PY[@]}" spm-train --input "$RAW/train.$SRC" "$RAW/train.$TGT" \
      --vocab-size "$MERGES" --model-prefix "$BPE/spm" --threads "$WORKERS"
    step_finish "$BPE/.spm.done" "$settings" "$RAW/train.$SRC" "$RAW/train.$TGT" "$CODES"
  fi
elif ! step_done "$BPE/.codes.done" "$settings" "$RAW/train.$SRC" "$RAW/train.$TGT" "$BPE/codes"; then
  log "learning $MERGES joint BPE merges on $RAW/train.{$SRC,$TGT}"
  subword-nmt learn-joint-bpe-and-vocab --input "$RAW/train.$SRC" "$RAW/train.$TGT" \
    -s "$MERGES" -o "$BPE/codes.tmp" \
    --write-vocabulary "$BPE/vocab.$SRC" "$BPE/vocab.$TGT"
  mv "$BPE/codes.tmp" "$BPE/codes"
  step_finish "$BPE/.codes.done" "$settings" "$RAW/train.$SRC" "$RAW/train.$TGT" "$BPE/codes"
fi
for split in $SPLITS; do
  for l in "$SRC" "$TGT"; do
    if ! step_done "$BPE/.$split.$l.done" "$CODES" "$RAW/$split.$l" "$BPE/$split.$l"; then
      if [ "$SPM" = 1 ]; then
        log "applying SentencePiece to $split.$l"
        "${WMT_PY[@]}" spm-encode --model "$CODES" "$RAW/$split.$l" "$BPE/$split.$l"
      else
        log "applying BPE to $split.$l"
        subword-nmt apply-bpe -c "$BPE/codes" --vocabulary "$BPE/vocab.$l" \
          --vocabulary-threshold 1 < "$RAW/$split.$l" > "$BPE/$split.$l.tmp"
        mv "$BPE/$split.$l.tmp" "$BPE/$split.$l"
      fi
      step_finish "$BPE/.$split.$l.done" "$CODES" "$RAW/$split.$l" "$BPE/$split.$l"
    fi
  done
done

bin_files=() bpe_files=()
for split in $SPLITS; do
  for l in "$SRC" "$TGT"; do bpe_files+=("$BPE/$split.$l"); done
  for l in "$SRC" "$TGT"; do bin_files+=("$OUT/$split.$SRC-$TGT.$l.idx"); done
done
if ! step_done "$OUT/.binarize.done" "$CODES" "${bpe_files[@]}" "$OUT/dict.$SRC.txt" "${bin_files[@]}"; then
  log "binarising into $OUT"
  prefs=(--trainpref "$BPE/train")
  for split in $SPLITS; do
    case "$split" in
      train) ;;
      valid) prefs+=(--validpref "$BPE/valid") ;;
      test|test[0-9]*) ;;
      *) die "unknown split '$split' (train, valid, test, test1, ...)" ;;
    esac
  done
  if [ "${#tests[@]}" -gt 0 ]; then
    testprefs="$BPE/test"
    for ((k = 1; k < ${#tests[@]}; k++)); do testprefs+=",$BPE/test$k"; done
    prefs+=(--testpref "$testprefs")
  fi
  rm -f "$OUT"/dict.*.txt
  fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" "${prefs[@]}" \
    --destdir "$OUT" --joined-dictionary --workers "$WORKERS" > "$OUT/preprocess.out" 2>&1 \
    || binarise_failed "$OUT/preprocess.out" "$OUT"/*."$SRC-$TGT".*.bin "$OUT"/*."$SRC-$TGT".*.idx "$OUT"/dict.*.txt
  step_finish "$OUT/.binarize.done" "$CODES" "${bpe_files[@]}" "$OUT/dict.$SRC.txt" "${bin_files[@]}"
fi

{
  if [ "$SPM" = 1 ]; then echo "sentencepiece_pieces $MERGES"; else echo "bpe_merges $MERGES"; fi
  echo "dictionary_size $(wc -l < "$OUT/dict.$SRC.txt")"
  for split in $SPLITS; do echo "sentences_$split $(wc -l < "$RAW/$split.$SRC")"; done
} > "$OUT/summary.txt.tmp"
mv "$OUT/summary.txt.tmp" "$OUT/summary.txt"
log "data ready in $OUT ($(tr '\n' ' ' < "$OUT/summary.txt"))"
