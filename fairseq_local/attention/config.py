"""The options of the local attention.

:class:`AttentionConfig` holds the options of
:class:`~fairseq_local.attention.module.LocalMultiheadAttention` (layout,
mask mode, DAM, AAA, head gates, Gumbel temperature) for every model that
uses it: each option is one field there, with its name, type and help.  A
model adds them to its parser with :func:`add_attention_args`, a named
architecture fills in its own defaults with :func:`set_attention_defaults`.
Options are ``None`` until they are resolved (:func:`fill_defaults`), so that
a named arch can tell "unset" from a value the user typed; the effective
defaults are :data:`DEFAULTS` and the gate presets
(:data:`~fairseq_local.attention.gates.GATE_PRESETS`).

:func:`attention_options` is the one place where the options are resolved and
the ``--attn-layout`` text is parsed: it gives a frozen
:class:`AttentionOptions` (every option at its effective value, and the layout
as a tuple of :class:`~fairseq_local.attention.layout.LayerSpec`) that the
models, the attention builder and modules, the penalties, the resume
signature and the export read.  The text form (:func:`format_layout`) is what
the saved options hold.  The values a choice
option takes are tuples kept beside the code that implements them and used
here: :data:`MASK_MODES` and :data:`DAM_L1` (here),
:data:`~fairseq_local.attention.context.ATTN_IMPLS`,
:data:`~fairseq_local.attention.learned.DAM_ESTIMATORS`,
:data:`~fairseq_local.attention.learned.TAU_SCHEDULES` and
:data:`~fairseq_local.attention.gates.GATE_PENALTIES`.
"""

import functools
from argparse import Namespace
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Dict, Optional, Tuple

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass

from ..errors import OptionError
from .context import ATTN_IMPLS
from .gates import GATE_PENALTIES, GATE_PRESETS, parse_gate_init
from .layout import LayerSpec, check_layout, format_layout, parse_layout
from .learned import DAM_ESTIMATORS, TAU_SCHEDULES, TauSchedule

MASK_MODES = ("post", "pre")
# State-dict key fragments of the learned parts of an attention layer (every learned kind's module, gates).
LEARNED_KEYS = (".self_attn.learned.", ".self_attn.gates.")
DAM_L1 = ("sum", "density")


