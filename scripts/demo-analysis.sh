#!/usr/bin/env bash
# The analysis demo: train (or reuse) the demo's configurations and a model
# whose heads are all band-1 in pre mode, then run scripts/analyze.sh on each
# (attention bias, gradient sensitivity, Hidden Token Attribution, with the
# papers' figures) against the synthetic corpus's gold trees, and print one
# table. About 25 minutes on 2 CPU cores from a fresh clone (the demo's
# training is 16 of them; after scripts/demo.sh, about 8); re-running skips
# finished steps.
#
# Usage: bash scripts/demo-analysis.sh
# Env:   CONFIGS="a f i"     the demo's configurations (as scripts/demo.sh)
#        BAND1_UPDATES=400   training updates of the band-1 pre-mode model
#        SENTENCES=200       test sentences analysed per model
#        MAX_UPDATE, RUNS=runs/demo, DATA=data-bin/synthetic  (as scripts/demo.sh)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
env_settings_only "$@"
cd "$FAIRSEQ_LOCAL_ROOT"
source scripts/setup_env.sh

export CONFIGS="${CONFIGS:-a f i}" RUNS="${RUNS:-runs/demo}" DATA="${DATA:-data-bin/synthetic}"
BAND1_UPDATES="${BAND1_UPDATES:-400}" SENTENCES="${SENTENCES:-200}"
[[ "$BAND1_UPDATES" =~ ^[1-9][0-9]*$ ]] || die "BAND1_UPDATES must be a positive integer, not '$BAND1_UPDATES'"
[[ "$SENTENCES" =~ ^[1-9][0-9]*$ ]] || die "SENTENCES must be a positive integer, not '$SENTENCES'"

default_threads
on_interrupt "the analysis demo stopped; 'bash scripts/demo-analysis.sh' again skips the finished steps and resumes the interrupted training from its last checkpoint"
bash scripts/demo.sh
MAX_UPDATE="$BAND1_UPDATES"
demo_recipe  # MODEL, OPTIM, SPARSITY (lib.sh)
band1="$RUNS/band1_pre"
mkdir -p "$band1"
bash scripts/train.sh --data "$DATA" --arch transformer_local --save-dir "$band1" -- "${MODEL[@]}" "${OPTIM[@]}" \
  --attn-layout "[band-1*8]*6" --mask-mode pre > "$band1.train.out" \
  || { tail -20 "$band1.train.out" >&2; die "training the band-1 model failed: see $band1.train.out"; }

dirs=()
for run in $CONFIGS band1_pre; do
  log "analysing $RUNS/$run"
  bash scripts/analyze.sh "$RUNS/$run" --max-sentences "$SENTENCES" > "$RUNS/$run.analyze.out" 2>&1 \
    || { tail -20 "$RUNS/$run.analyze.out" >&2; die "analysing $run failed: see $RUNS/$run.analyze.out"; }
  dirs+=("$RUNS/$run/analysis")
done
echo
fairseq-local analyze table "${dirs[@]}" --markdown "$RUNS/analysis.md"
echo
echo "Table: $RUNS/analysis.md; figures: $RUNS/<config>/analysis/*.png"
