"""A learned head kind is one class, registered as a fixed kind is.

A fixed kind (:mod:`fairseq_local.attention.masks`) is a frozen spec with one
rule, ``allows``.  A learned kind is a frozen spec too (a
:class:`~fairseq_local.attention.masks.learned.LearnedMask`, parsed from the
layout), and its class says everything else about it, so that nothing outside
the class names it:

* ``key``: the name of its parameter module in each attention layer
  (``self_attn.learned.<key>``), of its penalty (``<key>_loss``) and of the
  ρ of its heads in the sparsity terms (``rho_sums[<key>]``; the hinge's
  ``--aaa-hinge-heads aaa`` reads the ``aaa`` kind's);
* :meth:`build`: its parameter module for one layer's heads of the kind,
  which may be shared across layers through ``KindBuild.shared``;
* :meth:`realise`: M (B, n, T, S) of those heads for one forward pass, and
  what its counts need besides (:class:`Realised`);
* :meth:`kept`: |M| over each sentence's real pairs (Adaptive Axis
  Attention, Eq. 9), by default Σ M;
* :meth:`penalty`: its penalty and its logged (sum, count) keys
  (:attr:`rates`), from the layers' :class:`KindUse`;
* ``options``: its options (fields of
  :class:`~fairseq_local.attention.config.AttentionConfig`, read at their
  effective values from :class:`~fairseq_local.attention.config.AttentionOptions`) and
  :meth:`signature`, what it adds to the resume signature;
* ``weight``: the criterion option that weighs its penalty (else
  ``--learned-lambda KEY=W``);
* an optional ``resample()`` on any of its modules (drawn once per training
  update by :func:`~fairseq_local.attention.context.attention_context`);
* :meth:`exportable`: how it becomes a fixed ``file`` mask (SparseBERT §4.3).

Register it with :func:`register_learned_kind`, which also registers its
layout names as mask kinds::

    @register_learned_kind("lband", ("lband", "lband"))
    @dataclass(frozen=True)
    class LearnedBand(LearnedKind):
        ...
"""

from dataclasses import dataclass, field
from typing import (Any, Callable, ClassVar, Dict, Iterable, List, Mapping, Optional, Protocol, Sequence, Tuple,
                    Type, TypeVar)

import torch
from torch import Tensor, nn

from ..masks.learned import LearnedMask
from ..masks.registry import register_mask_kind, unregister_mask_kind


@dataclass(frozen=True)
class Realised:
    """What one kind realised in one forward pass of one layer.

    ``masks``: M (B, n, T, S) float32 in [0, 1] of the layer's n heads of the
    kind, in head order, 0 at padding.  ``extra``: what the kind's counts and
    logs read besides (None, or the kind's own tensors)."""

    masks: Tensor
    extra: Optional[Tensor] = None


@dataclass(frozen=True)
class KindBuild:
    """What a kind's :meth:`LearnedKind.build` reads: the options
    (:class:`~fairseq_local.attention.config.AttentionOptions`), the model
    dimension, the longest input (None: unknown), and the modules shared across the layers of one model (keyed as the kind chooses)."""

    cfg: Any
    embed_dim: int
    max_positions: Optional[int] = None
    shared: Dict[str, nn.Module] = field(default_factory=dict)


@dataclass
class KindUse:
    """One layer's heads of one kind in one forward pass, for the penalties.

    ``layer``: the layer number (from 1); ``params``: the kind's module of
    that layer; ``heads``, ``specs``: its heads (indices from 0) and their specs; ``realised``; ``rho``: (B, n)
    float32, 1 − |M|/N² per sentence and head (Eq. 9), differentiable;
    ``real``: (B, T) bool; ``tau``, ``mask_neg``, ``mode``: the layer's."""

    layer: int
    params: nn.Module
    heads: Tuple[int, ...]
    specs: Tuple["LearnedKind", ...]
    realised: Realised
    rho: Tensor
    real: Tensor
    tau: float
    mask_neg: float
    mode: str


