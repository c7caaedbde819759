"""``fairseq-local inspect``: fields of a fairseq checkpoint (its saved
options, update count and encoder signature), of a tokeniser, or of this
machine, one per line: what the scripts read instead of running Python of
their own, and a quick look for people.

A checkpoint is read with :class:`fairseq_local.checkpoint_compat.Checkpoint`
(memory-mapped: no tensor data is read).
"""

import argparse
import dataclasses
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set

from fairseq_local.checkpoint_compat import Checkpoint
from fairseq_local.errors import InputError
from .common import command_parser

DETAILS = """\
Prints the requested fields (--field, in the order given) one per line; a
field that the file does not record prints an empty line. --json prints one
JSON object instead (null where not recorded). Without --field, prints every
field as 'NAME: VALUE'.

A checkpoint (CKPT), its fields:
  arch, task, criterion  the model's arch, the task's and the criterion's names
  num_updates            the updates it was trained for (0 if not recorded)
  signature              the attention signature its encoder saved as JSON:
                         arch, layout, mask mode and the options of learned
                         masks (SparseBERT's DAM, Adaptive Axis Attention,
                         head gates); empty for a stock model or a
                         checkpoint saved without one
  NAME                   a saved model option (encoder_layers, attn_layout,
                         mask_mode, max_positions, ...), else a task option
                         (data, num_classes, ...)
  SECTION.NAME           an option of one section of the saved config
                         (model, task, criterion, common, optimization, ...)
An option that neither the checkpoint records nor its model, task or section
declares is an unknown field (an error).
A tokeniser (--bpe-model PATH, --bpe auto|gpt2|sentencepiece; auto: a folder
is gpt2, a file sentencepiece), checked first: bpe (its kind), size (its
vocabulary size).
This machine (--machine): cuda ('ok', or why there is no CUDA device),
machine (GPU, CPU, memory, torch and threads in one line), torch (version).

A missing or unreadable file, a file that is not a checkpoint (or not a
tokeniser of its kind) and an unknown field are one 'error:' line, exit
status 2."""

EPILOG = """\
examples:
  fairseq-local inspect runs/demo/f/checkpoint_last.pt --field arch --field num_updates
  fairseq-local inspect model.pt --field attn_layout --field task.data --json
  fairseq-local inspect --bpe-model data-bin/bert-corpus/bpe/spm.model --field size"""

CHECKPOINT_FIELDS = ("arch", "task", "criterion", "num_updates", "signature")
BPE_KINDS = ("auto", "gpt2", "sentencepiece", "wordpiece", "byte_bpe")


def declared_options(section: str, name: Optional[str]) -> Set[str]:
    """The option names that the saved config's ``section`` may hold: those
    of the registered model (``name``: its arch), task, criterion, optimizer,
    ... called ``name``, or of fairseq's config dataclass of the section
    (``common``, ``optimization``, ...); the plugin's attention options for
    every model.  Empty for a name that is not registered."""
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_REGISTRY

    from fairseq_local.attention.config import OPTION_NAMES

    if section in ("model", "task") or section in REGISTRIES:
        registry = {"model": ARCH_MODEL_REGISTRY, "task": TASK_REGISTRY}.get(section) \
            or REGISTRIES.get(section, {}).get("registry", {})
        names = set(OPTION_NAMES) if section == "model" else set()
        cls = registry.get(name) if name else None
        parser = argparse.ArgumentParser(add_help=False)
        try:
            cls.add_args(parser)
        except Exception:  # not registered, or no options of its own
            return names
        # argparse has no public list of a parser's options; fairseq reads
        # ``_actions`` too (fairseq.dataclass.utils).
        return names | {a.dest for a in parser._actions}
    types = {f.name: f.type for f in dataclasses.fields(FairseqConfig)}
    if dataclasses.is_dataclass(types.get(section)):
        return {f.name for f in dataclasses.fields(types[section])}
    return set()


def checkpoint_value(ckpt: Checkpoint, field: str) -> Any:
    """The value of ``field`` (see :data:`DETAILS`) in ``ckpt``; None where
    not recorded.  Raises :class:`InputError` for an unknown field."""
    if field in CHECKPOINT_FIELDS:
        if field == "criterion":
            opts = ckpt.options("criterion")
            return opts.get("_name") or opts.get("criterion")
        return ckpt.signature() if field == "signature" else getattr(ckpt, field)
    section, _, name = field.rpartition(".")
    for sec in [section] if section else ["model", "task"]:
        saved = ckpt.options(sec)
        component = {"model": ckpt.arch, "task": ckpt.task}.get(sec, saved.get("_name"))
        if name in saved or name in declared_options(sec, component):
            return saved.get(name)
    raise InputError(f"unknown field '{field}' of '{ckpt.path}' (arch {ckpt.arch or '-'}, task {ckpt.task or '-'}): "
                     f"not {', '.join(CHECKPOINT_FIELDS)}, nor an option it saves or its model or task declares")


def checkpoint_fields(ckpt: Checkpoint) -> Dict[str, Any]:
    """Every field of ``ckpt`` by name, for the listing without --field: the
    named ones, then the saved model options, then the task's as ``task.NAME``."""
    out = {field: checkpoint_value(ckpt, field) for field in CHECKPOINT_FIELDS}
    out.update({k: v for k, v in sorted(ckpt.options("model").items()) if k not in out})
    out.update({f"task.{k}": v for k, v in sorted(ckpt.options("task").items())})
    return out


