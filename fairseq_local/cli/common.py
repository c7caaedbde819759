"""What every ``fairseq-local`` command shares: the command table (names and
one-line summaries, read by ``fairseq-local --help`` without importing any
command) and an argument parser whose errors are one ``error: ...`` line."""

import argparse
from typing import Dict, Optional, Tuple

# name -> (module under fairseq_local.cli, one-line summary).  The summary is
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
    "glue": ("glue", "GLUE metrics of a fine-tuned model and test-set submission files"),
    "attention": ("dump", "Dump the attention of every head, per sentence, for analysis"),
    "analyze": ("analyze", "Attention bias, sensitivity, HTA, head roles and importance; figures"),
    "prune-curve": ("prune_curve", "Head pruning at a sweep of L0 weights: BLEU, heads kept, roles (Voita et al.)"),
    "reproduce": ("reproduce", "Reproduce a paper's experiments at tiny, small or paper scale, with a report"),
    "benchmark": ("benchmark", "Speed and memory of attention, training and generation, as ratios in one run"),
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
