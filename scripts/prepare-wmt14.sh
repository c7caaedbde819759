#!/usr/bin/env bash
# Prepare WMT'14 English-German or English-Russian: take the official archives
# (downloaded, or from --raw-dir), normalise punctuation and tokenise with
# sacremoses (Moses normalize-punctuation, remove-non-printing-char, tokenizer
# -a, no escaping), clean the training data like Moses' clean-corpus-n (1 to
# 250 tokens per side, length ratio at most 1.5), then learn joint BPE and
# binarise with scripts/bpe-binarize.sh. Idempotent and resumable.
#
# Usage: scripts/prepare-wmt14.sh en-de|en-ru [--raw-dir DIR] [--download-dir DIR]
#            [--manifest FILE]... [--extra-test NAME]... [--out DIR] [--merges N]
#            [--sentencepiece] [--workers N]
#
# Training data, WMT'14 constrained (archive: corpus):
#   en-de  training-parallel-europarl-v7.tgz: training/europarl-v7.de-en.{de,en}
#          training-parallel-commoncrawl.tgz: commoncrawl.de-en.{de,en}
#          training-parallel-nc-v9.tgz: training/news-commentary-v9.de-en.{de,en}
#   en-ru  training-parallel-commoncrawl.tgz: commoncrawl.ru-en.{ru,en}
#          training-parallel-nc-v9.tgz: training/news-commentary-v9.ru-en.{ru,en}
#          wiki-titles.tgz: wiki/ru-en/wiki.ru-en ("ru ||| en" lines; or .{ru,en})
#          Yandex 1M (1mcorpus/corpus.en_ru.1m.{en,ru}; needs registration at
#          translate.yandex.ru/corpus): give it with --manifest.
#   (WMT'14 has no UN corpus for ru-en; its UN data is fr-en and es-en only.)
# Valid: newstest2013 (dev.tgz: dev/newstest2013.L or its .sgm files).
# Test:  newstest2014 (test-full.tgz: test-full/newstest2014-deen-{src,ref}.L.sgm,
#        newstest2014-ruen-...); --extra-test NAME adds test1, test2, ... read
#        from dev.tgz, test-full.tgz, wmt19-dev.tgz (WMT'19 dev.tgz renamed,
#        which holds newstest2018) or any NAME.L / NAME-xxyy-{src,ref}.L.sgm
#        file under the raw directory.
#
# --raw-dir DIR       offline: DIR holds the archives above under their official
#                     names; nothing is downloaded.
# --download-dir DIR  online (no --raw-dir): download missing archives there
#                     (resumable); default data-bin/wmt14-download.
# --manifest FILE     more parallel corpora, one per line "SOURCE<TAB>TARGET"
#                     (English file first; paths relative to FILE; '#' comments).
# --extra-test NAME   another test set, e.g. newstest2018 (repeatable).
# --out DIR           default data-bin/wmt14_<pair>.
# --merges N          BPE merges (default 32000 en-de, 40000 en-ru); with
#                     --sentencepiece, the number of SentencePiece pieces.
# --sentencepiece     joint SentencePiece BPE model instead of subword-nmt.
# --workers N         processes for tokenising and binarising (default: all cores).
# Output: OUT/{fairseq-preprocess files}, OUT/bpe/, OUT/tok/{split}.L (tokenised;
# train also cleaned), OUT/summary.json (sentences per split before/after cleaning, corpora,
# dictionary size, BPE settings), OUT/work/ (extracted and tokenised corpora).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SCRIPTS="$FAIRSEQ_LOCAL_ROOT/scripts"
WMT_PY=(python -m fairseq_local_data.wmt)  # no fairseq import: a fast start

