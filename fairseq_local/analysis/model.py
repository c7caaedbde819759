"""A trained encoder, ready for analysis: loading, tokenising words, batching,
and a forward pass that captures each layer's attention and block input.

Works on every model with :class:`~fairseq_local.attention.module.LocalMultiheadAttention`
heads: the NMT encoders (``transformer_local`` archs; the source side) and
RoBERTa (``roberta_local`` archs, also a stock RoBERTa after ``fairseq-local
convert-roberta``).  Inputs are words (from CoNLL-U or whitespace-split text,
or sentence pairs of a TSV file for RoBERTa, :mod:`.pairs`);
the model's own subword tokeniser is applied to each word, so every token
knows its word.
"""

import contextlib
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..errors import OneLineError

BPE_KINDS = ("auto", "subword_nmt", "sentencepiece", "gpt2", "wordpiece", "byte_bpe", "none")


class AnalysisError(OneLineError, ValueError):
    """Bad input to an analysis command (printed as one ``error:`` line)."""


# A word tokeniser: (word, first word of the sentence?) -> [(dictionary symbol, display string)].
WordTokeniser = Callable[[str, bool], List[Tuple[str, str]]]


def word_tokeniser(kind: str, model: Optional[str], lang: Optional[str] = None) -> WordTokeniser:
    """The subword tokeniser ``kind`` (see :data:`BPE_KINDS`, not ``auto``) of
    the model files ``model``: subword-nmt codes, a SentencePiece ``.model``,
    the folder of GPT-2's ``encoder.json`` and ``vocab.bpe``, BERT's WordPiece
    ``vocab.txt`` (cased or not as its ``tokenizer_config.json`` says), or the folder of a Hugging
    Face RoBERTa's ``vocab.json`` and ``merges.txt`` (``byte_bpe``; the
    symbols are its ids, as ``fairseq-local convert-hf`` writes dict.txt).
    subword-nmt applies the vocabulary ``vocab.LANG`` next to the codes, if
    there is one, with threshold 1 (as scripts/bpe-binarize.sh)."""
    from fairseq_local_data.bpe import (TokenizerError, gpt2_encoder, gpt2_files, sentencepiece_processor as _spm,
                                        wordpiece_tokenizer)

    try:
        if kind == "none":
            return lambda word, first: [(word, word)]
        if kind == "subword_nmt":
            from subword_nmt.apply_bpe import BPE, read_vocabulary

            if not model or not os.path.isfile(model):
                raise AnalysisError(f"missing subword-nmt codes file '{model}'")
            vocab_file = os.path.join(os.path.dirname(model), f"vocab.{lang}")
            vocab = None
            if lang and os.path.isfile(vocab_file):
                with open(vocab_file, encoding="utf-8") as f:
                    vocab = read_vocabulary(f, 1)
            with open(model, encoding="utf-8") as f:
                bpe = BPE(f, vocab=vocab)
            return lambda word, first: [(p, p) for p in bpe.segment_tokens([word])]
        if kind == "sentencepiece":
            sp = _spm(Path(model)) if model else None
            if sp is None:
                raise AnalysisError("--bpe sentencepiece needs --bpe-model FILE.model")
            return lambda word, first: [(p, p) for p in sp.encode(word, out_type=str)]
        if kind == "wordpiece":
            if not model or not os.path.isfile(model):
                raise AnalysisError(f"--bpe wordpiece needs --bpe-model VOCAB.txt (BERT's vocab.txt), not '{model}'")
            wordpiece = wordpiece_tokenizer(model)
            # a word's pieces: "playing" -> "play", "##ing" (punctuation inside a word is split off, as BERT does)
            return lambda word, first: [(p, p) for p in wordpiece.encode(word, add_special_tokens=False).tokens]
        if kind in ("gpt2", "byte_bpe"):
            if kind == "byte_bpe":
                files = [os.path.join(model or "", name) for name in ("vocab.json", "merges.txt")]
                if not all(os.path.isfile(f) for f in files):
                    raise AnalysisError(f"--bpe byte_bpe needs --bpe-model DIR with vocab.json and merges.txt, "
                                        f"not '{model}'")
                enc = gpt2_encoder(*map(Path, files))
            else:
                enc = gpt2_encoder(*gpt2_files(model, check=False))
            # GPT-2 encodes a word after a space with the space: " word".
            return lambda word, first: [(str(i), enc.decode([i])) for i in enc.encode(word if first else " " + word)]
    except TokenizerError as e:
        raise AnalysisError(str(e)) from None
    raise AnalysisError(f"unknown --bpe '{kind}' (one of {', '.join(BPE_KINDS)})")


