"""The one way in and out of the attention layers during a forward pass.

Everything that reaches a :class:`~fairseq_local.attention.module.LocalMultiheadAttention`
from outside its own options and parameters, or that it hands back beside its
output, travels in one :class:`AttentionContext`, entered with
:func:`attention_context` and read by each layer with :func:`current`:

* ``records``: the list that each layer appends its
  :class:`~fairseq_local.attention.record.AttentionRecord` to (the realised
  learned masks behind the sparsity terms), or None when nothing is recorded.
  The encoders open a fresh list per forward pass and return it with their
  output (``"sparsity"``).
* ``capture``: what the caller asks each layer to hand back
  (:class:`AttentionCapture`): its input x, each head's weights z_h·A_h and
  each head's output before W_o, per call, in call order, for analyses
  (attention dumps, relevance propagation, head roles).
* ``impl``: a path that overrides every layer's own ``--attn-impl``
  (``dense``, ``auto``, ``window``, ``flex``), or None.
* ``memo``: what is built once per forward pass and shared by the layers
  (a DAM mask gathered for the batch's positions, FlexAttention BlockMasks),
  or None: each call builds its own.
* ``detach_weights``: the dense path treats the attention weights as
  constants (no gradient through the softmax, its scores or a learned mask):
  the AH-rule of conservative relevance propagation (Ali et al. 2022),
  :mod:`fairseq_local.analysis.lrp`.  Only the dense path forms the weights,
  so it needs ``impl="dense"``.

A layer reads the context once per call and hands the paths what they need
in their arguments (``impl`` picks the path, ``detach_weights`` travels in
:class:`~fairseq_local.attention.plan.PathInputs`): the paths read no context.

Contexts nest: each field not given to :func:`attention_context` is the
enclosing context's.  An analysis enters one with a capture; the encoder it
calls enters its own with fresh records and memo, and the capture and
override carry through.

Per-update noise.  A learned kind's per-update noise (a DAM mask's Gumbel
noise, SparseBERT §4.1: one draw per update shared by every layer that uses
the mask) is the state of its own module, drawn by that module's
``resample()`` (:meth:`~fairseq_local.attention.learned.DamMask.resample`),
and not part of the context: fairseq's ``--checkpoint-activations`` recomputes a layer in the
backward pass, after the encoder's context has closed, and the recomputation
must see the noise of the forward pass.  Entering a context with
``sample_noise=modules`` (the encoders do it for a training forward) draws it:
once per distinct mask of those modules, in the order they first appear, before
anything else of the forward pass uses the random generator.  The
recomputation runs under whatever context is open when the backward pass
runs (on CUDA, none): a caller that captures or overrides the path should
finish the backward pass of checkpoint-wrapped layers outside its context.

Process-wide caches.  Tensors that depend only on a length, a mask and a
device (index tensors, fixed masks, pair-count tables, compiled kernels) are
kept by functions wrapped with :func:`cached`; :func:`clear_caches` empties
them all (the benchmark does, between measurements).
"""

import functools
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Hashable, Iterable, Iterator, List, Optional, TypeVar

from torch import Tensor, nn

from ..errors import OptionError

ATTN_IMPLS = ("auto", "dense", "window", "flex")  # the paths, as --attn-impl names them
T = TypeVar("T")


@dataclass
class CapturedCall:
    """What one attention call handed back (fields not asked for are None).

    ``module``: the layer that made it.  ``input``: its input x (T, B, d).
    ``weights``: (B, H, T, S), each head's attention weights as its output is
    made of them, z_h·A_h for a gated head (gate z_h), A_h otherwise.
    ``head_outputs``: (B, H, T, d_h), each head's output before the output
    projection, gate applied (the concatenation over heads is W_o's input).
    ``padding_mask``: the call's key padding mask (B, S), True at padding, or None."""

    module: nn.Module
    input: Optional[Tensor] = None
    weights: Optional[Tensor] = None
    head_outputs: Optional[Tensor] = None
    padding_mask: Optional[Tensor] = None


@dataclass
class AttentionCapture:
    """What each attention call of a forward pass is asked to hand back, and,
    in ``calls``, what they handed back, in call order.

    ``graph``: keep the tensors' autograd graph (and functorch transforms'
    tangents), for a gradient through them; by default they are detached.
    Asking for ``weights`` makes every layer take the dense path, the only one
    that forms them."""

    inputs: bool = False
    weights: bool = False
    head_outputs: bool = False
    graph: bool = False
    calls: List[CapturedCall] = field(default_factory=list)

    def add(self, module: nn.Module, x: Tensor, weights: Optional[Tensor], head_outputs: Tensor,
            padding_mask: Optional[Tensor]) -> None:
        """Keep what is asked for of one call of ``module`` (shapes as :class:`CapturedCall`)."""
        def keep(t: Optional[Tensor], asked: bool) -> Optional[Tensor]:
            if t is None or not asked:
                return None
            return t if self.graph else t.detach()

        self.calls.append(CapturedCall(module, keep(x, self.inputs), keep(weights, self.weights),
                                       keep(head_outputs, self.head_outputs), padding_mask))

    def of(self, module: nn.Module) -> List[CapturedCall]:
        """The calls of ``module``, in order."""
        return [c for c in self.calls if c.module is module]


