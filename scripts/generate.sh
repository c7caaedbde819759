#!/usr/bin/env bash
# Translate a subset with fairseq-generate and score it with sacreBLEU.
#
# Usage: scripts/generate.sh --data DIR --checkpoint FILE --out DIR [--subset test]
#            [--ref FILE] [--beam 4] [--lenpen 0.6] [--max-tokens 8000]
#            [--post-process NAME] [--detok LANG] [-- FAIRSEQ_ARGS...]
#
# BPE is removed from the output (--remove-bpe; --post-process NAME passes
# fairseq's --post-process NAME instead, e.g. sentencepiece). Batches are not
# rounded to a multiple of 8: fairseq-fixed's batch_by_size drops a final batch
# that is not, which would silently leave sentences untranslated. --ref is the
# plain reference text for the subset (default: fairseq's own target side, BPE
# removed). --detok LANG detokenises the hypotheses with sacremoses (Moses
# detokenizer for LANG) before scoring and keeps the tokenised ones in
# OUT/SUBSET.tok.hyp.
# Writes OUT/generate-SUBSET.txt, OUT/SUBSET.hyp, OUT/SUBSET.ref and
# OUT/SUBSET.bleu.json (sacreBLEU's JSON output, with its signature).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA="" CKPT="" OUT="" SUBSET=test REF="" BEAM=4 LENPEN=0.6 MAXTOK=8000 DETOK="" POST_PROCESS=""
parse_options "--data=DATA --checkpoint=CKPT --out=OUT --subset=SUBSET --ref=REF --beam=BEAM --lenpen=LENPEN \
  --max-tokens=MAXTOK --post-process=POST_PROCESS --detok=DETOK --=fairseq" "$@"
set -- ${REST[@]+"${REST[@]}"}
POST=(--remove-bpe)
[ -z "$POST_PROCESS" ] || POST=(--post-process "$POST_PROCESS")
[ -n "$DATA" ] && [ -n "$CKPT" ] && [ -n "$OUT" ] || die "--data, --checkpoint and --out are required"
[ -f "$CKPT" ] || die "no checkpoint '$CKPT'"
[ -z "$REF" ] || [ -f "$REF" ] || die "no reference file '$REF'"
require_int --beam "$BEAM" 1
require_int --max-tokens "$MAXTOK" 1
[[ "$LENPEN" =~ ^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]] || die "--lenpen must be a number, not '$LENPEN'"
[[ "$SUBSET" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --subset '$SUBSET' (a split name such as test, valid or test1)"
[ -d "$DATA" ] || die "no data folder '$DATA'"
ls "$DATA/$SUBSET".*.idx > /dev/null 2>&1 || die "no subset '$SUBSET' in '$DATA' (no $SUBSET.*.idx)"
# Outputs: never the data folder, the checkpoint or the reference.
check_out_dir "$OUT" "--out"
check_apart "$OUT" "$DATA"
for f in "generate-$SUBSET.txt" "generate-$SUBSET.txt.tmp" "$SUBSET.hyp" "$SUBSET.tok.hyp" "$SUBSET.ref" "$SUBSET.bleu.json"; do
  check_not_same "$OUT/$f" "$CKPT" "$REF"
done
info="$(checkpoint_task "$CKPT")"
read -r CK_TASK CK_ARCH <<< "$info"
case "$CK_TASK" in
  translation*|-) ;;
  *) die "'$CKPT' is a $CK_TASK checkpoint (arch $CK_ARCH), not a translation model" ;;
esac
mkdir -p "$OUT"

gen="$OUT/generate-$SUBSET.txt"
log "translating '$SUBSET' with $CKPT (beam $BEAM, lenpen $LENPEN)"
fairseq-generate "$DATA" --user-dir "$USER_DIR" --path "$CKPT" --gen-subset "$SUBSET" \
  --beam "$BEAM" --lenpen "$LENPEN" --max-tokens "$MAXTOK" "${POST[@]}" \
  --required-batch-size-multiple 1 "$@" > "$gen.tmp"
mv "$gen.tmp" "$gen"
# H-<id>\t<score>\t<text>: restore corpus order by id.
grep '^H-' "$gen" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$OUT/$SUBSET.hyp"
if [ -n "$DETOK" ]; then
  mv "$OUT/$SUBSET.hyp" "$OUT/$SUBSET.tok.hyp"
  sacremoses -q -l "$DETOK" -j 1 detokenize < "$OUT/$SUBSET.tok.hyp" > "$OUT/$SUBSET.hyp"
fi
if [ -n "$REF" ]; then
  cp "$REF" "$OUT/$SUBSET.ref"
else
  grep '^T-' "$gen" | sed 's/^T-//' | sort -n -k1,1 | cut -f2 > "$OUT/$SUBSET.ref"
fi
require_parallel "$OUT/$SUBSET.hyp" "$OUT/$SUBSET.ref"
sacrebleu "$OUT/$SUBSET.ref" -i "$OUT/$SUBSET.hyp" -m bleu -w 2 > "$OUT/$SUBSET.bleu.json"
log "$(python -m fairseq_local_data.wmt bleu-summary "$OUT/$SUBSET.bleu.json")"