@dataclass
class AttentionConfig(FairseqDataclass):
    """Every option of the local attention (the effective defaults are in
    :data:`DEFAULTS`; named architectures may change them)."""

    attn_layout: Optional[str] = field(default=None, metadata={
        "help": "encoder self-attention layout: per layer and head a mask and an optional Q/K group "
                "('@name' ties within a layer, '@@name' across layers), e.g. '[band-1,band-2,global*6]*6'. "
                "Default: all heads global"})
    mask_mode: Optional[ChoiceEnum(MASK_MODES)] = field(default=None, metadata={
        "help": "post: multiply the softmax by the mask, no renormalisation (Pande et al. Eq. 9; default); "
                "pre: exclude masked keys before the softmax (default of the DAM and fixed sparse archs)"})
    attn_impl: Optional[ChoiceEnum(ATTN_IMPLS)] = field(default=None, metadata={
        "help": "how attention is computed (same results): auto = the fastest correct path per layer "
                "(default); dense = one n x n path for every head (the reference); window = windowed "
                "kernels for local heads and the fused kernel for global ones; flex = PyTorch "
                "FlexAttention with a block mask per head (CUDA; forward only on CPU)"})
    mask_file: Optional[str] = field(default=None, metadata={
        "help": "masks written by 'fairseq-local export', for 'file' heads"})
    mask_neg: Optional[float] = field(default=None, metadata={
        "help": "C of the additive C*(1 - M) by which a learned mask enters before the softmax "
                "(SparseBERT's code, Adaptive Axis Attention Eq. 5; default -1e4)"})
    dam_max_len: Optional[int] = field(default=None, metadata={
        "help": "dam-u/dam-s: longest sentence the mask covers (default: the model's maximum positions)"})
    dam_per_layer: bool = field(default=False, metadata={
        "help": "one DAM mask per layer and head (Adaptive Axis Attention §4.1); default one per head, "
                "shared by all layers (SparseBERT §3.1)"})
    dam_estimator: Optional[ChoiceEnum(DAM_ESTIMATORS)] = field(default=None, metadata={
        "help": "how the Gumbel sample enters in training: hard: straight-through 0/1 samples "
                "(SparseBERT's released code; default); soft: the Gumbel-sigmoid value (the paper's Eq. 3). "
                "Without noise (--dam-no-noise) there is no sample: P = sigmoid(alpha) either way"})
    dam_init: Optional[float] = field(default=None, metadata={
        "help": "mean of the initial DAM logits alpha (default 0: P = 0.5)"})
    dam_init_std: Optional[float] = field(default=None, metadata={
        "help": "standard deviation of the initial alpha (default 1e-3, the authors' 1e-3*randn)"})
    dam_l1: Optional[ChoiceEnum(DAM_L1)] = field(default=None, metadata={
        "help": "DAM L1 term: sum = ||M||_1 of each distinct mask at --dam-max-len times "
                "(128/--dam-max-len)^2, i.e. SparseBERT's code at its length 128, so that the paper's lambda "
                "pulls as it did whatever --dam-max-len (default); density = mean over sentences and DAM "
                "heads of ||M||_1/N^2"})
    dam_no_noise: bool = field(default=False, metadata={
        "help": "train DAM with the soft mask P = sigmoid(alpha) in the forward pass, without Gumbel "
                "noise, whatever --dam-estimator (SparseBERT §3.1, Eq. 3-4; §3.1 exactly: "
                "--arch transformer_dam_u --dam-no-noise --mask-mode post, --dam-lambda 0)"})
    dam_lr_scale: Optional[float] = field(default=None, metadata={
        "help": "dam-u/dam-s: multiply the DAM logits alpha's learning rate by this (Adam-type optimizers; SGD: "
                "its square) so that they reach --aaa-target (--aaa-hinge-heads learned) or a sparsity in a short "
                "fine-tuning; checkpoints do not depend on it (default 1)"})
    aaa_lr_scale: Optional[float] = field(default=None, metadata={
        "help": "aaa: multiply the axis selector's learning rate by this (Adam-type optimizers; SGD: its square) "
                "so that it reaches --aaa-target in a short fine-tuning; checkpoints do not depend on it (default 1)"})
    tau_start: Optional[float] = field(default=None, metadata={
        "help": "Gumbel-sigmoid temperature at update 0 (default 1.0)"})
    tau_end: Optional[float] = field(default=None, metadata={
        "help": "temperature reached at --tau-anneal-updates (default --tau-start)"})
    tau_anneal: Optional[ChoiceEnum(TAU_SCHEDULES)] = field(default=None, metadata={
        "help": "temperature schedule over the update number (default constant)"})
    tau_anneal_updates: Optional[int] = field(default=None, metadata={
        "help": "updates over which tau goes from start to end (default 0)"})
    gate_preset: Optional[ChoiceEnum(list(GATE_PRESETS))] = field(default=None, metadata={
        "help": "hard-concrete gate setting: louizos (beta 2/3, log-alpha 3.0, penalty summed over gates; "
                "default) or voita (Voita et al.'s code: beta 0.33, Glorot init, penalty averaged over "
                "gated layers; default of transformer_head_gates). Explicit --gate-* options override it"})
    gate_init: Optional[str] = field(default=None, metadata={
        "help": "initial gate log-alpha: a number, or 'glorot' (U(+-sqrt(3/H)))"})
    gate_beta: Optional[float] = field(default=None, metadata={"help": "hard-concrete temperature beta"})
    gate_gamma: Optional[float] = field(default=None, metadata={
        "help": "hard-concrete stretch lower end, < 0 (default -0.1)"})
    gate_zeta: Optional[float] = field(default=None, metadata={
        "help": "hard-concrete stretch upper end, > 1 (default 1.1)"})
    gate_penalty: Optional[ChoiceEnum(GATE_PENALTIES)] = field(default=None, metadata={
        "help": "L0 term: sum over gates of P(open), or layer-mean: the mean over gated layers of each "
                "layer's sum"})


DEFAULTS: Dict[str, object] = dict(
    mask_mode="post", attn_impl="auto", mask_neg=-1e4, dam_estimator="hard", dam_init=0.0, dam_init_std=1e-3,
    dam_l1="sum", dam_lr_scale=1.0, aaa_lr_scale=1.0, tau_start=1.0, tau_anneal="constant", tau_anneal_updates=0,
    gate_preset="louizos", gate_gamma=-0.1, gate_zeta=1.1,
)
OPTION_NAMES = tuple(f.name for f in fields(AttentionConfig) if not f.name.startswith("_"))


def add_attention_args(parser) -> None:
    """Add the :class:`AttentionConfig` options to an argparse parser."""
    gen_parser_from_dataclass(parser, AttentionConfig())


def fill_defaults(obj, **arch_defaults):
    """Set every unset (None) option of ``obj`` in place: from
    ``arch_defaults`` (a named architecture's), then :data:`DEFAULTS`, then
    the gate preset's values; returns ``obj``."""
    for name, value in {**DEFAULTS, **arch_defaults}.items():
        if getattr(obj, name, None) is None:
            setattr(obj, name, value)
    preset = str(obj.gate_preset)
    if preset not in GATE_PRESETS:
        raise OptionError(f"--gate-preset must be one of {', '.join(GATE_PRESETS)}, not {preset!r}")
    for name, value in GATE_PRESETS[preset].items():
        if getattr(obj, name, None) is None:
            setattr(obj, name, value)
    return obj