@dataclass(frozen=True)
class AttentionContext:
    """The state of the attention layers for the forward pass that runs in it
    (see the module docstring): ``records``, ``capture``, ``impl``, ``memo``
    and ``detach_weights``."""

    records: Optional[List[Any]] = None  # AttentionRecord (record.py) per layer call
    capture: Optional[AttentionCapture] = None
    impl: Optional[str] = None
    memo: Optional[Dict[Hashable, Any]] = None
    detach_weights: bool = False


_NONE = AttentionContext()
_CURRENT: ContextVar[AttentionContext] = ContextVar("fairseq_local_attention_context", default=_NONE)
_INHERIT: Any = object()


def current() -> AttentionContext:
    """The innermost open context (one with every field None outside any)."""
    return _CURRENT.get()


@contextmanager
def attention_context(*, records: Optional[bool] = _INHERIT, capture: Optional[AttentionCapture] = _INHERIT,
                      impl: Optional[str] = _INHERIT, memo: Optional[bool] = _INHERIT,
                      detach_weights: bool = _INHERIT,
                      sample_noise: Iterable[nn.Module] = ()) -> Iterator[AttentionContext]:
    """Enter an :class:`AttentionContext`; every field not given is the enclosing one's.

    Args:
        records: True: a fresh list of records; False: no recording.
        capture: what each layer hands back, or None for nothing.
        impl: the path every layer takes (one of ``auto``, ``dense``,
            ``window``, ``flex``), or None for each layer's own ``--attn-impl``.
        memo: True: a fresh per-forward memo; False: none.
        detach_weights: the dense path detaches the attention weights
            (needs ``impl="dense"`` in the resulting context).
        sample_noise: attention modules whose learned kinds draw this
            update's noise now (each of their modules with a ``resample()``) (a training forward; see the module docstring);
            a new draw also starts a fresh memo unless ``memo`` is given.
    Yields the context entered.
    """
    if impl is not _INHERIT and impl is not None and impl not in ATTN_IMPLS:
        raise OptionError(f"impl must be one of {ATTN_IMPLS} or None, not {impl!r}")
    changes: Dict[str, Any] = {}
    if records is not _INHERIT:
        changes["records"] = [] if records else None
    if capture is not _INHERIT:
        changes["capture"] = capture
    if impl is not _INHERIT:
        changes["impl"] = impl
    if memo is not _INHERIT:
        changes["memo"] = {} if memo else None
    if detach_weights is not _INHERIT:
        changes["detach_weights"] = bool(detach_weights)
    # One draw per distinct noise source of the learned kinds (a module with resample(), e.g. a DAM mask),
    # in first-use order (they may be shared by layers).
    drawn = {id(d): d for m in sample_noise for p in getattr(m, "learned", {}).values() for d in p.modules()
             if callable(getattr(d, "resample", None))}.values()
    for mask in drawn:
        mask.resample()
    if drawn and memo is _INHERIT:  # what the memo holds was gathered with the previous noise
        changes["memo"] = {}
    ctx = replace(current(), **changes)
    if ctx.detach_weights and ctx.impl != "dense":  # the other paths never form the weights
        raise OptionError(f"detach_weights needs impl='dense', not {ctx.impl!r}")
    token = _CURRENT.set(ctx)
    try:
        yield ctx
    finally:
        _CURRENT.reset(token)


def memoised(key: Hashable, anchor: Optional[Tensor], build: Callable[[], T]) -> T:
    """``build()``, or what it built for ``key`` and ``anchor`` earlier in this
    forward pass (the current context's memo; without one, always ``build()``).

    ``anchor`` is a tensor the value was made from (a padding mask), compared
    by identity, never by value: no read of the device.  The memo keeps it
    alive, so its id stays unique while the memo lives."""
    memo = current().memo
    if memo is None:
        return build()
    full = (key, None if anchor is None else id(anchor))
    hit = memo.get(full)
    if hit is not None and hit[0] is anchor:
        return hit[1]
    value = build()
    memo[full] = (anchor, value)
    return value


_CACHES: List[Any] = []


def cached(maxsize: Optional[int] = 128) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """``functools.lru_cache(maxsize)``, registered so that :func:`clear_caches` empties it."""
    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        wrapped = functools.lru_cache(maxsize=maxsize)(fn)
        _CACHES.append(wrapped)
        return wrapped

    return wrap


def clear_caches() -> None:
    """Empty every cache made with :func:`cached`."""
    for fn in _CACHES:
        fn.cache_clear()
