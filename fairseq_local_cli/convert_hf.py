"""``fairseq-local convert-hf``: a Hugging Face BERT or RoBERTa model folder as
a folder holding a ``roberta_local`` checkpoint, its dictionary and its
tokenizer (:mod:`fairseq_local.models.convert_hf`)."""

import os
import sys
from typing import List, Optional

from .common import command_parser
from .convert_roberta import roberta_local_archs

DETAILS = """\
Reads HF_DIR, a Hugging Face model folder on this machine (config.json,
model.safetensors or pytorch_model.bin, and the tokenizer files: vocab.txt for
BERT, vocab.json + merges.txt or tokenizer.json for RoBERTa) of BertModel,
BertForMaskedLM, BertForPreTraining, BertForSequenceClassification,
RobertaModel, RobertaForMaskedLM or RobertaForSequenceClassification, and
writes OUT_DIR/model.pt (a fairseq checkpoint of ARCH), OUT_DIR/dict.txt and
the tokenizer files. The hub is never contacted.

What BERT does differently is converted exactly, or refused in one line:
  * token types -> --segment-embeddings (segment 1 after the first [SEP]);
  * positions from 0 whatever the padding -> --positions absolute;
  * layer_norm_eps -> --layernorm-eps; exact GELU -> --activation-fn gelu;
  * pooler + classifier -> classification head 'sentence_classification_head'
    (BertForPreTraining's NSP -> 'next_sentence'); the MLM head, decoder tied;
  * [CLS] [PAD] [SEP] [UNK] [MASK] -> <s> <pad> </s> <unk> <mask>, embedding
    rows permuted to fairseq's dictionary order.
Refused: relative position types, decoders, more than two token types,
activations fairseq lacks, a missing or unexpected weight.

With an all-global layout (roberta_local_base, the default) the converted
model computes the Hugging Face model's outputs. Any other layout
(--arch/--attn-layout/--mask-mode...) is a new stage, as with
convert-roberta: the weights are copied, Q/K groups shared by several heads
start from their first member (--tie-init), and the learned extras (DAM
logits, AAA selector, head gates) start fresh.

Load it with fairseq's RobertaModel.from_pretrained(OUT_DIR, 'model.pt',
user_dir=...), which reads the BPE saved in model.pt (bert over vocab.txt,
gpt2 over vocab.json/merges.txt, as paths into OUT_DIR), or with
LocalRobertaModel.from_pretrained(OUT_DIR), which finds them wherever the
folder has moved. Analyse it with attention dump and analyze (--bpe auto finds
the tokenizer); fine-tune it with scripts/prepare-glue.sh --bpe wordpiece and
scripts/finetune-glue.sh --checkpoint OUT_DIR/model.pt, or fairseq-train
--finetune-from-model OUT_DIR/model.pt with the model's options (for BERT
--segment-embeddings --layernorm-eps EPS --positions absolute; fairseq-local
inspect prints them). dict.txt's counts are all 1: a Hugging Face folder has
no token frequencies. See docs/huggingface.md."""

EPILOG = """\
example:
  fairseq-local convert-hf ./bert-base-uncased ./bert-base-local
  fairseq-local convert-hf ./roberta-base ./roberta-aaa --arch roberta_aaa"""

def build_parser():
    from fairseq_local.attention.config import add_attention_args
    from fairseq_local.models.convert import TIE_INITS
    from fairseq_local.outputs import add_force_option

    parser = command_parser("convert-hf", DETAILS, EPILOG)
    parser.add_argument("hf_dir", metavar="HF_DIR", help="a Hugging Face BERT/RoBERTa model folder")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="the folder to write (created if absent)")
    parser.add_argument("--arch", default="roberta_local_base", choices=roberta_local_archs(), metavar="ARCH",
                        help="a roberta_local arch (default %(default)s: every head global)")
    parser.add_argument("--tie-init", choices=TIE_INITS, default="first",
                        help="initial Wq/Wk of a Q/K group shared by several heads (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the learned extras (default %(default)s)")
    add_force_option(parser)
    add_attention_args(parser.add_argument_group("attention options (as in fairseq-train; default: the arch's)"))
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``fairseq-local convert-hf``; every bad input or output is one
    ``error:`` line (exit status 2) with nothing written."""
    from pathlib import Path

    from fairseq_local.attention.config import OPTION_NAMES
    from fairseq_local.errors import OneLineError
    from fairseq_local.models import convert_hf as conv
    from fairseq_local.models.hf_folder import read_config, vocabulary
    from fairseq_local.outputs import Output, check_folder, check_outputs

    parser = build_parser()
    args = parser.parse_args(argv)
    attention = {name: getattr(args, name, None) for name in OPTION_NAMES}
    out = Path(args.out_dir)
    try:  # everything that can refuse is checked before the weights are read, and nothing is written before
        cfg = read_config(args.hf_dir)
        files = conv.folder_files(args.hf_dir, cfg, vocabulary(args.hf_dir, cfg))
        if out.exists() and not out.is_dir():
            parser.error(f"OUT_DIR '{out}' exists and is not a folder")
        if out.is_dir() and os.path.samefile(args.hf_dir, out):
            parser.error(f"OUT_DIR '{out}' is HF_DIR: choose another folder")
        if out.is_dir():
            earlier = (out / "model.pt").is_file() and conv.is_hf_converted(out / "model.pt")

            def ours(data: bytes):  # an earlier output of this command, or already this content
                return lambda path: earlier or path.read_bytes() == data

            check_outputs([Output(out / n, f"converted model's {n}", ours(d)) for n, d in files.items()]
                          + [Output(out / "model.pt", "converted checkpoint", conv.is_hf_converted, checkpoint=True)],
                          force=args.force)
        else:
            check_folder(out.parent, "converted model's folder")
        print(f"converting {args.hf_dir}: {cfg['_class']}, {cfg['num_hidden_layers']} layers x "
              f"{cfg['num_attention_heads']} heads, vocabulary {cfg['vocab_size']}", flush=True)
        model, options, vocab, cfg, notes = conv.convert_hf_model(args.hf_dir, args.arch, attention,
                                                                  args.tie_init, args.seed)
        saved = conv.checkpoint_options(options, cfg, vocab, args.out_dir)
        out.mkdir(exist_ok=True)
        conv.write_folder(args.out_dir, files, conv.hf_checkpoint(model, saved, args.hf_dir))
    except (FileNotFoundError, ValueError, OneLineError) as e:
        parser.error(str(e).splitlines()[0] if str(e) else type(e).__name__)
    s = conv.summary(model, options, cfg)
    heads = ", ".join(s["classification_heads"]) or "none"
    print(f"wrote {args.out_dir}: {s['class']} as {s['arch']}, {s['layers']} layers x {s['heads']} heads, "
          f"{s['qk_groups']} Q/K group(s), vocabulary {s['vocab']}, classification heads: {heads}")
    print(f"layout: {s['layout']}")
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["convert-hf", *sys.argv[1:]]))
