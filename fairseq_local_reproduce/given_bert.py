"""A Hugging Face BERT-base given with ``reproduce --bert HF_DIR`` (paper
scale), used instead of pretraining one: a plan step converts it
(``fairseq-local convert-hf``, the model's own function, docs/huggingface.md)
and another prepares GLUE with its WordPiece tokenizer, so that it is
fine-tuned on the pairs BERT was trained on (``[CLS] A [SEP] B [SEP]``)."""

from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence

from .plan import Plan


@dataclass(frozen=True)
class GivenBert:
    """Where a plan finds the given BERT once its steps ran."""

    source: str        # HF_DIR as given
    folder: Path       # the converted folder: model.pt, dict.txt, vocab.txt, tokenizer_config.json
    glue: Path         # GLUE binarised with its WordPiece: TASK-bin/

    @property
    def checkpoint(self) -> Path:
        return self.folder / "model.pt"

    @property
    def bpe(self) -> List:
        """The analyses' tokeniser options."""
        return ["--bpe", "wordpiece", "--bpe-model", self.folder / "vocab.txt"]


def add_given_bert(plan: Plan, hf_dir: str, glue_raw: Path, tasks: Sequence[str]) -> GivenBert:
    """Add the conversion of ``hf_dir`` and the WordPiece GLUE preparation of
    ``tasks`` (from the raw GLUE folder ``glue_raw``) to ``plan``."""
    given = GivenBert(str(hf_dir), plan.out / "bert-given", plan.out / "glue-given")
    plan.add(f"{plan.paper}/bert-given/convert", f"the given BERT ({hf_dir}) as roberta_local_base (convert-hf)",
             ["fairseq-local", "convert-hf", hf_dir, given.folder],
             outputs=[given.checkpoint, given.folder / "dict.txt", given.folder / "vocab.txt"])
    plan.add(f"{plan.paper}/bert-given/glue", f"GLUE: {' '.join(tasks)} with the given BERT's WordPiece",
             ["bash", "scripts/prepare-glue.sh", "--glue-dir", glue_raw, "--src-dict", given.folder / "dict.txt",
              "--bpe", "wordpiece", "--bpe-model", given.folder / "vocab.txt", "--tasks", " ".join(tasks),
              "--out", given.glue], folders=[given.glue])
    return given


__all__ = ["GivenBert", "add_given_bert"]