PAIR="" RAW_DIR="" DL="$FAIRSEQ_LOCAL_ROOT/data-bin/wmt14-download" OUT="" MERGES="" SPM=0
WORKERS="$(nproc 2>/dev/null || echo 2)"
MANIFESTS=() EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --raw-dir|--download-dir|--manifest|--extra-test|--out|--merges|--workers)
      needs_value "$@" ;;&
    --raw-dir) RAW_DIR="$2"; shift 2 ;;
    --download-dir) DL="$2"; shift 2 ;;
    --manifest) MANIFESTS+=("$2"); shift 2 ;;
    --extra-test) EXTRA+=("$2"); shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --merges) MERGES="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --sentencepiece) SPM=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [ -z "$PAIR" ] || die "unexpected argument '$1' (see --help)"; PAIR="$1"; shift ;;
  esac
done

WMT13=http://statmt.org/wmt13 WMT14=http://statmt.org/wmt14
declare -A URL=(
  [training-parallel-europarl-v7.tgz]=$WMT13/training-parallel-europarl-v7.tgz
  [training-parallel-commoncrawl.tgz]=$WMT13/training-parallel-commoncrawl.tgz
  [training-parallel-nc-v9.tgz]=$WMT14/training-parallel-nc-v9.tgz
  [wiki-titles.tgz]=$WMT14/wiki-titles.tgz
  [dev.tgz]=$WMT14/dev.tgz
  [test-full.tgz]=$WMT14/test-full.tgz
  [wmt19-dev.tgz]=http://data.statmt.org/wmt19/translation-task/dev.tgz
)
# "archive corpus" per training corpus; the corpus files are CORPUS.{S,T}.
require_pair "$PAIR"
case "$PAIR" in
  en-de) S=en T=de DEFAULT_MERGES=32000
    CORPORA=("training-parallel-europarl-v7.tgz europarl-v7.de-en"
             "training-parallel-commoncrawl.tgz commoncrawl.de-en"
             "training-parallel-nc-v9.tgz news-commentary-v9.de-en") ;;
  en-ru) S=en T=ru DEFAULT_MERGES=40000
    CORPORA=("training-parallel-commoncrawl.tgz commoncrawl.ru-en"
             "training-parallel-nc-v9.tgz news-commentary-v9.ru-en"
             "wiki-titles.tgz wiki.ru-en") ;;
esac
MERGES="${MERGES:-$DEFAULT_MERGES}"
OUT="${OUT:-$FAIRSEQ_LOCAL_ROOT/data-bin/wmt14_$PAIR}"
[[ "$MERGES" =~ ^[1-9][0-9]*$ ]] || die "--merges must be a positive integer, not '$MERGES'"
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer, not '$WORKERS'"
for name in "${EXTRA[@]}"; do
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --extra-test name '$name'"
done

check_out_dir "$OUT" "--out"
if [ -n "$RAW_DIR" ]; then check_apart "$OUT" "$RAW_DIR"; else check_apart "$OUT" "$DL"; check_out_dir "$DL" "--download-dir"; fi
for m in ${MANIFESTS[@]+"${MANIFESTS[@]}"}; do [ -f "$m" ] || die "no manifest '$m'"; check_apart "$OUT" "$m"; done

# --- 1. archives: downloaded (online) or given (--raw-dir) -------------------
TEST_ARCHIVES=(dev.tgz test-full.tgz)
[ "${#EXTRA[@]}" = 0 ] || TEST_ARCHIVES+=(wmt19-dev.tgz)
needed=(); for c in "${CORPORA[@]}"; do needed+=("${c%% *}"); done
needed+=(dev.tgz test-full.tgz)

download() {  # download ARCHIVE into $DL unless it is there (resumes a partial one)
  local f="$DL/$1" url="${URL[$1]}"
  [ -s "$f" ] && return 0
  mkdir -p "$DL"
  log "downloading $url"
  if command -v curl >/dev/null; then
    curl -fL --retry 3 -C - -o "$f.part" "$url" || die "download failed: $url"
  else
    wget -c -O "$f.part" "$url" || die "download failed: $url"
  fi
  mv "$f.part" "$f"
}

