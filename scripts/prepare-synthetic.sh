#!/usr/bin/env bash
# Generate the seeded synthetic corpus (fairseq_local_data.synthetic), learn and
# apply joint BPE, and binarise it. The gold dependency trees of the source side
# are written next to the text as OUT/raw/{split}.src.conllu. Idempotent: a re-run
# skips finished steps; changed generator options regenerate everything.
#
# Usage: scripts/prepare-synthetic.sh [--out DIR] [--merges N] [--hard] [GENERATOR_OPTIONS...]
# Generator options (python -m fairseq_local_data.synthetic --help) override the
# defaults: --seed 1 --train 20000 --valid 500 --test 500 --nouns 200
# --adjectives 60 --verbs 60 --max-len 20. --hard (a flag) is the generator's
# hard preset (deeper nesting, more relative clauses, PPs and NEG/Q markers, 10
# to 40 words): it drops the --max-len 20 default, and options given explicitly
# still override the preset. Default --out data-bin/synthetic, --merges 1000.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT="$FAIRSEQ_LOCAL_ROOT/data-bin/synthetic" MERGES=1000
GEN=(--seed 1 --train 20000 --valid 500 --test 500 --nouns 200 --adjectives 60 --verbs 60) HARD=0 OPTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --hard) HARD=1; OPTS+=("$1"); shift ;;  # the generator's only flag without a value
    --*) needs_value "$@" ;;&
    --out) OUT="$2"; shift 2 ;;
    --merges) MERGES="$2"; shift 2 ;;
    --*) OPTS+=("$1" "$2"); shift 2 ;;
    *) die "unexpected argument '$1' (see --help)" ;;
  esac
done
[ "$HARD" = 1 ] || GEN+=(--max-len 20)  # the hard preset brings its own lengths
GEN+=(${OPTS[@]+"${OPTS[@]}"})  # the .config line, so a change of options (--hard too) regenerates

check_out_dir "$OUT" "--out"
RAW="$OUT/raw"
raw_files=("$RAW"/{train,valid,test}.{src,tgt} "$RAW"/{train,valid,test}.src.conllu)
mkdir -p "$RAW"
echo "${GEN[*]}" > "$RAW/.config.new"
if ! { cmp -s "$RAW/.config.new" "$RAW/.config" && step_done "$RAW/.done" "${raw_files[@]}"; }; then
  log "generating the synthetic corpus (${GEN[*]}) in $RAW"
  rm -rf "$OUT/bpe" "$OUT/.binarize.done"
  python -m fairseq_local_data.synthetic --out-dir "$RAW" --trees "${GEN[@]}"
  mv "$RAW/.config.new" "$RAW/.config"
  step_finish "$RAW/.done" "${raw_files[@]}"
fi
rm -f "$RAW/.config.new"
"$(dirname "${BASH_SOURCE[0]}")/bpe-binarize.sh" --raw "$RAW" --out "$OUT" --merges "$MERGES"
