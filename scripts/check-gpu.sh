#!/usr/bin/env bash
# The GPU check, in one command: set up the environment (scripts/setup_env.sh),
# run the half-precision tests that need no GPU, then, where CUDA is available,
# the CUDA tests and the kernel benchmark in fp16 and bf16, and write one
# Markdown report of it all.
#
# Usage: bash scripts/check-gpu.sh [--out DIR]
#
# --out DIR   where the report (DIR/report.md) and each step's full output
#             (DIR/*.log) go (default runs/check-gpu).
#
# Steps, in order:
#   CPU part (runs anywhere):
#     pytest -m "not slow" tests/unit/precision   half-precision tests on the CPU
#                                            (said so and skipped where the
#                                            directory does not exist)
#   CUDA part (skipped, with one line saying why, without a CUDA device):
#     pytest -m cuda tests/cuda              every --attn-impl x fp32/fp16/bf16
#                                            x pre/post x tied/mixed layers
#                                            against fp32 dense; FlexAttention
#                                            training; sync-free forwards;
#                                            window-path peak memory at n = 8192;
#                                            200 updates of fairseq-train --fp16
#                                            per learned arch
#     fairseq-local benchmark kernels --device cuda --dtype fp16, then bf16
#
# Every step runs even if an earlier one failed; the report lists each with
# its command, result and time. Exits 0 when every step that ran passed
# (without CUDA: when the CPU part passed), 1 otherwise.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT=runs/check-gpu
parse_options "--out=OUT" "$@"
cd "$FAIRSEQ_LOCAL_ROOT"
source scripts/setup_env.sh
mkdir -p "$OUT" || die "cannot create '$OUT'"
OUT="$(cd "$OUT" && pwd)"
REPORT="$OUT/report.md"
BODY="$(mktemp)"
trap 'rm -f "$BODY"' EXIT
FAILED=0

# cuda_status : "ok" or the one-line reason why there is no CUDA device.
cuda_status() { fairseq-local inspect --machine --field cuda 2> /dev/null || echo "unknown (fairseq-local inspect --machine failed)"; }

# machine : one line describing the GPU (if any), the CPU and torch.
machine() { fairseq-local inspect --machine --field machine 2> /dev/null || echo "unknown (fairseq-local inspect --machine failed)"; }

# pytest_summary LOG : pytest's last summary line ("3 passed, 2 skipped in 4.1s").
pytest_summary() {
  grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|deselected|error)|no tests ran' "$1" | tail -1 | sed -E 's/^=+ //; s/ =+$//'
}

# step NAME TITLE KIND COMMAND... : run COMMAND (output to OUT/NAME.log), log
# its result and add its section to the report. KIND is pytest or bench.
step() {
  local name="$1" title="$2" kind="$3"; shift 3
  local logf="$OUT/$name.log" start status result shown
  shown="$(for a in "$@"; do case "$a" in *[!A-Za-z0-9_./:=,-]*) printf '"%s" ' "$a" ;; *) printf '%s ' "$a" ;; esac; done)"
  shown="${shown% }"
  log "$title: $shown"
  start=$(date +%s)
  set +e
  "$@" > "$logf" 2>&1
  status=$?
  set -e
  local seconds=$(( $(date +%s) - start ))
  if [ "$status" = 0 ]; then result="passed"
  elif [ "$kind" = pytest ] && [ "$status" = 5 ]; then result="no tests collected"
  else result="FAILED (exit status $status)"; FAILED=1
  fi
  local summary=""
  [ "$kind" = pytest ] && summary="$(pytest_summary "$logf" || true)"
  log "$title: $result${summary:+ ($summary)}, ${seconds} s; output: $logf"
  {
    echo "### $title"
    echo
    echo "- command: \`$shown\`"
    echo "- result: **$result**${summary:+ ($summary)}, ${seconds} s; full output: \`$(basename "$logf")\`"
    echo
    if [ "$kind" = pytest ] && grep -q 'short test summary info' "$logf"; then
      echo "Failed, erroneous and skipped tests (pytest's short summary):"
      echo
      echo '```'
      sed -n '/short test summary info/,$p' "$logf" | sed 1d | tail -60
      echo '```'
      echo
    elif [ "$kind" = pytest ] && [ "$status" != 0 ] && [ "$status" != 5 ]; then
      echo '```'
      tail -20 "$logf"
      echo '```'
      echo
    elif [ "$kind" = bench ]; then
      if [ "$status" = 0 ]; then
        grep -v -E '^(INFO|WARNING):' "$logf" | sed -n '/^\*\*kernels\*\*/,$p'
      else
        echo '```'
        tail -30 "$logf"
        echo '```'
      fi
      echo
    fi
  } >> "$BODY"
}

# skipped TITLE WHY : a step that did not run.
skipped() {
  { echo "### $1"; echo; echo "- skipped: $2"; echo; } >> "$BODY"
}

CUDA="$(cuda_status)"
log "check-gpu: report in $REPORT"

echo "## CPU part" >> "$BODY"; echo >> "$BODY"
if [ -d tests/unit/precision ]; then
  step precision "half precision on the CPU (tests/unit/precision)" pytest \
    python -m pytest -q -p no:cacheprovider -rfE -m "not slow" tests/unit/precision
else
  log "tests/unit/precision does not exist yet: the CPU half-precision tests are skipped"
  skipped "half precision on the CPU (tests/unit/precision)" "tests/unit/precision does not exist yet"
fi

echo "## CUDA part" >> "$BODY"; echo >> "$BODY"
if [ "$CUDA" = ok ]; then
  step cuda-tests "CUDA tests (tests/cuda)" pytest \
    python -m pytest -q -p no:cacheprovider -rfEs -m cuda tests/cuda
  for dtype in fp16 bf16; do
    step "bench-$dtype" "kernel benchmark, $dtype on CUDA" bench \
      fairseq-local benchmark kernels --device cuda --dtype "$dtype" --lengths 512 2048 8192 --heads 8 \
      --impls auto dense window flex --quiet
  done
else
  log "check-gpu: CUDA part skipped: $CUDA"
  skipped "CUDA tests (tests/cuda) and kernel benchmarks (fp16, bf16)" "$CUDA"
fi

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty=""
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || dirty=" (with uncommitted changes)"
if [ "$FAILED" = 0 ]; then overall="every step that ran passed"; else overall="some steps FAILED"; fi
if [ "$CUDA" = ok ]; then cuda_line="yes"; else cuda_line="no: $CUDA; the CUDA part was skipped"; fi
{
  echo "# scripts/check-gpu.sh report"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- commit: $commit$dirty"
  echo "- machine: $(machine)"
  echo "- CUDA: $cuda_line"
  echo "- result: **$overall**"
  echo
  cat "$BODY"
} > "$REPORT"
log "check-gpu: $overall; report: $REPORT"
exit "$FAILED"