if [ -n "$RAW_DIR" ]; then
  [ -d "$RAW_DIR" ] || die "--raw-dir: no such directory: $RAW_DIR"
  RAW_DIR="$(cd "$RAW_DIR" && pwd)"
  for a in $(printf '%s\n' "${needed[@]}" | sort -u); do
    [ -f "$RAW_DIR/$a" ] || die "missing archive: $RAW_DIR/$a (download ${URL[$a]})"
  done
else
  for a in $(printf '%s\n' "${needed[@]}" | sort -u) ${EXTRA[@]:+wmt19-dev.tgz}; do download "$a"; done
  RAW_DIR="$(cd "$DL" && pwd)"
fi
if [ "$PAIR" = en-ru ] && [ "${#MANIFESTS[@]}" = 0 ]; then
  log "warning: no --manifest: the Yandex 1M corpus of WMT'14 en-ru (1mcorpus/corpus.en_ru.1m.{en,ru}) is left out"
fi

W="$OUT/work" TOK="$OUT/tok"
mkdir -p "$W/extract" "$W/tok" "$TOK"

# --- 2. extract the training corpora and the test sets ----------------------
train_raw=()  # "name<TAB>source file<TAB>target file" per training corpus
for c in "${CORPORA[@]}"; do
  archive="${c%% *}" corpus="${c#* }"
  dir="$W/extract/${archive%.tgz}"
  if step_done "$dir/.$corpus.done" "$dir/$corpus.$S" "$dir/$corpus.$T"; then
    log "skip: $corpus already extracted"
  else
    log "extracting $corpus from $RAW_DIR/$archive"
    "${WMT_PY[@]}" extract-corpus "$RAW_DIR/$archive" "$dir" "$corpus" "$S" "$T"
    step_finish "$dir/.$corpus.done" "$dir/$corpus.$S" "$dir/$corpus.$T"
  fi
  train_raw+=("$corpus"$'\t'"$dir/$corpus.$S"$'\t'"$dir/$corpus.$T")
done
for m in "${MANIFESTS[@]}"; do
  listing="$("${WMT_PY[@]}" manifest "$m")" || exit 1
  while IFS=$'\t' read -r name s t; do
    for c in "${train_raw[@]}"; do [ "${c%%$'\t'*}" != "$name" ] || die "corpus $name listed twice ($m)"; done
    train_raw+=("$name"$'\t'"$s"$'\t'"$t")
  done <<< "$listing"
done
test_dirs=()
for a in "${TEST_ARCHIVES[@]}"; do
  dir="$W/extract/${a%.tgz}"
  [ -f "$RAW_DIR/$a" ] || continue  # only wmt19-dev.tgz is optional
  mkdir -p "$dir"
  shopt -s nullglob; files=("$dir"/newstest*); shopt -u nullglob
  if [ "${#files[@]}" -gt 0 ] && step_done "$dir/.done" "${files[@]}"; then
    log "skip: test sets of $a already extracted"
  else
    log "extracting the test sets of $RAW_DIR/$a"
    "${WMT_PY[@]}" extract "$RAW_DIR/$a" "$dir" 'newstest*'
    step_finish "$dir/.done" "$dir"/newstest*
  fi
  test_dirs+=("$dir")
done
test_dirs+=("$RAW_DIR")

# --- 3. normalise and tokenise ----------------------------------------------
tokenize() {  # tokenize IN OUT LANG: skipped while IN and OUT match the stamp
  local in="$1" out="$2" stamp; stamp="$(dirname "$2")/.$(basename "$2").done"
  if step_done "$stamp" "$in" "$out"; then
    log "skip: $out already tokenised"
  else
    log "tokenising $in -> $out"
    "${WMT_PY[@]}" tok --lang "$3" --workers "$WORKERS" "$in" "$out"
    step_finish "$stamp" "$in" "$out"
  fi
}
clean_args=() clean_files=() corpus_names=()
for c in "${train_raw[@]}"; do
  IFS=$'\t' read -r name s t <<< "$c"
  require_parallel "$s" "$t"
  tokenize "$s" "$W/tok/$name.$S" "$S"
  tokenize "$t" "$W/tok/$name.$T" "$T"
  require_parallel "$W/tok/$name.$S" "$W/tok/$name.$T"
  clean_args+=(--corpus "$name" "$W/tok/$name.$S" "$W/tok/$name.$T")
  clean_files+=("$W/tok/$name.$S" "$W/tok/$name.$T")
  corpus_names+=("$name")
