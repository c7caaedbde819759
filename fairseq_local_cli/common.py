"""What every ``fairseq-local`` command shares: the command table (names and
one-line summaries, read by ``fairseq-local --help`` without importing any
command), an argument parser whose errors are one ``error: ...`` line, and
the check of an output folder before anything is written there."""

import argparse
import json
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple

from fairseq_local import outputs
from fairseq_local.outputs import Output, OutputError

# name -> (module under fairseq_local_cli, one-line summary).  The summary is
# also the first line of the command's own --help.
COMMANDS: Dict[str, Tuple[str, str]] = {
    "configs": ("configs", "Named architectures and their attention weight counts (Pande et al.)"),
    "sparsity": ("sparsity", "Sparsity 1 - |M|/n^2 of attention mask patterns (SparseBERT Table 3)"),
    "export": ("export", "Export trained DAM masks for a second stage (SparseBERT §3.4, §4.3)"),
    "gates": ("gates", "Hard-concrete head gates of a checkpoint (Voita et al. 2019)"),
    "results": ("results", "Collect training runs into a table (loss, sparsity, BLEU, words/s)"),
    "tables": ("tables", "Collect the WMT'14 runs into Pande et al., Tables 1-3"),
    "inspect": ("inspect", "Fields of a checkpoint (options, updates, signature), a tokeniser or machine"),
    "average": ("average", "Average the parameters of a run's last N checkpoints"),
    "convert-roberta": ("convert_roberta", "Turn a stock fairseq RoBERTa checkpoint into a local/tied/sparse arch"),
    "convert-hf": ("convert_hf", "Turn a Hugging Face BERT/RoBERTa folder into a roberta_local checkpoint folder"),
    "glue": ("glue", "GLUE metrics of a fine-tuned model and test-set submission files"),
    "attention": ("attention", "Dump the attention of every head, per sentence, for analysis"),
    "analyze": ("analyze", "Attention bias, sensitivity, HTA, head roles and importance; figures"),
    "prune-curve": ("prune_curve", "Head pruning at a sweep of L0 weights: BLEU, heads kept, roles (Voita et al.)"),
    "reproduce": ("reproduce", "Reproduce a paper's experiments at tiny, small or paper scale, with a report"),
    "benchmark": ("benchmark", "Speed and memory of attention, training and generation, as ratios in one run"),
    "check-resume": ("check_resume", "Refuse (exit 1) a fairseq-train that would resume CKPT as another model"),
}


def summary(name: str) -> str:
    """The one-line summary of command ``name``."""
    return COMMANDS[name][1]


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that reports bad input as one ``error: ...`` line
    (exit status 2), without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message}\n")


def command_parser(name: str, details: Optional[str] = None, epilog: Optional[str] = None) -> CommandParser:
    """The parser of command ``name``: prog ``fairseq-local NAME``, the
    command's summary as the first line of its description, then ``details``
    (pre-wrapped plain text, kept as written)."""
    description = summary(name) + (f"\n\n{details.strip()}" if details else "")
    return CommandParser(prog=f"fairseq-local {name}", description=description,
                         epilog=epilog.strip() if epilog else None,
                         formatter_class=argparse.RawDescriptionHelpFormatter)


def json_with(*keys: str) -> Callable[[Path], bool]:
    """``ours`` for a JSON object holding ``keys`` (a previous result of a command)."""
    def ours(path: Path) -> bool:
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(obj, dict) and all(k in obj for k in keys)
    return ours


def check_output_folder(folder: str, files: Sequence[Output], inputs: Sequence[str] = (),
                        force: bool = False, what: str = "output folder") -> None:
    """Check a command's output folder and the files it will write there
    (:func:`outputs.check_outputs`) before anything is written.  A missing
    folder (or sub-folder) is fine if it can be created: its nearest existing
    ancestor must be a writable folder."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise OutputError(f"cannot write the {what} '{folder}': it is a file, not a folder")
    present = []
    for out in files:
        parent = Path(out.path).parent
        if parent.is_dir():
            present.append(out)
            continue
        ancestor = parent.absolute()
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise OutputError(f"cannot create the {what} '{parent}': '{ancestor}' is a file, not a folder")
        try:
            outputs.check_folder(ancestor, what)
        except OutputError as e:
            raise OutputError(f"cannot create the {what} '{parent}': {e}") from None
    outputs.check_outputs(present, inputs=[i for i in inputs if i], force=force)
