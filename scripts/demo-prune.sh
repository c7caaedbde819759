#!/usr/bin/env bash
# The pruning demo (Voita et al. 2019, §6): train (or reuse) the demo's
# all-global model (a), then fairseq-local prune-curve: fine-tune it with a
# gate on every head of the three attention types at a sweep of L0 weights,
# translate with the closed heads removed, and count the heads kept and the
# roles of the remaining encoder heads. Writes RUNS/prune/prune_curve.md and
# its two figures. Re-running skips finished steps.
#
# The gates alone are fine-tuned (--gates-only, learning rate 0.05), so that
# they close within a few hundred updates on a CPU; Voita et al. fine-tune
# every weight with the gates, which is prune-curve's default. About 10
# minutes on 2 CPU cores after scripts/demo.sh (about 25 from a fresh clone).
#
# Usage: bash scripts/demo-prune.sh
# Env:   LAMBDAS=0.005,0.01,0.02,0.05,0.1,0.2,0.5   L0 weights (--gate-preset voita's layer mean)
#        PRUNE_UPDATES=300                         fine-tuning updates per weight
#        MAX_UPDATE, RUNS=runs/demo, DATA=data-bin/synthetic  (as scripts/demo.sh)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
env_settings_only "$@"
cd "$FAIRSEQ_LOCAL_ROOT"
source scripts/setup_env.sh

export RUNS="${RUNS:-runs/demo}" DATA="${DATA:-data-bin/synthetic}"
LAMBDAS="${LAMBDAS:-0.005,0.01,0.02,0.05,0.1,0.2,0.5}" PRUNE_UPDATES="${PRUNE_UPDATES:-300}"
[[ "$PRUNE_UPDATES" =~ ^[1-9][0-9]*$ ]] || die "PRUNE_UPDATES must be a positive integer, not '$PRUNE_UPDATES'"

default_threads
on_interrupt "the pruning demo stopped; 'bash scripts/demo-prune.sh' again skips the finished steps and resumes the interrupted one"
CONFIGS="a" bash scripts/demo.sh
fairseq-local prune-curve "$RUNS/a/checkpoint_best.pt" --data "$DATA" --out "$RUNS/prune" \
  --lambdas "$LAMBDAS" --max-update "$PRUNE_UPDATES" --lr 0.05 --gates-only --max-sentences 200 --rare-top 0 \
  -- --max-tokens 1024 --seed 1
echo
echo "Table: $RUNS/prune/prune_curve.md; figures: $RUNS/prune/prune_curve.png, $RUNS/prune/prune_roles.png"
