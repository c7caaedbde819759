"""GPT-2's byte-level BPE (Radford et al. 2019), the encoder RoBERTa uses, on
Hugging Face's ``tokenizers``.

The vocabulary (``encoder.json``) and merges (``vocab.bpe``) are GPT-2's own
files, read offline by ``tokenizers.models.BPE``; its ``ByteLevel``
pre-tokeniser (without prefix space) maps each word's UTF-8 bytes to GPT-2's
printable symbols, the BPE model merges them, and the ``ByteLevel`` decoder
turns ids back into text (invalid UTF-8 becomes U+FFFD, as with Python's
``errors="replace"``). There is no normaliser, no special token and no
post-processing, so the ids are those of fairseq's ``--bpe gpt2``
(``fairseq.data.encoders.gpt2_bpe_utils``; the tests compare them).

Words are split with GPT-2's pattern (:data:`PATTERN`) run by the ``regex``
module, as fairseq does, rather than by the same pattern inside
``tokenizers`` (Oniguruma): the two engines' Unicode tables are of different
versions, and code points that only the newer tables assign (Unicode 17.0 and
later: 17,480 of them with regex 2026.11.15 and tokenizers 0.23.3) are
letters or digits to ``regex`` but other symbols to Oniguruma, which would
split such words differently from fairseq. With the same module both split
alike whatever the versions. No fairseq (or torch) is imported.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import regex

if TYPE_CHECKING:  # tokenizers is imported where GPT-2's BPE is used (the [data] extra)
    from tokenizers import Tokenizer

# GPT-2's pre-tokenising pattern (OpenAI's gpt-2 encoder): contractions,
# letters, digits, other symbols, each with at most one leading space; spaces.
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def gpt2_tokenizer(encoder_json: Path | str, vocab_bpe: Path | str) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` of GPT-2's ``encoder.json`` and ``vocab.bpe``
    for words already split by :data:`PATTERN`: the BPE model (no dropout, the
    merges always applied), the byte-level mapping without prefix space and
    without splitting, and the byte-level decoder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    model = models.BPE.from_file(str(encoder_json), str(vocab_bpe), dropout=None, ignore_merges=False)
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


class Encoder:
    """Text <-> GPT-2 ids with a tokenizer from :func:`gpt2_tokenizer`."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        """GPT-2 ids of ``text`` (``[]`` for the empty string)."""
        words = PATTERN.findall(text)
        if not words:
            return []
        return self.tokenizer.encode(words, is_pretokenized=True, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of GPT-2 ids; bytes that are not UTF-8 become U+FFFD and
        ids outside the vocabulary are skipped."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


def get_encoder(encoder_json: Path | str, vocab_bpe: Path | str) -> Encoder:
    """The :class:`Encoder` of GPT-2's ``encoder.json`` (symbol -> id) and
    ``vocab.bpe`` (a version line, then one merge a line, best first)."""
    return Encoder(gpt2_tokenizer(encoder_json, vocab_bpe))
