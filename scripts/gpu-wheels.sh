#!/usr/bin/env bash
# Download, here, the wheels that a GPU machine without internet needs to run
# `scripts/check-gpu.sh --no-setup`: fairseq (fairseq-fixed) and the packages
# of requirements.txt that such a machine's image usually lacks, for its Python
# (default 3.12, x86-64 Linux). Its own torch is used, never one from here.
#
# Usage: bash scripts/gpu-wheels.sh [--out DIR] [--python-version X.Y]
#
# --out DIR              where the wheels go (default .whl, ignored by git)
# --python-version X.Y   the GPU machine's Python (default 3.12)
#
# On the GPU machine, from the checkout (with DIR carried along):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site bash scripts/check-gpu.sh --no-setup --budget 420
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT=.whl PYVER=3.12
parse_options "--out=OUT --python-version=PYVER" "$@"
[[ "$PYVER" =~ ^3\.[0-9]+$ ]] || die "--python-version takes X.Y, e.g. 3.12, not '$PYVER'"
cd "$FAIRSEQ_LOCAL_ROOT"
mkdir -p "$OUT" || die "cannot create '$OUT'"

# pinned: the version in requirements.txt (one line if it has none)
pinned() {
  local line
  line="$(grep -E "^$1==" requirements.txt)" || die "requirements.txt pins no $1"
  echo "$line"
}
# Missing from a typical CUDA image (PyTorch, numpy, scipy, scikit-learn,
# sacrebleu, regex, tqdm, tensorboard, sentencepiece, tokenizers, matplotlib
# and pytest are usually there).
SPECS=("fairseq-fixed==0.12.3.1" "$(pinned hydra-core)" "$(pinned omegaconf)" "$(pinned bitarray)" "$(pinned cffi)"
       "$(pinned sacremoses)" "$(pinned subword-nmt)" "$(pinned conllu)" "mock==5.2.0")
TAG="${PYVER/./}"
for spec in "${SPECS[@]}"; do
  log "gpu-wheels: $spec (cp$TAG, x86-64)"
  python -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$OUT" "$spec" || die "cannot download $spec for Python $PYVER"
done
# omegaconf's parser runtime has no wheel on the index: built here (pure Python).
log "gpu-wheels: antlr4-python3-runtime==4.9.3 (built here, pure Python)"
python -m pip wheel -q --no-deps -w "$OUT" antlr4-python3-runtime==4.9.3 || die "cannot build antlr4-python3-runtime"
log "gpu-wheels: $(ls "$OUT"/*.whl | wc -l) wheels, $(du -sh "$OUT" | cut -f1), in $OUT"
