#!/usr/bin/env bash
# The main job on an embedded default: set up the environment, generate the
# synthetic corpus, and train, translate and score several paper configurations
# at reduced size, then print a results table. About 15 minutes on 2 CPU cores.
# Re-running resumes: finished data, training and translation steps are
# skipped. Each configuration prints one progress line (update N of M, time
# elapsed and left); Ctrl-C is one line saying what a re-run does.
#
# Usage: bash scripts/demo.sh
# Env:   CONFIGS="a f i"   configurations (letters a-l of Pande et al.,
#                          Fig. 4) or any named arch, with or without
#                          "transformer_" (e.g. CONFIGS="dam_s aaa head_gates
#                          sparse_bigbird"; see "fairseq-local configs")
#        MAX_UPDATE=1600   training updates per configuration
#        OMP_NUM_THREADS   torch's threads (default: the cores not busy)
#        RUNS=runs/demo    where runs (checkpoints, logs, TensorBoard) go
#        DATA=data-bin/synthetic
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
env_settings_only "$@"
cd "$FAIRSEQ_LOCAL_ROOT"
source scripts/setup_env.sh

CONFIGS="${CONFIGS:-a f i}"
MAX_UPDATE="${MAX_UPDATE:-1600}"
RUNS="${RUNS:-runs/demo}"
DATA="${DATA:-data-bin/synthetic}"
demo_recipe  # MODEL, OPTIM, SPARSITY (lib.sh)

# Every configuration -> "<run name> <arch>", checked before anything runs.
# shellcheck disable=SC2086  # CONFIGS is a list of names
resolved="$(resolve_configs $CONFIGS)" || exit 1

on_interrupt "the demo stopped while preparing $DATA; 'bash scripts/demo.sh' again keeps its finished steps and redoes the rest"
bash scripts/prepare-synthetic.sh --out "$DATA"

mkdir -p "$RUNS"
default_threads
mapfile -t archs < <(cut -d' ' -f2 <<< "$resolved")
demo_note() {
  local again="'bash scripts/demo.sh' again keeps what is finished and"
  if [ -f "$run/checkpoint_last.pt" ]; then echo "the demo stopped at configuration $letter; $again resumes it from $run/checkpoint_last.pt"
  else echo "the demo stopped at configuration $letter, before its first checkpoint; $again starts it again"; fi
}
k=0
for letter in $CONFIGS; do
  arch="${archs[$k]}"; k=$((k + 1))
  run="$RUNS/$letter"
  on_interrupt demo_note
  # one progress line per configuration on stderr; fairseq's output in RUN.train.out and RUN/train.log
  bash scripts/train.sh --data "$DATA" --arch "$arch" --save-dir "$run" -- "${MODEL[@]}" "${OPTIM[@]}" "${SPARSITY[@]}" \
    > "$run.train.out" || { tail -20 "$run.train.out" >&2; die "training ($letter) failed: see $run.train.out"; }
  bash scripts/generate.sh --data "$DATA" --checkpoint "$run/checkpoint_best.pt" --out "$run" \
    --ref "$DATA/raw/test.tgt" 2> "$run.generate.err" || { tail -20 "$run.generate.err" >&2; die "generation ($letter) failed"; }
  log "$letter: test $(python -m fairseq_local_data.wmt bleu-summary "$run/test.bleu.json")"
done

echo
# shellcheck disable=SC2086
fairseq-local results "$RUNS" --runs $CONFIGS --markdown "$RUNS/results.md" --csv "$RUNS/results.csv"
echo
echo "Results: $RUNS/results.md; TensorBoard: tensorboard --logdir $RUNS"
