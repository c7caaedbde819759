#!/usr/bin/env bash
# Prepare the BERT pretraining corpus, English Wikipedia plus Project Gutenberg
# (Pande et al. §5: Wikipedia and the Lahiri (2014) Gutenberg subset), for
# fairseq's masked_lm task. Idempotent and resumable.
#
# Usage: scripts/prepare-bert-corpus.sh [--wiki DUMP.xml.bz2] [--gutenberg BOOKS.zip]
#            [--out DIR] [--bpe gpt2|sentencepiece] [--gpt2-dir DIR] [--srcdict FILE]
#            [--vocab-size N] [--valid-docs N] [--test-docs N] [--seed N]
#            [--workers N] [--download DIR]
#
# Steps:
#   1. WikiExtractor (run as its own program) turns the *-pages-articles*.xml.bz2
#      dump into plain-text articles: templates expanded, links, tables and
#      markup removed, redirects skipped.
#   2. Documents are split into sentences with BlingFire (headings of fewer
#      than three words dropped; Gutenberg headers, footers and licences
#      stripped), exact duplicate documents removed, and --valid-docs and
#      --test-docs documents held out (chosen by a seeded hash of their text).
#   3. BPE: GPT-2 byte-level BPE as RoBERTa (fairseq's
#      examples.roberta.multiprocessing_bpe_encoder), or a SentencePiece BPE
#      model trained on the training split.
#   4. fairseq-preprocess --only-source into OUT: dict.txt and
#      {train,valid,test}.{bin,idx}, one sentence a line with a blank line
#      between documents (masked_lm --sample-break-mode complete or complete_doc).
#
# --wiki FILE        a Wikipedia dump, e.g. enwiki-latest-pages-articles.xml.bz2.
# --gutenberg FILE   a zip of plain-text books (.txt members), e.g. the Lahiri
#                    corpus's Gutenberg.zip. At least one of the two is needed.
# --out DIR          default data-bin/bert-corpus.
# --bpe KIND         sentencepiece (default) or gpt2.
# --gpt2-dir DIR     GPT-2's encoder.json and vocab.bpe (checked by SHA-256);
#                    default data-bin/gpt2-bpe, which scripts/setup_env.sh
#                    fills ("python -m fairseq_local_data.bpe fetch-gpt2":
#                    pip download of openai-whisper==20230124 from PyPI);
#                    nothing is downloaded here.
# --srcdict FILE     with gpt2: RoBERTa's dict.txt (GPT-2 symbols by frequency)
#                    instead of a dictionary counted on this corpus.
# --vocab-size N     SentencePiece pieces (default 30000, about BERT's WordPiece
#                    size; lowered to a third of the distinct words of a small corpus).
# --valid-docs N, --test-docs N
#                    held-out documents (default: 5% of the documents each, at
#                    least 1, at most 1000).
# --seed N           seed of the holdout choice (default 1).
# --workers N        processes (default: all cores).
# --download DIR     with a network: download the latest English Wikipedia dump
#                    into DIR (resumable) and use it as --wiki. The Gutenberg
#                    corpus is on Google Drive: download Gutenberg.zip from
#                    https://web.eecs.umich.edu/~lahiri/gutenberg_dataset.html
#                    and give it with --gutenberg. RoBERTa's GPT-2 files:
#                    https://dl.fbaipublicfiles.com/fairseq/gpt2_bpe/{encoder.json,vocab.bpe,dict.txt}
# Output: OUT/{dict.txt,train,valid,test}.{bin,idx}, OUT/raw/{split}.txt
# (sentences), OUT/bpe/ (the tokeniser and encoded text), OUT/summary.txt,
# OUT/work/ (WikiExtractor output).
# Stand-ins: "python -m fairseq_local_data.standins --out DIR" writes a small
# dump and zip in these formats, for tests and demos.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CORPUS_PY=(python -m fairseq_local_data.bert_corpus)
BPE_PY=(python -m fairseq_local_data.bpe)