def find_tokeniser(data: str) -> Tuple[str, Optional[str]]:
    """``(kind, model)`` of the tokeniser that prepared the data folder
    ``data``: the ``bpe/`` folder that scripts/bpe-binarize.sh and
    scripts/prepare-bert-corpus.sh write."""
    bpe = Path(data) / "bpe"
    if (bpe / "codes").is_file():
        return "subword_nmt", str(bpe / "codes")
    if (bpe / "spm.model").is_file():
        return "sentencepiece", str(bpe / "spm.model")
    if (bpe / "encoder.json").is_file() and (bpe / "vocab.bpe").is_file():
        return "gpt2", str(bpe)
    if (Path(data) / "vocab.txt").is_file():  # a folder written by fairseq-local convert-hf
        return "wordpiece", str(Path(data) / "vocab.txt")
    if (Path(data) / "vocab.json").is_file() and (Path(data) / "merges.txt").is_file():
        return "byte_bpe", str(data)
    raise AnalysisError(f"cannot tell the tokeniser of '{data}' (no bpe/codes, bpe/spm.model, bpe/encoder.json, "
                        f"or a converted model's vocab.txt or vocab.json); give --bpe and --bpe-model")


@dataclass
class Tokenised:
    """One sentence (or sentence pair) as model input: ``ids`` (T,),
    ``tokens`` (display strings) and ``word_ids`` (the word of each token,
    -1 for special tokens).  A pair also has ``sentence_ids`` (T,): 0 for a
    token of the first sentence, 1 for one of the second, -1 for a special
    token; and ``separator``: the positions of the tokens between the two
    sentences (RoBERTa: the two ``</s>`` of ``<s> A </s> </s> B </s>``)."""

    ids: List[int]
    tokens: List[str]
    word_ids: List[int]
    sentence_ids: Optional[List[int]] = None
    separator: Optional[List[int]] = None


@dataclass
class Capture:
    """What one forward pass of the encoder showed, per layer:
    ``weights`` (B, H, T, T) and the self-attention block's input (T, B, d)."""

    weights: List[Tensor] = field(default_factory=list)
    inputs: List[Tensor] = field(default_factory=list)


