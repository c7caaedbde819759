#!/usr/bin/env bash
# Set up the virtual environment (if needed, scripts/setup_env.sh) and run the
# test suite: python -m pytest -q -p no:cacheprovider tests -rs PYTEST_ARGS...
#
# Usage: bash scripts/test.sh [PYTEST_ARGS...]
#        e.g. bash scripts/test.sh -x -k export
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
cd "$FAIRSEQ_LOCAL_ROOT"
source scripts/setup_env.sh
exec python -m pytest -q -p no:cacheprovider tests -rs "$@"