WIKI="" BOOKS="" OUT="$FAIRSEQ_LOCAL_ROOT/data-bin/bert-corpus" BPE=sentencepiece GPT2_DIR="" SRCDICT=""
VOCAB=30000 VALID=auto TEST=auto SEED=1 DOWNLOAD=""
WORKERS="$(nproc 2>/dev/null || echo 2)"
while [ $# -gt 0 ]; do
  case "$1" in
    --wiki|--gutenberg|--out|--bpe|--gpt2-dir|--srcdict|--vocab-size|--valid-docs|--test-docs|--seed|--workers|--download)
      needs_value "$@" ;;&
    --wiki) WIKI="$2"; shift 2 ;;
    --gutenberg) BOOKS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --bpe) BPE="$2"; shift 2 ;;
    --gpt2-dir) GPT2_DIR="$2"; shift 2 ;;
    --srcdict) SRCDICT="$2"; shift 2 ;;
    --vocab-size) VOCAB="$2"; shift 2 ;;
    --valid-docs) VALID="$2"; shift 2 ;;
    --test-docs) TEST="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --download) DOWNLOAD="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
case "$BPE" in gpt2|sentencepiece) ;; *) die "--bpe must be gpt2 or sentencepiece, not '$BPE'" ;; esac
[[ "$VOCAB" =~ ^[1-9][0-9]*$ ]] || die "--vocab-size must be a positive integer, not '$VOCAB'"
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer, not '$WORKERS'"
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed must be a non-negative integer, not '$SEED'"
for v in "$VALID" "$TEST"; do
  [[ "$v" =~ ^(auto|[0-9]+)$ ]] || die "--valid-docs and --test-docs must be non-negative integers, not '$v'"
done
[ -z "$SRCDICT" ] || [ "$BPE" = gpt2 ] || die "--srcdict goes with --bpe gpt2"
[ -z "$SRCDICT" ] || [ -s "$SRCDICT" ] || die "missing or empty dictionary: $SRCDICT"

# OUT's folders and files, written here, are none of the inputs.
check_out_dir "$OUT" "--out"
for d in "$OUT/work" "$OUT/raw" "$OUT/bpe"; do check_apart "$d" "$WIKI" "$BOOKS" "$GPT2_DIR" "$SRCDICT" "$DOWNLOAD"; done
for f in dict.txt summary.txt preprocess.log {train,valid,test}.{bin,idx}; do
  check_not_same "$OUT/$f" "$WIKI" "$BOOKS" "$SRCDICT" "${DOWNLOAD:+$DOWNLOAD/enwiki-latest-pages-articles.xml.bz2}"
done
[ -z "$DOWNLOAD" ] || check_out_dir "$DOWNLOAD" "--download"

if [ -n "$DOWNLOAD" ]; then  # needs a network; not used by the tests
  mkdir -p "$DOWNLOAD"
  url=https://dumps.wikimedia.org/enwiki/latest/enwiki-latest-pages-articles.xml.bz2
  log "downloading $url into $DOWNLOAD (resumable)"
  wget -c -O "$DOWNLOAD/enwiki-latest-pages-articles.xml.bz2" "$url" || die "download failed: $url"
  [ -n "$WIKI" ] || WIKI="$DOWNLOAD/enwiki-latest-pages-articles.xml.bz2"
  [ -n "$BOOKS" ] || log "Gutenberg: download Gutenberg.zip from https://web.eecs.umich.edu/~lahiri/gutenberg_dataset.html and pass --gutenberg"
fi
[ -n "$WIKI" ] || [ -n "$BOOKS" ] || die "no corpus given: --wiki DUMP.xml.bz2 and/or --gutenberg BOOKS.zip (see --help)"
[ -z "$WIKI" ] || "${CORPUS_PY[@]}" check-wiki "$WIKI"
[ -z "$BOOKS" ] || "${CORPUS_PY[@]}" check-gutenberg "$BOOKS" > /dev/null

