#!/usr/bin/env bash
# Evaluate fine-tuned GLUE models (fairseq-local glue evaluate, all tasks in
# one process) and collect their metrics into one table.
#
# Usage: scripts/evaluate-glue.sh --runs DIR --data DIR --glue-dir DIR --out DIR
#            [--tasks "CoLA SST-2 ..."] [--split dev|test|all] [--checkpoint-name NAME] [--cuda]
# --runs: the fine-tuning runs, one save dir per task: RUNS/TASK/checkpoint_best.pt
#         (--checkpoint-name: another file name, e.g. checkpoint_last.pt).
# --data: the folder of TASK-bin folders (scripts/prepare-glue.sh --out).
# --glue-dir: the raw GLUE folder (gold dev labels, test indices).
# --tasks: default every task with a folder in RUNS.
# --split: dev (metrics, the default), test (submission files) or all.
# Output: OUT/TASK.json per task, OUT/submission/*.tsv (GLUE's file names, for
# test and all), and OUT/glue.md, the table of these tasks, also printed
# (`fairseq-local glue table OUT` tabulates every TASK.json in OUT).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS="" DATA="" GLUE="" OUT="" TASKS="" SPLIT=dev NAME=checkpoint_best.pt CUDA=0
parse_options "--runs=RUNS --data=DATA --glue-dir=GLUE --out=OUT --tasks=TASKS --split=SPLIT \
  --checkpoint-name=NAME --cuda+CUDA" "$@"
[ -n "$RUNS" ] && [ -n "$DATA" ] && [ -n "$GLUE" ] && [ -n "$OUT" ] || die "--runs, --data, --glue-dir and --out are required (see --help)"
case "$SPLIT" in dev|test|all) ;; *) die "--split must be dev, test or all, not '$SPLIT'" ;; esac
[ -d "$RUNS" ] || die "no runs folder '$RUNS'"
if [ -z "$TASKS" ]; then
  for t in CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE WNLI; do [ ! -d "$RUNS/$t" ] || TASKS="$TASKS $t"; done
  [ -n "$TASKS" ] || die "no task runs (RUNS/TASK/) in '$RUNS'"
fi
for TASK in $TASKS; do [ -f "$RUNS/$TASK/$NAME" ] || die "no checkpoint $RUNS/$TASK/$NAME"; done
# OUT may be inside RUNS (RUNS/eval), but not RUNS itself, a task's run, or
# the data folders.
check_out_dir "$OUT" "--out"
[ "$(_abspath "$OUT")" != "$(_abspath "$RUNS")" ] || die "--out '$OUT' is the --runs folder: give another output folder"
case "$(_abspath "$RUNS")/" in "$(_abspath "$OUT")"/*) die "--out '$OUT' holds the --runs folder '$RUNS': give another output folder" ;; esac
for TASK in $TASKS; do check_apart "$OUT" "$RUNS/$TASK"; done
check_apart "$OUT" "$DATA" "$GLUE"
mkdir -p "$OUT"
CUDAOPT=(); [ "$CUDA" = 0 ] || CUDAOPT=(--cuda)
log "evaluating$(printf ' %s' $TASKS) ($SPLIT) into $OUT"
# shellcheck disable=SC2086
fairseq-local glue evaluate --task $TASKS --runs "$RUNS" --checkpoint-name "$NAME" --data "$DATA" \
  --glue-dir "$GLUE" --split "$SPLIT" --out "$OUT" "${CUDAOPT[@]}" > "$OUT/glue.md.tmp"
mv "$OUT/glue.md.tmp" "$OUT/glue.md"
cat "$OUT/glue.md"
