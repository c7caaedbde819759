#!/usr/bin/env bash
# Train one configuration on WMT'14 En-De or En-Ru with the paper's settings
# (Pande et al., §5.1), through scripts/train.sh.
#
# Usage: scripts/train-wmt14.sh en-de|en-ru CONFIG [--gpus N] [--max-tokens T]
#            [--save-dir DIR] [--data DIR] [--dry-run] [-- FAIRSEQ_ARGS...]
#
# CONFIG is a paper letter (a-l) or a named arch, with or without
# "transformer_" (see README, Architectures). Defaults, on top of train.sh's
# (Transformer-base, Adam (0.9, 0.997) eps 1e-9, inverse-sqrt with 16k warmup
# updates, label smoothing 0.1, TensorBoard):
#   effective batch   32k target tokens for en-de, 25k for en-ru, reached with
#                     --update-freq = ceil(effective / (gpus * max_tokens))
#   --max-tokens T    tokens per GPU and batch (default 4096)
#   --max-update      100000 (Transformer-base's 100k updates)
#   --gpus N          GPUs on this machine (default: all visible ones); N >= 1
#                     adds --fp16 (and --distributed-world-size N when N > 1);
#                     --gpus 0 trains on the CPU (--cpu, no fp16)
#   --data DIR        default data-bin/wmt14_<pair> (scripts/prepare-wmt14.sh)
#   --save-dir DIR    default runs/wmt14_<pair>/<config> (config: the paper
#                     letter, or the arch name for other archs)
#   --dry-run         print the fairseq-train command line and exit
# Anything after "--" goes to fairseq-train last and overrides all of these.
# Re-running resumes from SAVE_DIR/checkpoint_last.pt.
#
# One machine, several GPUs: fairseq-train uses every visible GPU; choose them
# with CUDA_VISIBLE_DEVICES and pass the same number as --gpus.
# Several machines: --gpus is the total number of GPUs (it sets the world size
# and the update frequency), and fairseq's --distributed-* options do the rest:
#   torchrun: print the command with --dry-run, then on each node i of 2 run it
#     with "fairseq-train" replaced by
#       torchrun --nnodes 2 --nproc-per-node 8 --node-rank i \
#                --master-addr HOST0 --master-port 29500 "$(command -v fairseq-train)"
#     (fairseq reads RANK/WORLD_SIZE/LOCAL_RANK from torchrun's environment).
#   Slurm: one task per node, all GPUs of the node, and a port; fairseq reads
#     the node list and ranks from Slurm's environment:
#       #SBATCH --nodes 2 --ntasks-per-node 1 --gres gpu:8
#       srun scripts/train-wmt14.sh en-de a --gpus 16 -- --distributed-port 12345
#     (or --ntasks-per-node 8 with one GPU per task, likewise).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PAIR="" CONFIG="" GPUS="" MAXTOK=4096 SAVE="" DATA="" DRY=0
parse_options "PAIR CONFIG --gpus=GPUS --max-tokens=MAXTOK --save-dir=SAVE --data=DATA --dry-run+DRY --=fairseq" "$@"
set -- ${REST[@]+"${REST[@]}"}
require_pair "$PAIR"
EFFECTIVE=$([ "$PAIR" = en-de ] && echo 32000 || echo 25000)  # target tokens per update (Pande et al., §5.1)
[ -n "$CONFIG" ] || die "missing configuration: a paper letter (a-l) or an arch name (see --help)"
if [ -z "$GPUS" ]; then  # every visible GPU
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    GPUS=$(tr ',' '\n' <<< "$CUDA_VISIBLE_DEVICES" | grep -c . || true)
  else
    GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  fi
fi
[[ "$GPUS" =~ ^[0-9]+$ ]] || die "--gpus must be a number, not '$GPUS'"
[[ "$MAXTOK" =~ ^[1-9][0-9]*$ ]] || die "--max-tokens must be a positive integer, not '$MAXTOK'"

# CONFIG -> "<run name> <arch>" (sweep-wmt14.sh hands in what it resolved, one python start less per config)
resolved="${FAIRSEQ_LOCAL_RESOLVED_CONFIG:-}"
if [ "${resolved%% *}" != "$CONFIG" ]; then resolved="$(resolve_configs "$CONFIG")" || exit 1; fi
read -r NAME ARCH <<< "$resolved"
DATA="${DATA:-$FAIRSEQ_LOCAL_ROOT/data-bin/wmt14_$PAIR}"
SAVE="${SAVE:-$FAIRSEQ_LOCAL_ROOT/runs/wmt14_$PAIR/$NAME}"

per_update=$(( (GPUS > 0 ? GPUS : 1) * MAXTOK ))
UPDATE_FREQ=$(( (EFFECTIVE + per_update - 1) / per_update ))
extra=(--max-tokens "$MAXTOK" --update-freq "$UPDATE_FREQ" --max-update 100000)
if [ "$GPUS" = 0 ]; then
  extra+=(--cpu)
else
  extra+=(--fp16)
  [ "$GPUS" = 1 ] || extra+=(--distributed-world-size "$GPUS")
fi
DRYOPT=(); [ "$DRY" = 0 ] || DRYOPT=(--dry-run)
[ "$DRY" = 1 ] || log "WMT'14 $PAIR, config $NAME ($ARCH): $GPUS GPU(s) x $MAXTOK tokens x update-freq $UPDATE_FREQ (effective batch $EFFECTIVE tokens)"
FAIRSEQ_LOCAL_RESOLVED_ARCH="$ARCH" exec "$FAIRSEQ_LOCAL_ROOT/scripts/train.sh" --data "$DATA" --arch "$ARCH" --save-dir "$SAVE" \
  ${DRYOPT[@]+"${DRYOPT[@]}"} -- "${extra[@]}" "$@"
