"""Sentence pairs as analysis input (``--pairs FILE.tsv [--columns A,B]``).

Pascual et al. ("Telling BERT's Full Story", §5) analyse 1,800 MNLI-matched
pairs of at most 64 tokens.  A pair file is tab-separated text, one pair a
line:

- without ``--columns``: exactly two fields a line, sentence A and sentence B,
  no header;
- with ``--columns NAME_A,NAME_B``: a GLUE-style TSV whose first line is a
  header naming the columns (MNLI's ``dev_matched.tsv``: ``sentence1,sentence2``);
  the other columns are ignored.

Fields are split on tabs only (no quoting, as fairseq's GLUE recipe cuts the
columns) and each sentence on whitespace into words.  Blank lines are skipped.
The model input of a pair is built by :meth:`AnalysisModel.tokenise
<fairseq_local.analysis.model.AnalysisModel.tokenise>`; pairs have no gold
syntax (no ``heads``).  Bad files are an :class:`AnalysisError` (one line).
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

from .model import AnalysisError

__all__ = ["SentencePair", "read_pairs", "parse_columns"]


@dataclass
class SentencePair:
    """One pair: the words of sentence A (``first``) and of B (``second``).
    ``words`` is A's words then B's (the record's word list), and it has no
    syntax (``heads`` and ``relations`` are None), like a ``--text`` sentence."""

    first: List[str]
    second: List[str]
    heads: None = None
    relations: None = None

    @property
    def words(self) -> List[str]:
        return self.first + self.second


def parse_columns(spec: Optional[str]) -> Optional[Tuple[str, str]]:
    """``"sentence1,sentence2"`` -> ("sentence1", "sentence2"); None stays None."""
    if spec is None:
        return None
    names = [n.strip() for n in spec.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise AnalysisError(f"--columns '{spec}': give two different column names, NAME_A,NAME_B "
                            f"(e.g. sentence1,sentence2)")
    return names[0], names[1]


def _lines(path: str) -> List[str]:
    """The lines of a UTF-8 file (a byte-order mark dropped; trailing \\r kept off)."""
    from fairseq_local_data.syntax import SyntaxFileError, read_utf8

    try:
        text = read_utf8(path, f"the pair file '{path}'")
    except SyntaxFileError as e:
        raise AnalysisError(str(e)) from None
    return [line.rstrip("\r") for line in text.split("\n")]


def read_pairs(path: str, columns: Optional[str] = None) -> List[SentencePair]:
    """The sentence pairs of ``path`` (see the module docstring).

    Args:
        path: the TSV file.
        columns: ``"NAME_A,NAME_B"``: the file has a header and these are the
            columns of the two sentences; None: two columns, no header.
    Returns:
        the pairs, in file order (blank lines skipped).
    """
    names = parse_columns(columns)
    lines = _lines(path)
    first_line = 1
    index = (0, 1)
    if names is not None:
        header = next(((k, line) for k, line in enumerate(lines) if line.strip()), None)
        if header is None:
            raise AnalysisError(f"{path}: empty, no header with the columns {names[0]},{names[1]}")
        fields = [f.strip() for f in header[1].split("\t")]
        missing = [n for n in names if n not in fields]
        if missing:
            raise AnalysisError(f"{path}: the header has no column '{missing[0]}' (it has "
                                f"{', '.join(fields[:12])}{', ...' if len(fields) > 12 else ''})")
        index = (fields.index(names[0]), fields.index(names[1]))
        first_line = header[0] + 2
        lines = lines[header[0] + 1:]
    pairs = []
    for number, line in enumerate(lines, first_line):
        if not line.strip():
            continue
        fields = line.split("\t")
        if names is None and len(fields) != 2:
            raise AnalysisError(f"{path}: line {number}: {len(fields)} tab-separated field(s), expected 2 "
                                f"(sentence A<TAB>sentence B; a GLUE TSV with a header needs --columns A,B)")
        if max(index) >= len(fields):
            raise AnalysisError(f"{path}: line {number}: {len(fields)} field(s), no column {max(index) + 1}")
        first, second = fields[index[0]].split(), fields[index[1]].split()
        if not first or not second:
            raise AnalysisError(f"{path}: line {number}: sentence {'A' if not first else 'B'} is empty")
        pairs.append(SentencePair(first, second))
    if not pairs:
        raise AnalysisError(f"{path}: no sentence pairs")
    return pairs
