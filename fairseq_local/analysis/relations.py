"""Token position sets of one sentence record: queries, local, syntactic, unrelated.

A *record* is one sentence of an attention dump (a plain dict):

- ``tokens``: the model's input tokens, special tokens included;
- ``word_ids``: per token the 0-based index of its word, or -1 for a special token;
- ``words``: the words;
- ``heads`` (absent without syntax): per word the 0-based index of its syntactic
  head, -1 for the root;
- ``attn`` (optional here): a float tensor (L, H, T, T), ``attn[l, h, i, j]`` the
  weight of query position i on key position j.

The sets follow Pande et al., "The Importance of Local Attention" §3.1/§3.2, on
token positions 0..T-1:

- query positions i: every non-special token (``word_ids[i] >= 0``);
- L_i = {j : |i - j| <= window}, special tokens included;
- S_i = every token whose word is the syntactic head or a dependent of i's word,
  minus L_i (a word split into subwords contributes all of its tokens);
- U_i = every position in neither L_i nor S_i.

Plain torch; no fairseq import.
"""

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from ..errors import OneLineError

__all__ = ["RecordError", "PositionSets", "position_sets", "record_length"]


class RecordError(OneLineError, ValueError):
    """A sentence record (or dump) that does not have the expected format."""


@dataclass
class PositionSets:
    """The position sets of one sentence of T tokens.

    Attributes:
        queries: bool (T,), True at the non-special tokens.
        local: bool (T, T), ``local[i, j]`` iff j is in L_i.
        syntactic: bool (T, T) or None (record without ``heads``), S_i per row.
        unrelated: bool (T, T), U_i per row.

    Rows of non-query positions are all False.
    """

    queries: Tensor
    local: Tensor
    syntactic: Optional[Tensor]
    unrelated: Tensor

    @property
    def length(self) -> int:
        """T, the number of token positions."""
        return int(self.queries.shape[0])


def _int_list(record: dict, key: str) -> list:
    value = record[key]
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise RecordError(f"'{key}' must be a list of integers")
    return list(value)


def record_length(record: dict) -> int:
    """Check a record's keys and lengths and return its number of tokens T.

    T is the size of ``attn`` (L, H, T, T) when the record has one, else the length
    of ``word_ids``.  Raises :class:`RecordError` with a one-line message.
    """
    if not isinstance(record, dict):
        raise RecordError(f"a record must be a dict, not {type(record).__name__}")
    for key in ("tokens", "word_ids", "words"):
        if key not in record:
            raise RecordError(f"missing key '{key}'")
    word_ids = _int_list(record, "word_ids")
    if "attn" in record:
        attn = record["attn"]
        if not isinstance(attn, Tensor) or attn.dim() != 4 or attn.shape[-1] != attn.shape[-2]:
            shape = tuple(attn.shape) if isinstance(attn, Tensor) else type(attn).__name__
            raise RecordError(f"'attn' must be a (L, H, T, T) tensor, got {shape}")
        length = int(attn.shape[-1])
    else:
        length = len(word_ids)
    if len(word_ids) != length:
        raise RecordError(f"'word_ids' has {len(word_ids)} entries for T = {length} tokens")
    if len(record["tokens"]) != length:
        raise RecordError(f"'tokens' has {len(record['tokens'])} entries for T = {length} tokens")
    n_words = len(record["words"])
    for i, w in enumerate(word_ids):
        if not -1 <= w < n_words:
            raise RecordError(f"word id {w} of token {i} out of range for {n_words} words")
    if "heads" in record:
        heads = _int_list(record, "heads")
        if len(heads) != n_words:
            raise RecordError(f"'heads' has {len(heads)} entries for {n_words} words")
        for w, h in enumerate(heads):
            if not -1 <= h < n_words:
                raise RecordError(f"head {h} of word {w} out of range for {n_words} words")
            if h == w:
                raise RecordError(f"word {w} is its own head")
    return length


def position_sets(record: dict, window: int = 2) -> PositionSets:
    """The query positions and the sets L_i, S_i, U_i of a record (Pande et al. §3.1).

    Args:
        record: a sentence record (see the module docstring); validated first.
        window: the half width of the local window L_i (2 in Pande et al.).

    Returns:
        :class:`PositionSets` over the record's T positions; ``syntactic`` is None
        when the record has no ``heads``.
    """
    length = record_length(record)
    word_ids = torch.tensor(record["word_ids"], dtype=torch.long).reshape(length)
    queries = word_ids >= 0
    rows = queries[:, None]
    pos = torch.arange(length)
    local = ((pos[:, None] - pos[None, :]).abs() <= window) & rows

    syntactic = None
    taken = local
    if "heads" in record:
        n_words = len(record["words"])
        heads = torch.tensor(record["heads"], dtype=torch.long).reshape(n_words)
        # related[u, v]: v is the head of u or u the head of v
        related = torch.zeros(n_words + 1, n_words + 1, dtype=torch.bool)
        deps = (heads >= 0).nonzero().flatten()
        related[deps, heads[deps]] = True
        related = related | related.T
        # special tokens map to the extra (unrelated) word n_words
        w = torch.where(queries, word_ids, torch.full_like(word_ids, n_words))
        syntactic = related[w][:, w] & rows & ~local
        taken = local | syntactic
    unrelated = rows & ~taken
    return PositionSets(queries=queries, local=local, syntactic=syntactic, unrelated=unrelated)