class AnalysisModel:
    """An encoder with :class:`LocalMultiheadAttention` heads, in ``eval()`` mode.

    Args:
        model: a loaded fairseq model (NMT or RoBERTa).
        dictionary: the encoder's input dictionary.
        tokeniser: how words become dictionary symbols.
        target_tokeniser: the same for the target side of a translation
            model (reference translations), or None.
    """

    def __init__(self, model: torch.nn.Module, dictionary, tokeniser: WordTokeniser, name: str = "model",
                 bpe: str = "the tokeniser", target_tokeniser: Optional[WordTokeniser] = None) -> None:
        from ..models.transformer import local_encoder
        from ..attention.module import LocalMultiheadAttention

        self.model = model.eval()
        self.encoder = local_encoder(model)
        layers = getattr(self.encoder, "layers", None) or []
        self.attention = [getattr(layer, "self_attn", None) for layer in layers]
        if not self.attention or not all(isinstance(a, LocalMultiheadAttention) for a in self.attention):
            raise AnalysisError(f"'{name}' has no fairseq-local attention module in its encoder "
                                f"(a stock fairseq model? convert RoBERTa with fairseq-local convert-roberta)")
        self.roberta = hasattr(getattr(model, "encoder", None), "sentence_encoder")
        # a BERT (segment embeddings and absolute positions: convert-hf) separates a pair with one </s>
        args = getattr(model, "args", None)
        self.bert_pairs = self.roberta and bool(getattr(args, "segment_embeddings", False)) \
            and getattr(args, "positions", None) == "absolute"
        self.dictionary = dictionary
        self.tokeniser = tokeniser
        self.target_tokeniser = target_tokeniser
        self.bpe = bpe
        self.max_positions = int(self.encoder.max_positions())

    @property
    def num_layers(self) -> int:
        return len(self.attention)

    @property
    def num_heads(self) -> int:
        return self.attention[0].num_heads

    @property
    def head_dim(self) -> int:
        return self.attention[0].head_dim

    @classmethod
    def load(cls, path: str, data: Optional[str] = None, bpe: str = "auto", bpe_model: Optional[str] = None,
             cpu: bool = True) -> "AnalysisModel":
        """Load checkpoint ``path`` with its task reading ``data`` (default:
        the data folder it was trained on), and the tokeniser (``auto``: the
        one in ``data/bpe``)."""
        from fairseq import checkpoint_utils

        from ..checkpoint_compat import check_checkpoint_file, enable_fairseq_checkpoint_loading
        from ..errors import InputError

        if not os.path.isfile(path):
            raise AnalysisError(f"no checkpoint '{path}'")
        try:  # a dump, a mask file, a truncated file: say so before fairseq tries
            check_checkpoint_file(path)
        except InputError as e:
            raise AnalysisError(str(e)) from None
        enable_fairseq_checkpoint_loading()
        logging.getLogger("fairseq").setLevel(logging.WARNING)
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        overrides = {"data": data} if data else {}
        try:
            models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
        except Exception as e:  # fairseq's loader raises many kinds; the user needs one line
            raise AnalysisError(f"cannot load '{path}' (with data '{data or 'from the checkpoint'}'): "
                                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        data = data or getattr(cfg.task, "data", None) or ""
        label = f"--bpe {bpe}"
        if bpe == "auto":
            bpe, bpe_model = find_tokeniser(data) if bpe_model is None else (_guess_kind(bpe_model), bpe_model)
            label = f"--bpe auto ({bpe} from '{bpe_model}')"
        model = models[0]
        if not cpu and torch.cuda.is_available():
            model = model.cuda()
        # the task infers the language pair from the data folder when the options leave it out
        lang = getattr(getattr(task, "cfg", None), "source_lang", None) or getattr(cfg.task, "source_lang", None)
        target_lang = getattr(getattr(task, "cfg", None), "target_lang", None) or getattr(cfg.task, "target_lang", None)
        target = word_tokeniser(bpe, bpe_model, target_lang) if target_lang and hasattr(model, "decoder") else None
        return cls(model, task.source_dictionary, word_tokeniser(bpe, bpe_model, lang), name=path,
                   bpe=label, target_tokeniser=target)

    def tokenise(self, words: Sequence[str], second: Optional[Sequence[str]] = None) -> Tokenised:
        """Words -> model input, with ``<s>`` first for RoBERTa and ``</s>`` last.

        With ``second`` (a sentence pair, RoBERTa only) the input is what
        fairseq's ``sentence_prediction`` task makes of a pair with
        ``--init-token 0 --separator-token 2`` (scripts/finetune-glue.sh; each
        input binarised with its own ``</s>``): ``<s> A </s> </s> B </s>``.
        The words of B are numbered after those of A (word ``len(words) + k``
        is B's k-th word); each sentence is tokenised on its own (its first
        word is a sentence start, as GPT-2's BPE of a GLUE column sees it).
        Pascual et al. §5 analyse such MNLI pairs.  A BERT (segment
        embeddings and ``--positions absolute``: a ``convert-hf`` model and its
        fine-tunings) gets BERT's ``[CLS] A [SEP] B [SEP]``: ``<s> A </s> B </s>``.  A translation
        encoder has no separator: a pair is an :class:`AnalysisError`."""
        d = self.dictionary
        if second is not None and not self.roberta:
            raise AnalysisError("sentence pairs need a RoBERTa model: a translation source has no separator "
                                "between two sentences (give --text)")
        ids, tokens, word_ids, sentence_ids = [], [], [], []

        def special(index: int) -> None:
            ids.append(index), tokens.append(d[index]), word_ids.append(-1), sentence_ids.append(-1)

        def sentence(ws: Sequence[str], offset: int, number: int) -> None:
            for w, word in enumerate(ws):
                for symbol, shown in self.tokeniser(word, w == 0):
                    ids.append(d.index(symbol)), tokens.append(shown)
                    word_ids.append(offset + w), sentence_ids.append(number)

        if self.roberta:
            special(d.bos())
        sentence(words, 0, 0)
        separator = None
        if second is not None:
            separator = [len(ids)] if self.bert_pairs else [len(ids), len(ids) + 1]  # A's </s> (+ RoBERTa's second)
            for _ in separator:
                special(d.eos())
            sentence(second, len(words), 1)
        special(d.eos())
        return Tokenised(ids, tokens, word_ids, None if second is None else sentence_ids, separator)

    def unknown_share(self, sentences: Sequence[Tokenised]) -> float:
        """The share of the word pieces (special tokens aside) of ``sentences``
        that the dictionary does not know (``<unk>``); 0 without pieces."""
        unk = self.dictionary.unk()
        pieces = [i for s in sentences for i, w in zip(s.ids, s.word_ids) if w >= 0]
        return sum(i == unk for i in pieces) / len(pieces) if pieces else 0.0

    def unknown_warning(self, sentences: Sequence[Tokenised], limit: float = 0.5) -> Optional[str]:
        """A one-line warning when more than ``limit`` of the pieces of
        ``sentences`` are ``<unk>`` (the wrong ``--bpe`` for this model), else None."""
        share = self.unknown_share(sentences)
        if share <= limit:
            return None
        return (f"warning: {100 * share:.0f}% of the BPE pieces are not in the model's dictionary: "
                f"is {self.bpe} the BPE the model was trained with?")

    def collate(self, sentences: Sequence[Tokenised]) -> Tuple[Tensor, Tensor]:
        """Right-padded ``src_tokens`` (B, T) and ``src_lengths`` (B,)."""
        lengths = torch.tensor([len(s.ids) for s in sentences])
        tokens = torch.full((len(sentences), int(lengths.max())), self.dictionary.pad(), dtype=torch.long)
        for b, s in enumerate(sentences):
            tokens[b, :len(s.ids)] = torch.tensor(s.ids)
        device = next(self.model.parameters()).device
        return tokens.to(device), lengths.to(device)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[Capture]:
        """While open, every forward pass of the encoder's attention layers is
        captured (an :func:`~fairseq_local.attention.context.attention_context`
        asking for inputs and weights, which takes the dense path); the
        :class:`Capture` yielded holds them once the block closes."""
        from ..attention.context import AttentionCapture, attention_context

        cap, calls = Capture(), AttentionCapture(inputs=True, weights=True)
        try:
            with attention_context(capture=calls):
                yield cap
        finally:
            mine = [c for c in calls.calls if any(c.module is a for a in self.attention)]
            cap.weights.extend(c.weights for c in mine)
            cap.inputs.extend(c.input for c in mine)

    @torch.no_grad()
    def forward(self, src_tokens: Tensor, src_lengths: Tensor) -> Capture:
        """One eval-mode pass of the encoder over a batch; the capture of it."""
        with self.capturing() as cap:
            self.encoder(src_tokens, src_lengths=src_lengths)
        return cap


def _guess_kind(model: str) -> str:
    """The tokeniser kind of a ``--bpe-model`` path given with ``--bpe auto``."""
    if os.path.isdir(model):
        return "byte_bpe" if os.path.isfile(os.path.join(model, "merges.txt")) else "gpt2"
    if os.path.basename(model) == "vocab.txt":
        return "wordpiece"
    return "sentencepiece" if model.endswith(".model") else "subword_nmt"


def batches(sentences: Sequence[Tokenised], max_tokens: int) -> Iterator[List[int]]:
    """Indices of ``sentences`` in batches of at most ``max_tokens`` padded
    tokens, by length (so that little is padding); every sentence once."""
    order = sorted(range(len(sentences)), key=lambda k: len(sentences[k].ids))
    batch: List[int] = []
    for k in order:
        longest = max([len(sentences[j].ids) for j in batch] + [len(sentences[k].ids)])
        if batch and longest * (len(batch) + 1) > max_tokens:
            yield batch
            batch = []
        batch.append(k)
    if batch:
        yield batch
