"""``fairseq-local attention dump``: the attention each head used, per sentence."""

import argparse
import sys
from typing import List, Optional

from fairseq_local import outputs
from fairseq_local.analysis.model import BPE_KINDS
from .common import command_parser

DETAILS = """
The input of fairseq-local analyze bias (Pande et al. §3.2) and analyze roles
(Voita et al. 2019).
dump: one record per sentence, saved with torch.save as a list of dicts:
  tokens    the model's input tokens, special tokens included (</s> ending an
            NMT source; <s> ... </s> for RoBERTa)
  word_ids  each token's word (0-based), -1 for a special token
  words     the words
  heads     each word's syntactic head (0-based, -1 for the root); only with --conllu
  relations each word's dependency relation (CoNLL-U DEPREL); only with --conllu
  counts    each token's count in the model's dictionary (its training data;
            absent where every count is equal: a convert-hf dictionary)
  ranks     each token's frequency rank in the dictionary (0: the most frequent;
            the number of non-special symbols with a larger count)
  attn      float tensor (L, H, T, T): row i of head h in layer l is what the
            model used at query position i, in its own mask mode (post-mode
            rows may sum to less than 1; a gated head's row is scaled by its gate)
  sentence_ids, separator  only with --pairs: each token's sentence (0: A,
            1: B, -1: special) and the positions of the separator tokens
            (RoBERTa: the two </s> of <s> A </s> </s> B </s>); words are A's then B's

--pairs FILE.tsv: sentence pairs (Pascual et al. §5: MNLI), "A<TAB>B" a line,
or a GLUE TSV with a header and --columns sentence1,sentence2. Encoded as
fairseq's sentence_prediction task encodes a pair (scripts/finetune-glue.sh:
--init-token 0 --separator-token 2); RoBERTa models only. A BERT (segment
embeddings and absolute positions: convert-hf) gets BERT's <s> A </s> B </s>.

The model's subword tokeniser is applied to each word (--bpe auto: the one in
DATA/bpe, as scripts/bpe-binarize.sh and scripts/prepare-bert-corpus.sh leave
it, or the vocab.txt / vocab.json of a folder written by convert-hf; a
WordPiece "##" piece belongs to its word). CoNLL-U multiword tokens (2-3) are expanded into their syntactic words,
empty nodes (4.1) skipped. Sentences longer than the model's maximum positions
(or --max-len tokens) are skipped and counted.
"""


