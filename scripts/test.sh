#!/usr/bin/env bash
# Set up the virtual environment (if needed, scripts/setup_env.sh) and run the
# test suite in two worker processes of one thread each (pytest-xdist):
# python -m pytest -q -p no:cacheprovider -n 2 tests -rs PYTEST_ARGS...
# FAIRSEQ_LOCAL_TEST_WORKERS=N sets the number of workers (0: one process,
# torch's own threads).
#
# Usage: bash scripts/test.sh [PYTEST_ARGS...]
#        e.g. bash scripts/test.sh -x -k export
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
workers="${FAIRSEQ_LOCAL_TEST_WORKERS:-2}"
if [[ ! "$workers" =~ ^[0-9]+$ ]]; then
  echo "error: FAIRSEQ_LOCAL_TEST_WORKERS must be a number of workers (0: none), not '$workers'" >&2
  exit 1
fi
cd "$FAIRSEQ_LOCAL_ROOT"
source scripts/setup_env.sh
if [ "$workers" -gt 0 ]; then
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # the cores go to the workers, not to each one's threads
  set -- -n "$workers" "$@"
fi
exec python -m pytest -q -p no:cacheprovider tests -rs "$@"