@dataclass(frozen=True)
class AttentionOptions:
    """Every attention option at its effective value, and the parsed layout
    (made by :func:`attention_options` only).

    ``layout``: one :class:`~fairseq_local.attention.layout.LayerSpec` per
    encoder layer (``format_layout(layout)`` is the canonical
    ``--attn-layout`` text); the other fields are the options of
    :class:`AttentionConfig` of the same names, choice options as plain
    strings."""

    layout: Tuple[LayerSpec, ...]
    mask_mode: str
    attn_impl: str
    mask_file: Optional[str]
    mask_neg: float
    dam_max_len: Optional[int]
    dam_per_layer: bool
    dam_estimator: str
    dam_init: float
    dam_init_std: float
    dam_l1: str
    dam_no_noise: bool
    dam_lr_scale: float
    aaa_lr_scale: float
    tau_start: float
    tau_end: Optional[float]
    tau_anneal: str
    tau_anneal_updates: int
    gate_preset: str
    gate_init: str
    gate_beta: float
    gate_gamma: float
    gate_zeta: float
    gate_penalty: str

    def tau_schedule(self) -> TauSchedule:
        """The Gumbel-sigmoid temperature schedule of the ``--tau-*`` options."""
        end = self.tau_start if self.tau_end is None else self.tau_end
        try:
            return TauSchedule(self.tau_start, end, self.tau_anneal_updates, self.tau_anneal)
        except ValueError as e:
            raise OptionError(f"--tau-*: {e}") from None


def attention_options(cfg: Any, num_layers: Optional[int] = None, num_heads: Optional[int] = None) -> AttentionOptions:
    """The options of ``cfg`` (a namespace, config object or mapping; a
    missing or None option is unset) resolved, with the layout parsed: the
    one parse site of ``--attn-layout``.

    Unset options take their defaults (:func:`fill_defaults`); an unset
    layout is all global, ``[global*H]*L``, which needs ``num_layers`` (L)
    and ``num_heads`` (H).  Given both, the layout is checked against them.
    Raises :class:`~fairseq_local.attention.layout.LayoutError` (an empty or
    wrong layout) or :class:`OptionError` (an unknown gate preset)."""
    get = cfg.get if isinstance(cfg, Mapping) else functools.partial(getattr, cfg)
    values = fill_defaults(AttentionConfig(**{name: get(name, None) for name in OPTION_NAMES}))
    dims = num_layers is not None and num_heads is not None
    text = values.attn_layout
    if text is None and dims:
        text = f"[global*{num_heads}]*{num_layers}"
    layout = parse_layout(text or "")
    if dims:
        check_layout(layout, num_layers, num_heads)
    plain = {name: _plain(getattr(values, name)) for name in OPTION_NAMES if name != "attn_layout"}
    return AttentionOptions(layout=layout, **plain)


def _plain(value: Any) -> Any:
    """A choice option's value as a plain string (omegaconf gives enum members)."""
    return str(value) if isinstance(value, Enum) else value


def set_attention_defaults(args: Namespace, num_layers: int, num_heads: int, **arch_defaults) -> None:
    """Fill every unset option of ``args`` (:func:`fill_defaults`), check
    them, and write the layout in canonical form.  Raises :class:`OptionError`
    or :class:`~fairseq_local.attention.layout.LayoutError` in one line."""
    fill_defaults(args, **arch_defaults)
    options = attention_options(args, num_layers, num_heads)
    args.attn_layout = format_layout(options.layout)
    validate(options)


def validate(options: AttentionOptions) -> None:
    """One-line :class:`OptionError` for an out-of-range option."""
    o = options
    checks = [
        (o.dam_max_len is None or o.dam_max_len >= 1, f"--dam-max-len must be >= 1, not {o.dam_max_len}"),
        ((o.dam_init_std or 0) >= 0, f"--dam-init-std must be >= 0, not {o.dam_init_std}"),
        (o.dam_lr_scale is None or o.dam_lr_scale > 0, f"--dam-lr-scale must be > 0, not {o.dam_lr_scale}"),
        (o.mask_neg is None or o.mask_neg < 0, f"--mask-neg must be < 0, not {o.mask_neg}"),
    ]
    for ok, message in checks:
        if not ok:
            raise OptionError(message)
    o.tau_schedule()
    try:
        parse_gate_init(o.gate_init)
    except ValueError as e:
        raise OptionError(f"--gate-init: {e}") from None
    gamma, zeta, beta = o.gate_gamma, o.gate_zeta, o.gate_beta
    if not (gamma < 0 and zeta > 1 and beta > 0):
        raise OptionError(f"--gate-*: hard-concrete needs gamma < 0 < 1 < zeta and beta > 0 "
                          f"(got beta {beta}, gamma {gamma}, zeta {zeta})")
