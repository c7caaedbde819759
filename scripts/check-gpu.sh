#!/usr/bin/env bash
# The GPU check, in one command: the half-precision and compile tests that need
# no GPU, then, where CUDA is available, the CUDA checks in order of what they
# tell, each stopped at its share of a time budget, and one Markdown report of
# it all.
#
# Usage: bash scripts/check-gpu.sh [--no-setup] [--budget SECONDS] [--full] [--out DIR]
#
# --no-setup        use the python on PATH as it is: install and download
#                   nothing (no scripts/setup_env.sh, no .venv); the checkout
#                   is put on PYTHONPATH and `fairseq-local` runs from it. That
#                   python needs torch and fairseq (fairseq-fixed==0.12.3.1).
# --budget SECONDS  the time the phases may take together (default 480); each
#                   phase is stopped at its share, and said so.
# --full            every CUDA test and the full kernel benchmark, without a
#                   budget (machines with time: 20-40 minutes).
# --out DIR         where the report (DIR/report.md) and each phase's full
#                   output (DIR/*.log) go (default runs/check-gpu).
#
# Phases, in order (share of the budget):
#   CPU part (runs anywhere; without CUDA it has the whole budget):
#     compiled FlexAttention at every length through inductor, and every
#     fallback announced (tests/unit/attention/test_fallbacks.py)      10 %
#     half precision on the CPU (pytest -m "not slow" tests/unit/precision) 15 %
#   CUDA part (skipped, with one line saying why, without a CUDA device):
#     compiled FlexAttention training on CUDA at new lengths
#       (tests/cuda/test_cuda_flex_training.py)                          15 %
#     the equivalence matrix for one layer of each kind (tied, mixed,
#       mixed-sparse, mixed-learned) against fp32 dense                  15 %
#     40 updates of fairseq-train --fp16: DAM_s, AAA, BigBird under
#       flex, (i) under window (tests/cuda/test_cuda_quick_training.py)  20 %
#     one layer's forward and backward at n = 1024, 4096, 8192: dense,
#       window, flex against SDPA, fp16 then bf16 (benchmark kernels)    25 %
#   A benchmark cell not measured (a "-" the table explains) is a failure line.
#
# Exits 0 when every phase that ran passed (without CUDA: the CPU part), 1
# otherwise; a phase stopped at its share did not pass.
set -euo pipefail
for a in "$@"; do [ "$a" != --no-setup ] || export VENV=/nonexistent; done  # lib.sh: not the checkout's .venv
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT=runs/check-gpu BUDGET=480 NO_SETUP=0 FULL=0
parse_options "--out=OUT --budget=BUDGET --no-setup+NO_SETUP --full+FULL" "$@"
[[ "$BUDGET" =~ ^[0-9]+$ ]] && [ "$BUDGET" -ge 60 ] || die "--budget takes whole seconds, 60 or more, not '$BUDGET'"
cd "$FAIRSEQ_LOCAL_ROOT"
if [ "$NO_SETUP" = 1 ]; then
  use_python_on_path
else
  source scripts/setup_env.sh
fi
mkdir -p "$OUT" || die "cannot create '$OUT'"
OUT="$(cd "$OUT" && pwd)"
REPORT="$OUT/report.md"
BODY="$(mktemp)"
NO_SETUP_BIN="${NO_SETUP_BIN:-}"
trap 'rm -f "$BODY"; [ -z "$NO_SETUP_BIN" ] || rm -rf "$NO_SETUP_BIN"' EXIT
FAILED=0

# cuda_status : "ok" or the one-line reason why there is no CUDA device.
cuda_status() { fairseq-local inspect --machine --field cuda 2> /dev/null || echo "unknown (fairseq-local inspect --machine failed)"; }

# machine : one line describing the GPU (if any), the CPU and torch.
machine() { fairseq-local inspect --machine --field machine 2> /dev/null || echo "unknown (fairseq-local inspect --machine failed)"; }

# pytest_summary LOG : pytest's last summary line ("3 passed, 2 skipped in 4.1s").
pytest_summary() {
  grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|deselected|error)|no tests ran' "$1" | tail -1 | sed -E 's/^=+ //; s/ =+$//'
}