W="$OUT/work" RAW="$OUT/raw" BPEDIR="$OUT/bpe"
mkdir -p "$W" "$RAW" "$BPEDIR"
# The inputs' identity (path, size, time) and the split settings: a change redoes the steps.
for f in "$WIKI" "$BOOKS"; do [ -z "$f" ] || stat -L -c '%n %s %Y' "$(realpath "$f")"; done > "$W/inputs.id"
echo "valid=$VALID test=$TEST seed=$SEED" > "$W/split.args"

# --- 1. WikiExtractor -----------------------------------------------------------
wiki_files() { find "$W/wiki" -type f -name 'wiki_*' 2>/dev/null | sort; }
if [ -n "$WIKI" ]; then
  # shellcheck disable=SC2046
  if step_done "$W/.extract.done" "$W/inputs.id" $(wiki_files); then
    log "skip: $WIKI already extracted"
  else
    log "extracting $WIKI with WikiExtractor ($WORKERS processes)"
    rm -rf "$W/wiki" "$W/wiki.tmp"
    python -m wikiextractor.WikiExtractor "$WIKI" -o "$W/wiki.tmp" --processes "$WORKERS" \
      2> >(tee "$W/wikiextractor.log" | grep --line-buffered -v '^INFO: Using' >&2) > /dev/null \
      || die "WikiExtractor failed on $WIKI (log: $W/wikiextractor.log)"
    mv "$W/wiki.tmp" "$W/wiki"
    [ -n "$(wiki_files)" ] || die "WikiExtractor found no articles in $WIKI"
    # shellcheck disable=SC2046
    step_finish "$W/.extract.done" "$W/inputs.id" $(wiki_files)
  fi
fi

# --- 2. sentences, dedup, holdout ---------------------------------------------------
split_files=("$RAW/train.txt" "$RAW/valid.txt" "$RAW/test.txt" "$RAW/stats.json")
# shellcheck disable=SC2046
if step_done "$RAW/.split.done" "$W/inputs.id" "$W/split.args" $(wiki_files) "${split_files[@]}"; then
  log "skip: sentences already split into $RAW"
else
  log "splitting sentences, removing duplicate documents, holding out valid/test documents"
  args=(split --out "$RAW" --valid-docs "$VALID" --test-docs "$TEST" --seed "$SEED" --workers "$WORKERS")
  [ -z "$WIKI" ] || args+=(--wiki-dir "$W/wiki")
  [ -z "$BOOKS" ] || args+=(--gutenberg "$BOOKS")
  "${CORPUS_PY[@]}" "${args[@]}" > /dev/null
  # shellcheck disable=SC2046
  step_finish "$RAW/.split.done" "$W/inputs.id" "$W/split.args" $(wiki_files) "${split_files[@]}"
fi

# --- 3. the tokeniser -------------------------------------------------------------
if [ "$BPE" = sentencepiece ]; then
  echo "sentencepiece vocab_size=$VOCAB" > "$BPEDIR/config.txt"
  CODES=("$BPEDIR/spm.model")
  if step_done "$BPEDIR/.tokeniser.done" "$BPEDIR/config.txt" "$RAW/train.txt" "${CODES[@]}"; then
    log "skip: SentencePiece model already trained"
  else
    log "training SentencePiece (at most $VOCAB pieces) on $RAW/train.txt"
    "${BPE_PY[@]}" spm-train --input "$RAW/train.txt" --model-prefix "$BPEDIR/spm" \
      --vocab-size "$VOCAB" --threads "$WORKERS" >&2
    step_finish "$BPEDIR/.tokeniser.done" "$BPEDIR/config.txt" "$RAW/train.txt" "${CODES[@]}"
  fi