def add_model_args(p: argparse.ArgumentParser, text_required: bool = True) -> None:
    """The options shared by every command that runs a checkpoint."""
    p.add_argument("--path", required=True, metavar="CKPT", help="a checkpoint (NMT or RoBERTa)")
    p.add_argument("--data", metavar="DIR", help="its data folder (dictionaries; default: the one it was trained on)")
    src = p.add_mutually_exclusive_group(required=text_required)
    src.add_argument("--text", metavar="FILE", help="whitespace-tokenised sentences, one a line")
    src.add_argument("--conllu", metavar="FILE", help="CoNLL-U sentences with gold syntax")
    src.add_argument("--pairs", metavar="FILE.tsv", help="RoBERTa: sentence pairs, 'A<TAB>B' a line (no syntax)")
    p.add_argument("--columns", metavar="A,B", help="--pairs: the file has a header; the columns of the two "
                   "sentences (GLUE MNLI: sentence1,sentence2)")
    p.add_argument("--bpe", default="auto", choices=BPE_KINDS,
                   help="the model's subword tokeniser (default: found in DATA/bpe, or a convert-hf folder's own)")
    p.add_argument("--bpe-model", metavar="PATH",
                   help="subword-nmt codes, SentencePiece .model, the folder of GPT-2's encoder.json/vocab.bpe, "
                        "BERT's vocab.txt (wordpiece), or a RoBERTa folder's vocab.json/merges.txt (byte_bpe)")
    p.add_argument("--max-tokens", type=int, default=4096, help="padded tokens a batch (default 4096)")
    p.add_argument("--max-len", type=int, help="skip sentences of more tokens (default: the model's maximum positions)")
    p.add_argument("--max-sentences", type=int, metavar="N", help="only the first N sentences of the file")
    p.add_argument("--cuda", action="store_true", help="run on the GPU if there is one (default CPU)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def load_inputs(args: argparse.Namespace, max_len: Optional[int] = None):
    """(model, items, skipped) for the model options of :func:`add_model_args`."""
    from fairseq_local.analysis.dump import prepare, read_sentences
    from fairseq_local.analysis.model import AnalysisError, AnalysisModel

    if args.max_tokens < 1:
        raise AnalysisError("--max-tokens must be positive")
    if args.max_len is not None and args.max_len < 1:
        raise AnalysisError("--max-len must be positive")
    if args.max_sentences is not None and args.max_sentences < 1:
        raise AnalysisError("--max-sentences must be positive")
    pairs = getattr(args, "pairs", None)
    if getattr(args, "columns", None) is not None and pairs is None:
        raise AnalysisError("--columns needs --pairs FILE.tsv")
    if pairs is not None:
        from fairseq_local.analysis.pairs import read_pairs

        sentences = read_pairs(pairs, args.columns)[:args.max_sentences]
    else:
        sentences = read_sentences(args.text, args.conllu)[:args.max_sentences]
    model = AnalysisModel.load(args.path, args.data, args.bpe, args.bpe_model, cpu=not args.cuda)
    items, skipped = prepare(model, sentences, args.max_len if args.max_len is not None else max_len)
    if not items:
        raise AnalysisError(f"no sentence of {args.text or args.conllu or pairs} fits the length limit "
                            f"({skipped} skipped)")
    return model, items, skipped


def model_inputs(args: argparse.Namespace) -> List[str]:
    """The input files of the model options (:func:`add_model_args`), which
    no output may replace."""
    return [f for f in (args.path, args.text, args.conllu, getattr(args, "pairs", None), args.bpe_model) if f]


def report_skipped(skipped: int, total: int, why: str) -> None:
    """Say on stderr how many of ``total`` sentences were skipped, and why."""
    if skipped:
        print(f"skipped {skipped} of {total} sentences {why}", file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``fairseq-local attention``; bad inputs are one ``error:`` line
    (status 1), bad outputs an OutputError (one line from ``fairseq-local``)."""
    p = command_parser("attention", DETAILS)
    sub = p.add_subparsers(dest="action", required=True, metavar="dump")
    d = sub.add_parser("dump", help="write the attention of every head, per sentence",
                       description="Write the attention of every head, one record per sentence.")
    d.error = p.error  # type: ignore[method-assign]
    add_model_args(d)
    d.add_argument("--out", required=True, metavar="DUMP.pt", help="the dump to write")
    outputs.add_force_option(d)
    args = p.parse_args(argv)

    from fairseq_local.analysis.dump import dump_records, is_dump, save_dump
    from fairseq_local.analysis.model import AnalysisError

    # before the model is loaded: never over an input, a checkpoint or (without --force) a file
    # that is not a dump; raises OutputError, one line from fairseq-local
    outputs.check_outputs([outputs.Output(args.out, "dump", ours=is_dump)],
                          inputs=model_inputs(args), force=args.force)
    try:
        model, items, skipped = load_inputs(args)
        records = dump_records(model, items, args.max_tokens, progress=not args.quiet)
        save_dump(records, args.out)
    except (AnalysisError, OSError) as e:
        p.exit(1, f"error: {str(e).splitlines()[0]}\n")
    report_skipped(skipped, len(items) + skipped, "longer than the length limit")
    print(f"{len(records)} sentences, {model.num_layers} layers x {model.num_heads} heads -> {args.out}")
    return 0


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["attention", *sys.argv[1:]]))