@dataclass(frozen=True)
class LearnedKind(LearnedMask):
    """Base class of a learned head kind (see the module docstring)."""

    key: ClassVar[str] = ""
    options: ClassVar[Tuple[str, ...]] = ()
    weight: ClassVar[Optional[str]] = None
    rates: ClassVar[Dict[str, Tuple[str, str]]] = {}
    legacy: ClassVar[Optional[str]] = None  # the module's attribute name before kinds (old checkpoints)

    def before_softmax(self, mode: str) -> bool:
        """M enters before the softmax as C·(1 − M) (True), or multiplies it
        (SparseBERT Eq. 4) in ``mode``."""
        return mode == "pre"

    @classmethod
    def build(cls, b: KindBuild, layer: Optional[int], heads: Sequence[Tuple[int, "LearnedKind"]]) -> nn.Module:
        """The parameter module of layer ``layer`` (from 0; None: a layer
        built alone) for its ``heads``, (head index, spec) pairs."""
        raise NotImplementedError

    @classmethod
    def realise(cls, params: nn.Module, specs: Sequence["LearnedKind"], x: Tensor, positions: Tensor, tau: float,
                padding_mask: Optional[Tensor]) -> Realised:
        """M of the heads ``specs`` for the layer input x (T, B, d), the
        real positions (B, T) (−1 at padding) and ``padding_mask`` (B, T)
        bool or None, at temperature ``tau``: training samples, evaluation
        is deterministic (``params.training``)."""
        raise NotImplementedError

    @classmethod
    def kept(cls, params: nn.Module, specs: Sequence["LearnedKind"], realised: Realised, real: Tensor) -> Tensor:
        """(B, n) float32: Σ M over each sentence's real pairs, differentiable."""
        w = real.float()
        return torch.einsum("bhts,bt,bs->bh", realised.masks.float(), w, w)

    @classmethod
    def penalty(cls, cfg: Any, uses: Sequence[KindUse]) -> Tuple[Optional[Tensor], Dict[str, object]]:
        """The kind's penalty (a float32 scalar, or None: it has none) and its
        logging values (tensors or numbers; ``(sum, count)`` pairs named in
        :attr:`rates`), over the layers' ``uses`` in layer order.  ρ of the
        kind's heads (Eq. 9) is logged for every kind as ``KEY_rho_sum`` and
        ``KEY_count`` by :func:`~fairseq_local.attention.penalties.sparsity_terms`."""
        return None, {}

    @classmethod
    def images(cls, uses: Sequence[KindUse], n: int) -> Dict[str, Tensor]:
        """TensorBoard heatmaps (H, W) in [0, 1]: by default each head's M for
        the batch's first sentence (``n``: the length of images drawn from
        parameters alone)."""
        out = {}
        for use in uses:
            real = use.real[0]
            for k, (h, spec) in enumerate(zip(use.heads, use.specs)):
                out[f"masks/l{use.layer}_h{h + 1}_{spec}"] = use.realised.masks[0, k][real][:, real]
        return out

    @classmethod
    def signature(cls, options: Any, get: Callable[[str, Any], Any]) -> Dict[str, str]:
        """What the kind adds to the resume signature: its ``options`` as strings."""
        return {name: str(getattr(options, name)) for name in cls.options}

    @classmethod
    def position_limit(cls, params: nn.Module) -> Optional[int]:
        """The longest sentence ``params`` cover (None: any)."""
        return None

    @classmethod
    def reinit(cls, params: nn.Module) -> None:
        """Initialise ``params`` again after a model re-initialises every
        ``nn.Linear`` (RoBERTa's ``init_bert_params``)."""
        reset = getattr(params, "reset_parameters", None)
        if callable(reset):
            reset()

    @classmethod
    def exportable(cls, layout: Sequence[Any], state: Mapping[str, Tensor],
                   prefix: str) -> Dict[Tuple[int, int], "Exportable"]:
        """{(layer, head): a mask that :func:`~fairseq_local.attention.export.export` can
        write} for the kind's heads of a checkpoint (layout, state dict, the
        encoder layers' key prefix); heads that share parameters share one
        object.  By default none: the kind's pattern depends on the input."""
        return {}

    @classmethod
    def exports(cls) -> bool:
        """Whether the kind overrides :meth:`exportable` (its heads can become
        fixed ``file`` masks)."""
        return cls.exportable.__func__ is not LearnedKind.exportable.__func__


class Exportable(Protocol):
    """A learned mask that can be written as a fixed ``file`` mask:
    ``max_len``, ``ends`` (its first and last rows and columns stay on), the
    layout name ``kind`` and :meth:`matrix`."""

    max_len: int
    ends: bool
    kind: str

    def matrix(self, n: int, what: str = "hard") -> Tensor:
        """(n, n) float: ``hard`` the evaluation mask, ``prob`` its probabilities."""


LEARNED_KINDS: Dict[str, Type[LearnedKind]] = {}
K = TypeVar("K", bound=Type[LearnedKind])


def register_learned_kind(key: str, *names: Tuple[str, str]) -> Callable[[K], K]:
    """Class decorator: register a :class:`LearnedKind` as ``key``, and its
    layout ``names`` ((name, syntax) pairs) as mask kinds."""

    def wrapper(cls: K) -> K:
        if key in LEARNED_KINDS:
            raise ValueError(f"learned kind {key!r} is already registered")
        if not names:
            raise ValueError(f"learned kind {key!r} names no layout kind")
        cls.key = key
        for name, syntax in names:
            register_mask_kind(name, syntax)(cls)
        LEARNED_KINDS[key] = cls
        cls._names = tuple(name for name, _ in names)
        return cls

    return wrapper


def unregister_learned_kind(key: str) -> None:
    """Remove the kind ``key`` and its layout names (a kind registered for a while, as a test does)."""
    cls = LEARNED_KINDS.pop(key)
    for name in cls._names:
        unregister_mask_kind(name)


def kinds_in(specs: Iterable[Any]) -> List[Type[LearnedKind]]:
    """The learned kinds among mask ``specs``, in registration order."""
    present = {type(s) for s in specs if isinstance(s, LearnedKind)}
    return [k for k in LEARNED_KINDS.values() if k in present]


LEARNED_PREFIX = ".self_attn.learned."


def upgrade_learned_keys(state: Dict[str, Any]) -> None:
    """Rename, in place, the learned parameters of a checkpoint saved before
    kinds (``.self_attn.<legacy>.``) to ``.self_attn.learned.<key>.``."""
    for kind in LEARNED_KINDS.values():
        if kind.legacy:
            old = f".self_attn.{kind.legacy}."
            for name in [n for n in state if old in n]:
                state[name.replace(old, f"{LEARNED_PREFIX}{kind.key}.")] = state.pop(name)
