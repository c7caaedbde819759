#!/usr/bin/env bash
# Create or reuse the virtual environment in the checkout (.venv by default) and
# install everything pinned in requirements.txt, fairseq-fixed (without its
# dependencies) and this plugin. Re-running is cheap: the install is skipped while
# requirements.txt and setup.py are unchanged.
#
# Usage: source scripts/setup_env.sh   (or: bash scripts/setup_env.sh)
# Env:   VENV=path  PYTHON=python3.11
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
FAIRSEQ_PIN="fairseq-fixed==0.12.3.1"

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PYTHON --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.fairseq-local-stamp"
want="$(cat "$ROOT/requirements.txt" "$ROOT/setup.py" | sha256sum | cut -d' ' -f1) $FAIRSEQ_PIN"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing dependencies into $VENV (first run: a few minutes)"
  "$VENV/bin/python" -m pip install -q --upgrade pip wheel setuptools
  "$VENV/bin/python" -m pip install -q -r "$ROOT/requirements.txt"
  "$VENV/bin/python" -m pip install -q --no-deps "$FAIRSEQ_PIN"
  "$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT"
  echo "$want" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"
