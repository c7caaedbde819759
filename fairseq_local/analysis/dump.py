"""Attention dumps: one record per sentence (see ``fairseq-local attention dump``).

A record is a dict with ``tokens``, ``word_ids``, ``words``, ``heads`` and
``relations`` (only with syntax), ``counts`` and ``ranks`` (each token's count
in the model's dictionary and its frequency rank there) and ``attn``
(L, H, T, T), the weights each head used, in the model's own mask mode.
A sentence pair (``--pairs``, :mod:`.pairs`) also has ``sentence_ids`` (0:
sentence A, 1: sentence B, -1: special token, per token) and ``separator``
(the positions of the tokens between A and B); its ``words`` are A's then B's.
:func:`analysed_batches` is the batched, eval-mode pass that every analysis
shares.
"""

import bisect
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from tqdm import tqdm

from ..checkpoint_compat import DUMP_KEYS
from ..errors import irregular_file
from .model import AnalysisError, AnalysisModel, Capture, Tokenised, batches

RECORD_KEYS = DUMP_KEYS
FORMAT = "fairseq-local attention dump v1"


@dataclass
class Item:
    """A sentence to analyse: its words, syntactic heads and relations (or
    None), model input, and each token's dictionary count and frequency rank."""

    index: int
    words: List[str]
    heads: Optional[List[int]]
    input: Tokenised
    relations: Optional[List[str]] = None
    counts: Optional[List[int]] = None
    ranks: Optional[List[int]] = None


def frequency(dictionary) -> Tuple[Optional[List[int]], Optional[List[int]]]:
    """Per symbol of a fairseq ``dictionary``: its count (how often it occurs
    in the training data, as fairseq-preprocess counted it) and its frequency
    rank, the number of non-special symbols with a larger count (0: the most
    frequent).  (None, None) for a dictionary without frequencies, whose
    symbols all have one count (``convert-hf`` writes 1: a Hugging Face
    vocabulary has none)."""
    counts = [int(c) for c in dictionary.count]
    ascending = sorted(counts[dictionary.nspecial:])
    if len(ascending) > 1 and ascending[0] == ascending[-1]:
        return None, None
    return counts, [len(ascending) - bisect.bisect_right(ascending, c) for c in counts]


def read_sentences(text: Optional[str] = None, conllu: Optional[str] = None):
    """Sentences of a whitespace-tokenised text file or a CoNLL-U file
    (:class:`fairseq_local_data.syntax.Sentence`); one-line errors."""
    from fairseq_local_data.syntax import SyntaxFileError, read_conllu, read_text

    if (text is None) == (conllu is None):
        raise AnalysisError("give exactly one of --text FILE and --conllu FILE")
    try:
        return read_conllu(conllu) if conllu is not None else read_text(text)
    except SyntaxFileError as e:
        raise AnalysisError(str(e)) from None


def prepare(model: AnalysisModel, sentences, max_len: Optional[int] = None) -> Tuple[List[Item], int]:
    """Tokenise every sentence (or :class:`~.pairs.SentencePair`); those longer than ``max_len`` tokens (default
    and at most the model's maximum positions) are skipped.  Returns the kept
    items and the number skipped.  Warns (one line on stderr) when most word
    pieces are unknown to the model's dictionary (the wrong ``--bpe``)."""
    limit = model.max_positions if max_len is None else min(int(max_len), model.max_positions)
    items, skipped, tokenised = [], 0, []
    counts, ranks = frequency(model.dictionary)
    for k, s in enumerate(sentences):
        second = getattr(s, "second", None)  # a SentencePair (Pascual et al. §5: MNLI pairs)
        tok = model.tokenise(s.first, second) if second is not None else model.tokenise(s.words)
        tokenised.append(tok)
        if len(tok.ids) > limit:
            skipped += 1
            continue
        rels = getattr(s, "relations", None)
        items.append(Item(k, list(s.words), None if s.heads is None else list(s.heads), tok,
                          relations=None if s.heads is None or rels is None else list(rels),
                          counts=None if counts is None else [counts[i] for i in tok.ids],
                          ranks=None if ranks is None else [ranks[i] for i in tok.ids]))
    warning = model.unknown_warning(tokenised)
    if warning:
        print(warning, file=sys.stderr)
    return items, skipped


