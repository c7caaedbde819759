#!/usr/bin/env bash
# Pande et al., Table 4: pretrain each BERT configuration, fine-tune it on the
# GLUE tasks, evaluate, and print the table beside the paper's values.
#
# Usage: scripts/sweep-table4.sh [--configs "ARCH ..."] [--tasks "TASK ..."]
#            [--corpus DIR] [--glue-bin DIR] [--glue-dir DIR] [--runs-root DIR]
#            [--pretrain-args "ARGS"] [--finetune-args "ARGS"] [--cpu] [--dry-run]
#
#   --configs      the archs (default: Table 4's rows: roberta_local_base
#                  roberta_band2 roberta_band6 roberta_band6_all_tied
#                  roberta_band6_132_tied roberta_band6_120_tied; fairseq's
#                  roberta_base is accepted too)
#   --tasks        GLUE tasks (default: QQP SST-2 MNLI QNLI, as Table 4)
#   --corpus DIR   the masked-LM data (default data-bin/bert-corpus,
#                  scripts/prepare-bert-corpus.sh)
#   --glue-bin DIR the TASK-bin folders (default data-bin/glue, scripts/prepare-glue.sh)
#   --glue-dir DIR the raw GLUE folder, for the dev labels (default data/glue)
#   --runs-root DIR  default runs/bert: RUNS/ARCH/ holds the pretraining phases
#                  and checkpoint_last.pt, RUNS/ARCH/glue/TASK/ the fine-tuning
#                  run, RUNS/ARCH/glue/eval/TASK.json its dev metrics
#   --pretrain-args "ARGS"   extra arguments of scripts/pretrain-bert.sh (split
#                  at spaces, so no value may contain one; e.g.
#                  "--updates 1000 -- --encoder-embed-dim 256")
#   --finetune-args "ARGS"   extra arguments of scripts/finetune-glue.sh
#   --cpu          train on the CPU; --dry-run prints the commands only
# Steps run one after the other on this machine; every step resumes or skips
# finished work when re-run (pretraining and fine-tuning resume from their
# checkpoints). On a cluster, run the printed (--dry-run) commands as jobs.
# Ends with `fairseq-local tables --bert`, also written to RUNS/table4.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONFIGS="roberta_local_base roberta_band2 roberta_band6 roberta_band6_all_tied roberta_band6_132_tied roberta_band6_120_tied"
TASKS="QQP SST-2 MNLI QNLI"
CORPUS="$FAIRSEQ_LOCAL_ROOT/data-bin/bert-corpus" GLUE_BIN="$FAIRSEQ_LOCAL_ROOT/data-bin/glue"
GLUE_DIR="$FAIRSEQ_LOCAL_ROOT/data/glue" RUNS="$FAIRSEQ_LOCAL_ROOT/runs/bert"
PRE_ARGS="" FT_ARGS="" CPU=0 DRY=0
parse_options "--configs=CONFIGS --tasks=TASKS --corpus=CORPUS --glue-bin=GLUE_BIN --glue-dir=GLUE_DIR \
  --runs-root=RUNS --pretrain-args=PRE_ARGS --finetune-args=FT_ARGS --cpu+CPU --dry-run+DRY" "$@"
[ -n "$CONFIGS" ] || die "--configs is empty"
[ -n "$TASKS" ] || die "--tasks is empty"
[ -f "$CORPUS/dict.txt" ] || die "no masked-LM data in '$CORPUS' (run scripts/prepare-bert-corpus.sh)"
for task in $TASKS; do
  [ -d "$GLUE_BIN/$task-bin" ] || die "no prepared GLUE task '$GLUE_BIN/$task-bin' (run scripts/prepare-glue.sh)"
done
[ -d "$GLUE_DIR" ] || die "no GLUE folder '$GLUE_DIR' (--glue-dir)"
check_out_dir "$RUNS" "--runs-root"
check_run_dir_apart "$RUNS" "$CORPUS" "$GLUE_BIN" "$GLUE_DIR"
# shellcheck disable=SC2086
require_roberta_archs $CONFIGS
SCRIPTS="$FAIRSEQ_LOCAL_ROOT/scripts"
DRYOPT=(); [ "$DRY" = 0 ] || DRYOPT=(--dry-run)
CPUOPT=(); [ "$CPU" = 0 ] || CPUOPT=(--cpu)

# Split "A -- B" into the script's own options and the fairseq ones after "--"
# (words split at whitespace, without pathname expansion: no value may contain
# a space).
split_args() {  # split_args "STRING" OWN_ARRAY FAIRSEQ_ARRAY
  local -n own="$2" fs="$3"; own=() fs=()
  local seen=0 w words
  read -ra words <<< "$1"
  for w in ${words[@]+"${words[@]}"}; do
    if [ "$seen" = 0 ] && [ "$w" = "--" ]; then seen=1
    elif [ "$seen" = 0 ]; then own+=("$w"); else fs+=("$w"); fi
  done
}
split_args "$PRE_ARGS" PRE_OWN PRE_FS
split_args "$FT_ARGS" FT_OWN FT_FS

for arch in $CONFIGS; do
  log "== $arch: pretraining"
  bash "$SCRIPTS/pretrain-bert.sh" "$arch" --data "$CORPUS" --save-dir "$RUNS/$arch" "${CPUOPT[@]}" "${DRYOPT[@]}" \
    "${PRE_OWN[@]}" -- "${PRE_FS[@]}"
  for task in $TASKS; do
    log "== $arch: fine-tuning on $task"
    bash "$SCRIPTS/finetune-glue.sh" --data "$GLUE_BIN/$task-bin" --task "$task" --arch "$arch" \
      --checkpoint "$RUNS/$arch/checkpoint_last.pt" --save-dir "$RUNS/$arch/glue/$task" "${CPUOPT[@]}" \
      "${DRYOPT[@]}" "${FT_OWN[@]}" -- "${FT_FS[@]}"
  done
  [ "$DRY" = 0 ] || continue
  log "== $arch: evaluating"
  bash "$SCRIPTS/evaluate-glue.sh" --runs "$RUNS/$arch/glue" --data "$GLUE_BIN" --glue-dir "$GLUE_DIR" \
    --out "$RUNS/$arch/glue/eval" --tasks "$TASKS" $([ "$CPU" = 1 ] || echo --cuda)
done
[ "$DRY" = 0 ] || exit 0
fairseq-local tables --bert --runs-root "$RUNS" --tasks $TASKS --markdown "$RUNS/table4.md"