def tokenizer_fields(path: str, kind: str = "auto") -> Dict[str, Any]:
    """``bpe`` (the kind) and ``size`` (vocabulary size) of the tokeniser at
    ``path``: a SentencePiece ``.model`` file, a folder of GPT-2's
    ``encoder.json`` and ``vocab.bpe``, BERT's WordPiece ``vocab.txt``, or a
    Hugging Face RoBERTa folder's ``vocab.json`` and ``merges.txt``
    (``byte_bpe``; ``auto``: a folder is byte_bpe if it holds merges.txt, else
    gpt2; a file named vocab.txt wordpiece, else sentencepiece).  Raises
    :class:`InputError` (one line) for a missing or corrupt one, or one of
    another kind."""
    p = Path(path)
    if not os.path.exists(path):
        raise InputError(f"no --bpe-model '{path}'")
    if kind == "auto":
        if p.is_dir():
            kind = "byte_bpe" if (p / "merges.txt").is_file() else "gpt2"
        else:
            kind = "wordpiece" if p.name == "vocab.txt" else "sentencepiece"

    def bad(problem: str) -> InputError:
        return InputError(f"--bpe-model '{path}' ({kind}) {problem}")

    if kind == "wordpiece":
        try:
            lines = p.read_text(encoding="utf-8").splitlines() if p.is_file() else None
        except UnicodeDecodeError as e:
            raise bad(f"is not UTF-8 text (byte {e.start})") from None
        if not lines or any(not t.strip() or len(t.split()) != 1 for t in lines):
            raise bad("is not BERT's vocab.txt (one WordPiece token a line)")
        return {"bpe": kind, "size": len(lines)}
    names = ("vocab.json", "merges.txt") if kind == "byte_bpe" else ("encoder.json", "vocab.bpe")

    if kind == "sentencepiece":
        if not p.is_file():
            raise bad("is not a file (a SentencePiece .model file)")
        import sentencepiece as spm

        try:
            size = spm.SentencePieceProcessor(model_file=str(p)).get_piece_size()
        except Exception:
            raise bad("is not a SentencePiece model (corrupt, or another kind of file)") from None
        return {"bpe": kind, "size": size}
    if not p.is_dir():
        raise bad(f"is not a folder of {' and '.join(names)}")
    texts = {}
    for name in names:
        if not (p / name).is_file():
            raise bad(f"has no {name}")
        try:
            texts[name] = (p / name).read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise bad(f"holds {name}, which is not UTF-8 text (byte {e.start})") from None
    try:
        vocab = json.loads(texts[names[0]])
    except ValueError:
        vocab = None
    if not isinstance(vocab, dict):
        raise bad(f"has a {names[0]} that is not a JSON vocabulary (token -> id)")
    return {"bpe": kind, "size": len(vocab)}


def machine_fields() -> Dict[str, str]:
    """``cuda`` ('ok', or the one-line reason why there is no CUDA device),
    ``machine`` (one line: GPU if any, CPU, memory, torch, threads) and
    ``torch`` (its version)."""
    import torch

    from .benchmark.timing import machine

    if torch.cuda.is_available():
        cuda = "ok"
    elif torch.version.cuda is None:
        cuda = f"this torch has no CUDA support (torch {torch.__version__})"
    else:
        cuda = f"no CUDA device is visible (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return {"cuda": cuda, "machine": machine("cuda" if cuda == "ok" else None), "torch": torch.__version__}


def text(value: Any) -> str:
    """A field's value on one line: empty for None, JSON for dicts and lists."""
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    return " ".join(str(value).splitlines())


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("inspect", DETAILS, EPILOG)
    parser.add_argument("checkpoint", nargs="?", metavar="CKPT", help="a fairseq checkpoint")
    parser.add_argument("--field", action="append", metavar="NAME", help="a field to print (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object of the fields")
    parser.add_argument("--bpe-model", metavar="PATH", help="inspect this tokeniser instead of a checkpoint")
    parser.add_argument("--bpe", choices=BPE_KINDS, default="auto", help="the tokeniser's kind (default auto)")
    parser.add_argument("--machine", action="store_true", help="inspect this machine instead of a checkpoint")
    return parser


def known_field(fields: Dict[str, Any], what: str, field: str) -> Any:
    """``fields[field]``; :class:`InputError` naming the known fields of ``what`` if it has none."""
    if field not in fields:
        raise InputError(f"unknown field '{field}' of the {what} (one of {', '.join(fields)})")
    return fields[field]


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``fairseq-local inspect``; every bad input is one ``error:`` line, exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if sum(map(bool, (args.checkpoint, args.bpe_model, args.machine))) != 1:
        parser.error("give one of CKPT, --bpe-model PATH or --machine")
    try:
        lookup: Callable[[str], Any]
        if args.checkpoint:
            if not os.path.exists(args.checkpoint):
                raise InputError(f"no checkpoint '{args.checkpoint}'")
            ckpt = Checkpoint.read(args.checkpoint)
            lookup, listing = functools.partial(checkpoint_value, ckpt), functools.partial(checkpoint_fields, ckpt)
        else:
            fields = tokenizer_fields(args.bpe_model, args.bpe) if args.bpe_model else machine_fields()
            lookup = functools.partial(known_field, fields, "tokeniser" if args.bpe_model else "machine")
            listing = functools.partial(dict, fields)
        values = {field: lookup(field) for field in args.field} if args.field else listing()
    except (OSError, ValueError) as e:
        parser.error(str(e).splitlines()[0] if str(e) else type(e).__name__)
    if args.json:
        print(json.dumps(values, default=str))
    elif args.field:
        print("\n".join(text(values[field]) for field in args.field))
    else:
        print("\n".join(f"{name}: {text(value)}" for name, value in values.items()))
    return 0


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["inspect", *sys.argv[1:]]))
