#!/usr/bin/env bash
# Set up the virtual environment (if needed) and run the test suite.
# Usage: bash scripts/test.sh [PYTEST_ARGS...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup_env.sh
exec python -m pytest -q -p no:cacheprovider tests "$@"