done
# split -> test set; fairseq-preprocess names extra test sets test1, test2, ...
declare -A TESTSET=([valid]=newstest2013 [test]=newstest2014)
SPLITS="train valid test"
for i in "${!EXTRA[@]}"; do TESTSET[test$((i + 1))]="${EXTRA[$i]}"; SPLITS+=" test$((i + 1))"; done
for split in $SPLITS; do
  [ "$split" != train ] || continue
  files="$("${WMT_PY[@]}" find-test "${TESTSET[$split]}" --src "$S" --tgt "$T" "${test_dirs[@]}")" || exit 1
  tokenize "$(sed -n 1p <<< "$files")" "$TOK/$split.$S" "$S"
  tokenize "$(sed -n 2p <<< "$files")" "$TOK/$split.$T" "$T"
  require_parallel "$TOK/$split.$S" "$TOK/$split.$T"
done

# --- 4. clean the training data (clean-corpus-n: 1-250 tokens, ratio 1.5) ---
if step_done "$W/.clean.done" "${clean_files[@]}" "$TOK/train.$S" "$TOK/train.$T" "$W/clean.json"; then
  log "skip: training data already cleaned"
else
  log "cleaning the training data (${corpus_names[*]})"
  "${WMT_PY[@]}" clean "${clean_args[@]}" --out-src "$TOK/train.$S" --out-tgt "$TOK/train.$T" \
    --stats "$W/clean.json" --ratio 1.5 --min 1 --max 250
  step_finish "$W/.clean.done" "${clean_files[@]}" "$TOK/train.$S" "$TOK/train.$T" "$W/clean.json"
fi

# --- 5. joint BPE (or SentencePiece) and fairseq-preprocess -----------------
bpe_args=(--raw "$TOK" --out "$OUT" --src "$S" --tgt "$T" --merges "$MERGES" --splits "$SPLITS" --workers "$WORKERS")
if [ "$SPM" = 1 ]; then
  bpe_args+=(--sentencepiece); bpe="{\"method\": \"sentencepiece\", \"model_type\": \"bpe\", \"pieces\": $MERGES, \"model\": \"bpe/spm.model\"}"
else
  bpe="{\"method\": \"subword-nmt\", \"merges\": $MERGES, \"codes\": \"bpe/codes\"}"
fi
# New training data or BPE settings: learn BPE again (bpe-binarize.sh's stamps
# only check its own outputs).
{ echo "$bpe"; cat "$W/.clean.done"; } > "$OUT/.bpe-config.new"
if cmp -s "$OUT/.bpe-config.new" "$OUT/.bpe-config"; then
  rm "$OUT/.bpe-config.new"
else
  [ ! -f "$OUT/.bpe-config" ] || log "training data or BPE settings changed: learning BPE again"
  rm -rf "$OUT/bpe" "$OUT/.binarize.done"
  mv "$OUT/.bpe-config.new" "$OUT/.bpe-config"
fi
"$SCRIPTS/bpe-binarize.sh" "${bpe_args[@]}"

# --- 6. summary ---------------------------------------------------------------
split_args=(--split "train=$(IFS=+; echo "${corpus_names[*]}")")
for split in $SPLITS; do [ "$split" = train ] || split_args+=(--split "$split=${TESTSET[$split]}"); done
"${WMT_PY[@]}" summary --data "$OUT" --src "$S" --tgt "$T" "${split_args[@]}" \
  --clean-stats "$W/clean.json" --out "$OUT/summary.json" --set "bpe=$bpe" \
  --set 'tokenizer="sacremoses: normalize-punctuation, remove-non-printing-char, tokenizer -a -no-escape"'
log "WMT'14 $PAIR ready in $OUT (summary: $OUT/summary.json)"
