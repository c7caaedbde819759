#!/usr/bin/env bash
# Translate a subset with fairseq-generate and score it with sacreBLEU.
#
# Usage: scripts/generate.sh --data DIR --checkpoint FILE --out DIR [--subset test]
#            [--ref FILE] [--beam 4] [--lenpen 0.6] [--max-tokens 8000]
#            [--post-process NAME] [--detok LANG] [--force] [-- FAIRSEQ_ARGS...]
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
# OUT/SUBSET.bleu.json (sacreBLEU's JSON output, with its signature), each
# whole or not at all. A re-run whose outputs are newer than the checkpoint,
# the reference and the data, and were made with the same settings
# (OUT/.SUBSET.settings), skips the translation ("skip: ..."); --force
# translates again. Ctrl-C or SIGTERM leaves OUT as it was, in one line.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA="" CKPT="" OUT="" SUBSET=test REF="" BEAM=4 LENPEN=0.6 MAXTOK=8000 DETOK="" POST_PROCESS="" FORCE=0
parse_options "--data=DATA --checkpoint=CKPT --out=OUT --subset=SUBSET --ref=REF --beam=BEAM --lenpen=LENPEN \
  --max-tokens=MAXTOK --post-process=POST_PROCESS --detok=DETOK --force+FORCE --=fairseq" "$@"
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
for f in "generate-$SUBSET.txt" "$SUBSET.hyp" "$SUBSET.tok.hyp" "$SUBSET.ref" "$SUBSET.bleu.json"; do
  check_not_same "$OUT/$f" "$CKPT" "$REF"
done
info="$(checkpoint_task "$CKPT")"
read -r CK_TASK CK_ARCH <<< "$info"
case "$CK_TASK" in
  translation*|-) ;;
  *) die "'$CKPT' is a $CK_TASK checkpoint (arch $CK_ARCH), not a translation model" ;;
esac
check_data "$DATA"
# One generate.sh per --out; every file is written under a temporary name of
# this process, then renamed, so a kill never empties a previous result.
lock_dir "$OUT" "generate.sh"

gen="$OUT/generate-$SUBSET.txt" hyp="$OUT/$SUBSET.hyp" ref="$OUT/$SUBSET.ref" bleu="$OUT/$SUBSET.bleu.json"
settings="$OUT/.$SUBSET.settings"
cmd=(fairseq-generate "$DATA" --user-dir "$USER_DIR" --path "$CKPT" --gen-subset "$SUBSET"
  --beam "$BEAM" --lenpen "$LENPEN" --max-tokens "$MAXTOK" "${POST[@]}"
  --required-batch-size-multiple 1 "$@")
print_command "${cmd[@]}" --ref "$REF" --detok "$DETOK" > "$(tmp_name "$settings")"
files=("$gen" "$hyp" "$ref" "$bleu" "$settings")
[ -z "$DETOK" ] || files+=("$OUT/$SUBSET.tok.hyp")
inputs=("$CKPT" "$DATA/$SUBSET".*.idx "$DATA/$SUBSET".*.bin)
[ -z "$REF" ] || inputs+=("$REF")
if [ "$FORCE" = 0 ] && up_to_date "$settings" "$(tmp_name "$settings")" "${files[@]}" -- "${inputs[@]}"; then
  rm -f "$(tmp_name "$settings")"
  log "skip: $bleu is newer than $CKPT and made with the same settings (--force translates again)"
  log "$(python -m fairseq_local_data.wmt bleu-summary "$bleu")"
  exit 0
fi
on_interrupt "translating '$SUBSET' stopped; $OUT is as it was, and the same command translates again"
log "translating '$SUBSET' with $CKPT (beam $BEAM, lenpen $LENPEN)"
# fairseq-generate's log to stderr, as it is, but not its traceback on Ctrl-C (fairseq_local_data.progress)
_keep_stderr
{ "${cmd[@]}" 2>&1 > "$(tmp_name "$gen")" | python -m fairseq_local_data.progress --log /dev/null \
    --name generate >&"$_STDERR_FD" 2>&1; } 2> /dev/null
# H-<id>\t<score>\t<text>: restore corpus order by id.
grep '^H-' "$(tmp_name "$gen")" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$(tmp_name "$hyp")"
if [ -n "$DETOK" ]; then
  mv "$(tmp_name "$hyp")" "$(tmp_name "${files[5]}")"
  sacremoses -q -l "$DETOK" -j 1 detokenize < "$(tmp_name "${files[5]}")" > "$(tmp_name "$hyp")"
fi
if [ -n "$REF" ]; then
  cp "$REF" "$(tmp_name "$ref")"
else
  grep '^T-' "$(tmp_name "$gen")" | sed 's/^T-//' | sort -n -k1,1 | cut -f2 > "$(tmp_name "$ref")"
fi
require_parallel "$(tmp_name "$hyp")" "$(tmp_name "$ref")"
sacrebleu "$(tmp_name "$ref")" -i "$(tmp_name "$hyp")" -m bleu -w 2 > "$(tmp_name "$bleu")"
for f in "${files[@]}"; do mv "$(tmp_name "$f")" "$f"; done
log "$(python -m fairseq_local_data.wmt bleu-summary "$bleu")"
