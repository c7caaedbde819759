#!/usr/bin/env bash
# Translate a WMT'14 test set with a trained run and score it, as Pande et al.
# 2021, Tables 1-3: detokenised sacreBLEU and, for En-De, tokenised BLEU with
# compound splitting.
#
# Usage: scripts/evaluate-wmt14.sh en-de|en-ru RUN_DIR [--subset test] [--average N]
#            [--data DIR] [--beam 4] [--lenpen 0.6] [-- FAIRSEQ_GENERATE_ARGS...]
#
# Translates with scripts/generate.sh (beam 4, length penalty 0.6, as fairseq's
# WMT recipe) from RUN_DIR/checkpoint_best.pt (else checkpoint_last.pt), or with
# --average N from the average of the run's last N checkpoints by update number
# (written to RUN_DIR/checkpoint_avgN.pt by "fairseq-local average").
# BPE (subword-nmt) or SentencePiece is removed as the data's summary.json says,
# then the hypotheses are detokenised with sacremoses' Moses detokenizer.
#   detokenised sacreBLEU: against the raw reference (newstest2014 for "test",
#     read from the test-set files kept under DATA/work/extract); if they are
#     gone, against the detokenised tokenised reference, with a warning.
#     RUN_DIR/SUBSET.ref.source says which reference was used.
#   tokenised BLEU (en-de only): the tokenised hypotheses and DATA/tok/SUBSET.de
#     with hyphenated compounds split as "a ##AT##-##AT## b" (Vaswani et al.'s
#     get_ende_bleu.sh), scored by sacreBLEU with --tokenize none (as multi-bleu).
# --data DIR defaults to data-bin/wmt14_<pair>. Arguments after "--" go to
# fairseq-generate.
# Writes RUN_DIR/{generate-SUBSET.txt, SUBSET.hyp (detokenised), SUBSET.tok.hyp,
# SUBSET.ref, SUBSET.bleu.json} and, for en-de, RUN_DIR/SUBSET.tok-bleu.json
# (sacreBLEU's JSON output, with its signature).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PAIR="" RUN="" SUBSET=test AVERAGE="" DATA="" BEAM=4 LENPEN=0.6
while [ $# -gt 0 ]; do
  case "$1" in
    --subset|--average|--data|--beam|--lenpen) needs_value "$@" ;;&
    --subset) SUBSET="$2"; shift 2 ;;
    --average) AVERAGE="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --beam) BEAM="$2"; shift 2 ;;
    --lenpen) LENPEN="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (fairseq options go after '--'; see --help)" ;;
    *) if [ -z "$PAIR" ]; then PAIR="$1"; elif [ -z "$RUN" ]; then RUN="$1"
       else die "unexpected argument '$1' (see --help)"; fi; shift ;;
  esac
done
require_pair "$PAIR"
TGT="${PAIR#en-}"
[ -n "$RUN" ] || die "missing run directory (see --help)"
[ -d "$RUN" ] || die "no run directory '$RUN'"
check_out_dir "$RUN" "run directory"
[ -z "$AVERAGE" ] || [[ "$AVERAGE" =~ ^[1-9][0-9]*$ ]] || die "--average must be a positive integer, not '$AVERAGE'"
DATA="${DATA:-$FAIRSEQ_LOCAL_ROOT/data-bin/wmt14_$PAIR}"
[ -f "$DATA/summary.json" ] || die "no WMT'14 data in '$DATA' (run scripts/prepare-wmt14.sh $PAIR first)"
check_apart "$RUN" "$DATA"
TOKREF="$DATA/tok/$SUBSET.$TGT"
[ -f "$TOKREF" ] || die "no subset '$SUBSET' in '$DATA' (no $TOKREF)"

WMT_PY=(python -m fairseq_local_data.wmt)
# summary.json -> "<BPE method> <test set name>"
info="$("${WMT_PY[@]}" describe-split --summary "$DATA/summary.json" --split "$SUBSET")" || exit 1
read -r METHOD SETNAME <<< "$info"
POST=()
[ "$METHOD" != sentencepiece ] || POST=(--post-process sentencepiece)

if [ -n "$AVERAGE" ]; then
  CKPT="$RUN/checkpoint_avg$AVERAGE.pt"
  log "averaging the last $AVERAGE checkpoints of $RUN"
  fairseq-local average "$RUN" --num "$AVERAGE" --output "$CKPT"
elif [ -f "$RUN/checkpoint_best.pt" ]; then
  CKPT="$RUN/checkpoint_best.pt"
else
  CKPT="$RUN/checkpoint_last.pt"
  [ -f "$CKPT" ] || die "no checkpoint in '$RUN' (checkpoint_best.pt or checkpoint_last.pt)"
fi

# The raw (untokenised) reference, from the test-set files prepare-wmt14.sh
# extracted (nothing is printed if they are gone).
REF="$(mktemp)"; trap 'rm -f "$REF"' EXIT
found="$("${WMT_PY[@]}" reference "$SETNAME" --src en --tgt "$TGT" --out "$REF" "$DATA/work/extract")" || exit 1
if [ -z "$found" ]; then
  log "warning: the raw $SETNAME reference is not under $DATA/work/extract: scoring against the detokenised tokenised reference $TOKREF"
  sacremoses -q -l "$TGT" -j 1 detokenize < "$TOKREF" > "$REF"
  found="detokenised $TOKREF"
fi
require_parallel "$REF" "$TOKREF"

"$FAIRSEQ_LOCAL_ROOT/scripts/generate.sh" --data "$DATA" --checkpoint "$CKPT" --out "$RUN" \
  --subset "$SUBSET" --ref "$REF" --detok "$TGT" --beam "$BEAM" --lenpen "$LENPEN" \
  ${POST[@]+"${POST[@]}"} -- "$@"
echo "$found" > "$(tmp_name "$RUN/$SUBSET.ref.source")"
mv "$(tmp_name "$RUN/$SUBSET.ref.source")" "$RUN/$SUBSET.ref.source"

if [ "$PAIR" = en-de ]; then
  # Tokenised BLEU with compound splitting (get_ende_bleu.sh): the Moses -a
  # tokens "a @-@ b" are joined back to "a-b", then split as "a ##AT##-##AT## b".
  # every file under a temporary name of this process, renamed at the end: a kill keeps the previous ones
  hsplit="$RUN/$SUBSET.tok.hyp.split" rsplit="$RUN/$SUBSET.tok.ref.split" tbleu="$RUN/$SUBSET.tok-bleu.json"
  "${WMT_PY[@]}" split-compounds "$RUN/$SUBSET.tok.hyp" "$(tmp_name "$hsplit")"
  "${WMT_PY[@]}" split-compounds "$TOKREF" "$(tmp_name "$rsplit")"
  require_parallel "$(tmp_name "$hsplit")" "$(tmp_name "$rsplit")"
  sacrebleu "$(tmp_name "$rsplit")" -i "$(tmp_name "$hsplit")" -m bleu -w 2 --tokenize none > "$(tmp_name "$tbleu")"
  for f in "$hsplit" "$rsplit" "$tbleu"; do mv "$(tmp_name "$f")" "$f"; done
  log "tokenised $("${WMT_PY[@]}" bleu-summary "$tbleu")"
fi