def analysed_batches(model: AnalysisModel, items: Sequence[Item], max_tokens: int = 4096,
                     progress: bool = True, desc: str = "sentences") -> Iterator[Tuple[List[Item], Tensor, Tensor, Capture]]:
    """Batched eval-mode forward passes over ``items`` (by length, at most
    ``max_tokens`` padded tokens a batch), with a progress bar.  Yields the
    batch's items, ``src_tokens`` (B, T), ``src_lengths`` (B,) and the
    :class:`Capture` of the pass.  Padding is on the right."""
    if max_tokens < 1:
        raise AnalysisError("--max-tokens must be positive")
    with tqdm(total=len(items), desc=desc, unit="sent", disable=not progress, leave=False) as bar:
        for batch in batches([it.input for it in items], max_tokens):
            chosen = [items[k] for k in batch]
            src_tokens, src_lengths = model.collate([it.input for it in chosen])
            yield chosen, src_tokens, src_lengths, model.forward(src_tokens, src_lengths)
            bar.update(len(chosen))


def record(item: Item, capture: Capture, b: int) -> dict:
    """The record of batch row ``b`` (real positions only)."""
    n = len(item.input.ids)
    attn = torch.stack([w[b, :, :n, :n] for w in capture.weights]).float().cpu()  # (L, H, T, T)
    rec = {"tokens": item.input.tokens, "word_ids": item.input.word_ids, "words": item.words, "attn": attn}
    if item.heads is not None:
        rec["heads"] = item.heads
    if item.relations is not None:
        rec["relations"] = item.relations
    if item.counts is not None:
        rec["counts"], rec["ranks"] = item.counts, item.ranks
    if item.input.sentence_ids is not None:
        rec["sentence_ids"], rec["separator"] = item.input.sentence_ids, item.input.separator
    return rec


def dump_records(model: AnalysisModel, items: Sequence[Item], max_tokens: int = 4096,
                 progress: bool = True) -> List[dict]:
    """The records of ``items``, in input order."""
    out = {}
    for chosen, _, _, cap in analysed_batches(model, items, max_tokens, progress, desc="dump"):
        for b, item in enumerate(chosen):
            out[item.index] = record(item, cap, b)
    return [out[k] for k in sorted(out)]


def save_dump(records: List[dict], path: str) -> None:
    """``torch.save`` the list of records, atomically (:func:`outputs.save_torch`)."""
    from ..outputs import save_torch

    save_torch(records, path)


def is_dump(path: Path) -> bool:
    """Whether ``path`` holds an attention dump (a previous output of
    ``attention dump``, which it may replace): a non-empty list of records
    with :data:`RECORD_KEYS`.  Loaded with ``weights_only`` and tensors
    memory-mapped, so nothing large is read and nothing is unpickled."""
    try:
        if irregular_file(path, "attention dump") or not zipfile.is_zipfile(path):
            return False
        records = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return False
    return isinstance(records, list) and bool(records) and all(
        isinstance(r, dict) and all(k in r for k in RECORD_KEYS) for r in records)


def load_dump(path: str) -> List[dict]:
    """The records of a dump file, checked; :class:`AnalysisError` (one line)
    for a file that is not a dump."""
    problem = irregular_file(path, "attention dump")
    if problem:
        raise AnalysisError(problem)
    try:
        records = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise AnalysisError(f"no dump file '{path}'") from None
    except Exception as e:
        raise AnalysisError(f"'{path}' is not an attention dump ({type(e).__name__})") from None
    if not isinstance(records, list):
        raise AnalysisError(f"'{path}' is not an attention dump (expected a list of records, "
                            f"got {type(records).__name__})")
    if not records:
        raise AnalysisError(f"'{path}' is an empty list, not an attention dump")
    for k, r in enumerate(records):
        if not isinstance(r, dict):
            raise AnalysisError(f"'{path}' is not an attention dump (item {k} is a {type(r).__name__}, "
                                f"not a record)")
        missing = [key for key in RECORD_KEYS if key not in r]
        if missing:
            raise AnalysisError(f"'{path}': record {k} has no {', '.join(missing)} (not an attention dump)")
        a = r["attn"]
        T = len(r["tokens"])
        if not isinstance(a, Tensor) or a.dim() != 4 or a.shape[2:] != (T, T) or len(r["word_ids"]) != T:
            raise AnalysisError(f"'{path}': record {k} has attention of shape "
                                f"{tuple(a.shape) if isinstance(a, Tensor) else type(a).__name__}, "
                                f"expected (L, H, {T}, {T})")
        if "sentence_ids" in r and (not isinstance(r["sentence_ids"], list) or len(r["sentence_ids"]) != T):
            raise AnalysisError(f"'{path}': record {k} has 'sentence_ids' not of its {T} tokens")
    return records