# step NAME TITLE KIND SHARE COMMAND... : run COMMAND (output to OUT/NAME.log)
# for at most SHARE % of the budget (0: no limit), log its result and add its
# section to the report. KIND is pytest or bench.
step() {
  local name="$1" title="$2" kind="$3" share="$4"; shift 4
  local logf="$OUT/$name.log" start status result shown limit=""
  shown="$(for a in "$@"; do case "$a" in *[!A-Za-z0-9_./:=,-]*) printf '"%s" ' "$a" ;; *) printf '%s ' "$a" ;; esac; done)"
  shown="${shown% }"
  [ "$share" = 0 ] || limit=$(( BUDGET * share / 100 ))
  log "$title${limit:+ (at most $limit s)}: $shown"
  start=$(date +%s)
  set +e
  if [ -n "$limit" ]; then timeout --kill-after=15 "$limit" "$@" > "$logf" 2>&1; else "$@" > "$logf" 2>&1; fi
  status=$?
  set -e
  local seconds=$(( $(date +%s) - start ))
  if [ "$status" = 0 ] && [ "$kind" = bench ] && grep -q "not measured: " "$logf"; then  # kernels' '-' cells
    result="FAILED (a benchmark cell was skipped: $(grep -m1 -o 'not measured: .*' "$logf" | cut -c1-160))"; FAILED=1
  elif [ "$status" = 0 ]; then result="passed"
  elif [ -n "$limit" ] && { [ "$status" = 124 ] || [ "$status" = 137 ]; }; then
    result="STOPPED at its share of the budget ($limit s): not checked to the end"; FAILED=1
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

# With CUDA the CPU part takes its shares; without, the whole budget.
if [ "$FULL" = 1 ]; then CPU_SHARE=(0 0); elif [ "$CUDA" = ok ]; then CPU_SHARE=(10 15); else CPU_SHARE=(40 60); fi
PYTEST=(python -m pytest -q -p no:cacheprovider -rfEs)

echo "## CPU part" >> "$BODY"; echo >> "$BODY"
step compile-cpu "compiled FlexAttention at every length (inductor, CPU) and announced fallbacks" pytest \
  "${CPU_SHARE[0]}" "${PYTEST[@]}" tests/unit/attention/test_fallbacks.py
step precision "half precision on the CPU (tests/unit/precision)" pytest "${CPU_SHARE[1]}" \
  "${PYTEST[@]}" -m "not slow" tests/unit/precision

echo "## CUDA part" >> "$BODY"; echo >> "$BODY"
if [ "$CUDA" != ok ]; then
  log "check-gpu: CUDA skipped: $CUDA"
  skipped "CUDA tests (tests/cuda) and kernel benchmarks (fp16, bf16)" "$CUDA"
elif [ "$FULL" = 1 ]; then
  step cuda-tests "CUDA tests (tests/cuda)" pytest 0 "${PYTEST[@]}" -m cuda tests/cuda
  for dtype in fp16 bf16; do
    step "bench-$dtype" "kernel benchmark, $dtype on CUDA" bench 0 \
      fairseq-local benchmark kernels --device cuda --dtype "$dtype" --lengths 512 2048 8192 --heads 8 \
      --impls auto dense window flex --quiet
  done
else
  step cuda-compile "compiled FlexAttention training on CUDA at new lengths" pytest 15 \
    "${PYTEST[@]}" -m cuda tests/cuda/test_cuda_flex_training.py
  step cuda-equivalence "every impl and dtype against fp32 dense, one layer of each kind" pytest 15 \
    "${PYTEST[@]}" -m cuda tests/cuda/test_cuda_equivalence.py -k "not autocast"
  step cuda-training "40 fp16 updates: DAM_s, AAA, BigBird (flex), (i) (window)" pytest 20 \
    "${PYTEST[@]}" -m cuda tests/cuda/test_cuda_quick_training.py
  for dtype in fp16 bf16; do
    step "bench-$dtype" "one layer at n = 1024, 4096, 8192, $dtype on CUDA" bench 12 \
      fairseq-local benchmark kernels --device cuda --dtype "$dtype" --lengths 1024 4096 8192 --heads 8 \
      --cases band2-post tied-post bigbird --impls dense window flex --repeats 3 --quiet
  done
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
  echo "- python: $(python -c 'import sys, torch; print(sys.executable, "(torch", torch.__version__ + ")")' 2> /dev/null || echo '?')"
  if [ "$FULL" = 1 ]; then echo "- budget: none (--full)"; else echo "- budget: $BUDGET s"; fi
  echo "- result: **$overall**"
  echo
  cat "$BODY"
} > "$REPORT"
log "check-gpu: $overall; report: $REPORT"
exit "$FAILED"