else
  echo "gpt2" > "$BPEDIR/config.txt"
  CODES=("$BPEDIR/encoder.json" "$BPEDIR/vocab.bpe")
  if step_done "$BPEDIR/.tokeniser.done" "$BPEDIR/config.txt" "${CODES[@]}"; then
    log "skip: GPT-2 BPE files already in $BPEDIR"
  else
    src="${GPT2_DIR:-$FAIRSEQ_LOCAL_ROOT/data-bin/gpt2-bpe}"
    [ -n "$GPT2_DIR" ] || [ -f "$src/encoder.json" ] || die "no GPT-2 BPE files in $src: run scripts/setup_env.sh \
(python -m fairseq_local_data.bpe fetch-gpt2 --dest $src) or give --gpt2-dir DIR"
    "${BPE_PY[@]}" check-gpt2 "$src" >&2
    cp "$src/encoder.json" "$src/vocab.bpe" "$BPEDIR/"
    step_finish "$BPEDIR/.tokeniser.done" "$BPEDIR/config.txt" "${CODES[@]}"
  fi
fi

# --- 4. BPE-encode each split (blank document separators kept) ---------------------
for split in train valid test; do
  if step_done "$BPEDIR/.$split.done" "${CODES[@]}" "$RAW/$split.txt" "$BPEDIR/$split.bpe"; then
    log "skip: $split already encoded"
    continue
  fi
  log "encoding $split with $BPE"
  if [ "$BPE" = sentencepiece ]; then
    python -m fairseq_local_data.wmt spm-encode --model "$BPEDIR/spm.model" "$RAW/$split.txt" "$BPEDIR/$split.bpe"
  else
    python -m fairseq.examples.roberta.multiprocessing_bpe_encoder --encoder-json "$BPEDIR/encoder.json" \
      --vocab-bpe "$BPEDIR/vocab.bpe" --inputs "$RAW/$split.txt" --outputs "$BPEDIR/$split.bpe.tmp" \
      --keep-empty --workers "$WORKERS" >&2
    mv "$BPEDIR/$split.bpe.tmp" "$BPEDIR/$split.bpe"
  fi
  [ "$(wc -l < "$BPEDIR/$split.bpe")" = "$(wc -l < "$RAW/$split.txt")" ] || die "encoding changed the line count of $split"
  step_finish "$BPEDIR/.$split.done" "${CODES[@]}" "$RAW/$split.txt" "$BPEDIR/$split.bpe"
done

# --- 5. fairseq-preprocess --only-source -----------------------------------------------
bins=()
for split in train valid test; do bins+=("$OUT/$split.bin" "$OUT/$split.idx"); done
encoded=("$BPEDIR/train.bpe" "$BPEDIR/valid.bpe" "$BPEDIR/test.bpe")
echo "srcdict=${SRCDICT:+$(sha256sum < "$SRCDICT" | cut -d' ' -f1)}" > "$BPEDIR/dict-source.txt"
if step_done "$OUT/.binarize.done" "$BPEDIR/dict-source.txt" "${encoded[@]}" "$OUT/dict.txt" "${bins[@]}"; then
  log "skip: $OUT already binarised"
else
  log "binarising into $OUT"
  rm -f "$OUT/dict.txt"
  dict_args=()
  [ -z "$SRCDICT" ] || dict_args=(--srcdict "$SRCDICT")
  fairseq-preprocess --only-source --trainpref "$BPEDIR/train.bpe" --validpref "$BPEDIR/valid.bpe" \
    --testpref "$BPEDIR/test.bpe" --destdir "$OUT" --workers "$WORKERS" "${dict_args[@]}" \
    > "$OUT/preprocess.log" 2>&1 \
    || binarise_failed "$OUT/preprocess.log" "${bins[@]}" "$OUT/dict.txt"
  step_finish "$OUT/.binarize.done" "$BPEDIR/dict-source.txt" "${encoded[@]}" "$OUT/dict.txt" "${bins[@]}"
fi

# --- 6. summary -----------------------------------------------------------------
spm_args=()
[ "$BPE" = gpt2 ] || spm_args=(--spm-model "$BPEDIR/spm.model")
"${CORPUS_PY[@]}" summary --bpe "$BPE" "${spm_args[@]}" --dict "$OUT/dict.txt" --stats "$RAW/stats.json" \
  > "$OUT/summary.txt.tmp"
mv "$OUT/summary.txt.tmp" "$OUT/summary.txt"
log "BERT corpus ready in $OUT ($(tr '\n' ' ' < "$OUT/summary.txt"))"
