#!/usr/bin/env bash
# The BERT half end to end on generated stand-ins (about 16 minutes on 2 CPU
# cores after the first setup), the counterpart of scripts/demo.sh:
#   1. stand-ins in the real formats (a bz2 MediaWiki dump, a zip of
#      Gutenberg-style books, a GLUE folder), the pretraining corpus
#      (scripts/prepare-bert-corpus.sh, SentencePiece) and two GLUE tasks
#      (SST-2 and CoLA, whose stand-in labels are single-sentence cues that a
#      small model learns in the budget; scripts/prepare-glue.sh);
#   2. masked-LM pretraining of fairseq's own roberta_base and of Pande et
#      al.'s Table 4 rows roberta_band6 and roberta_band6_120_tied, then GLUE
#      fine-tuning and evaluation of each (scripts/sweep-table4.sh);
#   3. Adaptive Axis Attention fine-tuned from the pretrained full-attention
#      model (fairseq-local convert-roberta, finetune-glue.sh --recipe aaa);
#   4. the masked-LM perplexities and a Table-4-shaped table
#      (fairseq-local tables --bert), also in runs/demo-bert/table4.md.
#
# Usage: bash scripts/demo-bert.sh [--out DIR] [--updates N] [--finetune-updates N]
#   --out DIR              runs (default runs/demo-bert)
#   --updates N            pretraining updates per model (default 300)
#   --finetune-updates N   fine-tuning updates per task (default 150)
# The models keep BERT-base's 12 layers of 12 heads (the layouts are Table 4's)
# at width 96 (FFN 192), blocks of 64 tokens. Re-running skips finished steps.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT="runs/demo-bert" UPDATES=300 FT_UPDATES=150
parse_options "--out=OUT --updates=UPDATES --finetune-updates=FT_UPDATES" "$@"
for n in "$UPDATES" "$FT_UPDATES"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "expected a positive number, got '$n'"; done
cd "$FAIRSEQ_LOCAL_ROOT"
source scripts/setup_env.sh
START=$(date +%s)
default_threads
on_interrupt "the BERT demo stopped; 'bash scripts/demo-bert.sh' again skips the finished steps and resumes the interrupted training from its last checkpoint"

STANDINS=data-bin/bert-standins CORPUS=data-bin/bert-corpus
GLUE_RAW=data-bin/glue-standin-raw GLUE_BIN=data-bin/glue-standin TASKS="SST-2 CoLA"
log "1. stand-ins, pretraining corpus and GLUE tasks"
[ -f "$STANDINS/gutenberg-standin.zip" ] || python -m fairseq_local_data.standins --out "$STANDINS"
bash scripts/prepare-bert-corpus.sh --wiki "$STANDINS/enwiki-standin-pages-articles.xml.bz2" \
  --gutenberg "$STANDINS/gutenberg-standin.zip" --bpe sentencepiece --out "$CORPUS"
[ -d "$GLUE_RAW/CoLA" ] || python -m fairseq_local_data.glue fake --out "$GLUE_RAW"
bash scripts/prepare-glue.sh --glue-dir "$GLUE_RAW" --src-dict "$CORPUS/dict.txt" --bpe sentencepiece \
  --bpe-model "$CORPUS/bpe/spm.model" --tasks "$TASKS" --out "$GLUE_BIN"

MODEL="--encoder-embed-dim 96 --encoder-ffn-embed-dim 192 --num-workers 0 --log-interval 25"
log "2. pretraining and fine-tuning: roberta_base, roberta_band6, roberta_band6_120_tied"
bash scripts/sweep-table4.sh --configs "roberta_base roberta_band6 roberta_band6_120_tied" --tasks "$TASKS" \
  --corpus "$CORPUS" --glue-bin "$GLUE_BIN" --glue-dir "$GLUE_RAW" --runs-root "$OUT" --cpu \
  --pretrain-args "--updates $UPDATES --updates-512 0 --lengths 64,128 --max-positions 128 --batch-size 32 \
    --update-freq 1 --lr 1e-3 --warmup $((UPDATES / 10)) -- $MODEL --dropout 0.0 --attention-dropout 0.0" \
  --finetune-args "--max-update $FT_UPDATES --batch-size 16 --lr 2e-4 --max-positions 128 -- $MODEL"

log "3. Adaptive Axis Attention, fine-tuned from the pretrained full-attention model"
AAA="$OUT/roberta_aaa"
mkdir -p "$AAA"
[ -f "$AAA/converted.pt" ] || fairseq-local convert-roberta "$OUT/roberta_base/checkpoint_last.pt" \
  "$AAA/converted.pt" --arch roberta_aaa
for task in $TASKS; do
  # alpha in the hundreds: the hinge's pull is weighed against the task
  # gradient through C*(1 - B), C = -1e4 (README, "Where the implementation differs").
  bash scripts/finetune-glue.sh --data "$GLUE_BIN/$task-bin" --task "$task" --arch roberta_aaa \
    --checkpoint "$AAA/converted.pt" --save-dir "$AAA/glue/$task" --recipe aaa --aaa-target 0.5 \
    --aaa-alpha 0.05 --max-update "$FT_UPDATES" --batch-size 16 --lr 2e-4 --max-positions 128 --cpu \
    -- $MODEL --update-freq 1
done
bash scripts/evaluate-glue.sh --runs "$AAA/glue" --data "$GLUE_BIN" --glue-dir "$GLUE_RAW" \
  --out "$AAA/glue/eval" --tasks "$TASKS"

log "4. results"
echo
echo "Masked-LM validation perplexity (first and last validation of pretraining):"
for arch in roberta_base roberta_band6 roberta_band6_120_tied; do
  awk -v a="$arch" '/valid on .valid. subset/ { for (i = 1; i <= NF; i++) if ($i == "ppl") p = $(i + 1);
    if (first == "") first = p; last = p } END { printf "  %-24s %10s -> %s\n", a, first, last }' \
    "$OUT/$arch/len64/train.log"
done
echo
fairseq-local tables --bert --runs-root "$OUT" --tasks $TASKS --markdown "$OUT/table4.md"
log "demo done in $(( $(date +%s) - START )) s; table in $OUT/table4.md"
