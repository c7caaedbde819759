#!/usr/bin/env bash
# Train and evaluate several configurations on one WMT'14 pair: Tables 1-3 of
# Pande et al. for en-de or en-ru.
#
# Usage: scripts/sweep-wmt14.sh en-de|en-ru [--configs "a b c ..."] [--gpus N]
#            [--jobs sequential|slurm] [--average N] [--data DIR] [--runs-root DIR]
#            [--sbatch-args "ARGS"] [--dry-run] [-- FAIRSEQ_ARGS...]
#
# For each configuration (default: all of a-l; letters or arch names), runs
# scripts/train-wmt14.sh PAIR CONFIG (with --gpus N, --data DIR and the
# fairseq arguments after "--") into RUNS_ROOT/wmt14_<pair>/<config>, then
# scripts/evaluate-wmt14.sh on it (--average N: average the last N checkpoints).
#   --jobs sequential  one after the other on this machine (default)
#   --jobs slurm       one sbatch job per configuration on one node with N GPUs
#                      (default 1): writes RUNS_ROOT/wmt14_<pair>/slurm/<config>.sbatch
#                      and submits it with "sbatch ARGS FILE" (--sbatch-args,
#                      e.g. "--partition gpu --time 3-00:00:00")
#   --runs-root DIR    default runs
#   --dry-run          print what would run (fairseq-train command lines and the
#                      evaluation commands; for slurm, the job scripts) and exit
# Re-running a sweep resumes each training from its checkpoint_last.pt (a
# finished one stops at once) and evaluates again.
# Then: fairseq-local tables --runs-root RUNS_ROOT
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SCRIPTS="$FAIRSEQ_LOCAL_ROOT/scripts"

PAIR="" CONFIGS="a b c d e f g h i j k l" GPUS="" JOBS=sequential AVERAGE="" DATA=""
RUNS_ROOT="$FAIRSEQ_LOCAL_ROOT/runs" SBATCH_ARGS="" DRY=0
parse_options "PAIR --configs=CONFIGS --gpus=GPUS --jobs=JOBS --average=AVERAGE --data=DATA --runs-root=RUNS_ROOT \
  --sbatch-args=SBATCH_ARGS --dry-run+DRY --=fairseq" "$@"
set -- ${REST[@]+"${REST[@]}"}
require_pair "$PAIR"
case "$JOBS" in sequential|slurm) ;; *) die "--jobs must be sequential or slurm, not '$JOBS'" ;; esac
[ -n "$CONFIGS" ] || die "--configs is empty"
[ "$JOBS" != slurm ] || GPUS="${GPUS:-1}"
check_out_dir "$RUNS_ROOT" "--runs-root"
[ -z "$DATA" ] || check_run_dir_apart "$RUNS_ROOT" "$DATA"

# Every configuration -> its run name (the paper letter, or the arch), checked up front.
# shellcheck disable=SC2086  # CONFIGS is a list of names
resolved="$(resolve_configs $CONFIGS)" || exit 1

train_opts=(${GPUS:+--gpus "$GPUS"} ${DATA:+--data "$DATA"})
eval_opts=(${AVERAGE:+--average "$AVERAGE"} ${DATA:+--data "$DATA"})
[ -z "$AVERAGE" ] || [[ "$AVERAGE" =~ ^[1-9][0-9]*$ ]] || die "--average must be a positive integer, not '$AVERAGE'"

while read -r name arch <&3; do  # fd 3: the loop's commands keep the script's stdin
  run="$RUNS_ROOT/wmt14_$PAIR/$name"
  train=("$SCRIPTS/train-wmt14.sh" "$PAIR" "$name" "${train_opts[@]}" --save-dir "$run")
  evaluate=("$SCRIPTS/evaluate-wmt14.sh" "$PAIR" "$run" "${eval_opts[@]}")
  if [ "$JOBS" = sequential ]; then
    if [ "$DRY" = 1 ]; then
      echo "# config $name"
      FAIRSEQ_LOCAL_RESOLVED_CONFIG="$name $arch" "${train[@]}" --dry-run -- "$@"
      print_command "${evaluate[@]}"
      continue
    fi
    log "sweep $PAIR: config $name"
    FAIRSEQ_LOCAL_RESOLVED_CONFIG="$name $arch" "${train[@]}" -- "$@"
    "${evaluate[@]}"
  else
    job="#!/usr/bin/env bash
#SBATCH --job-name=wmt14_${PAIR}_$name
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:$GPUS
#SBATCH --output=$run/slurm-%j.out
set -euo pipefail
cd $(printf '%q' "$FAIRSEQ_LOCAL_ROOT")
$(print_command "${train[@]}" -- "$@")
$(print_command "${evaluate[@]}")"
    script="$RUNS_ROOT/wmt14_$PAIR/slurm/$name.sbatch"
    if [ "$DRY" = 1 ]; then
      echo "# config $name: sbatch $SBATCH_ARGS $script"
      echo "$job"
      continue
    fi
    command -v sbatch >/dev/null || die "sbatch not found (--jobs slurm needs Slurm)"
    mkdir -p "$(dirname "$script")" "$run"
    echo "$job" > "$script"
    # shellcheck disable=SC2086  # SBATCH_ARGS is a list of options
    log "config $name: $(sbatch $SBATCH_ARGS "$script")"
  fi
done 3<<< "$resolved"
[ "$DRY" = 1 ] || [ "$JOBS" = slurm ] || log "sweep done: fairseq-local tables --runs-root $RUNS_ROOT"
