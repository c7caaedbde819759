"""Hard-concrete head gates with an L0 penalty (Louizos et al. 2018), as used
for head pruning by Voita et al. (2019, §4): one gate per ``:gate`` head of a
layer, applied to the head's output before the output projection.

Two settings of the free constants are named *presets*:

============  ========  ============================  ===========================
preset        β         initial log α                 penalty (times --gate-lambda)
============  ========  ============================  ===========================
``louizos``   2/3       3.0 (gates start open)        Σ over all gates of P(open)
``voita``     0.33      Glorot-uniform, U(±√(3/H))    mean over gated layers of the
                        (≈ U(±0.61) for H = 8 heads)  layer's Σ P(open)
============  ========  ============================  ===========================

``voita`` is what the authors' released code runs (``lib/layers/concrete_gate.py``
of ``lena-voita/the-story-of-heads``: temperature 0.33, a Glorot-initialised
``log_a`` of shape [1, H, 1, 1], ``reduce_sum`` of P(open) per layer, averaged
over layers by their training script's coefficient of 0.1).  With L gated
layers of H gates each, ``--gate-lambda λ`` under ``layer-mean`` equals
λ / L under ``sum``.
"""

import math
from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from ..errors import OptionError

GATE_PENALTIES = ("sum", "layer-mean")
# The decoder's attention types that ``--decoder-gates`` can gate (Voita et al. 2019 §6).
DECODER_GATE_KINDS = ("self", "cross")
GATE_PRESETS = {
    "louizos": dict(gate_beta=2 / 3, gate_init="3.0", gate_penalty="sum"),
    "voita": dict(gate_beta=0.33, gate_init="glorot", gate_penalty="layer-mean"),
}


def parse_gate_init(text: Union[str, float]) -> Union[str, float]:
    """``--gate-init``: a number (every log α) or ``glorot``."""
    if str(text) == "glorot":
        return "glorot"
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"gate init must be a number or 'glorot', not {text!r}") from None


def parse_decoder_gates(text: Optional[str]) -> Tuple[str, ...]:
    """``--decoder-gates``: a comma list of ``self`` and ``cross`` (empty or
    None: no decoder gates); an :class:`OptionError` (one line) otherwise."""
    if text is None or str(text).strip() in ("", "none"):
        return ()
    kinds = [p.strip() for p in str(text).split(",")]
    bad = [k for k in kinds if k not in DECODER_GATE_KINDS]
    if bad:
        raise OptionError(f"--decoder-gates takes a comma list of {' and '.join(DECODER_GATE_KINDS)} "
                          f"(or 'none'), not {bad[0]!r}")
    return tuple(k for k in DECODER_GATE_KINDS if k in kinds)  # one order: one signature


class HeadGates(nn.Module):
    """Hard-concrete gates z ∈ [0, 1], one per gated head of a layer.

    Training: s = sigmoid((log u − log(1 − u) + log α)/β), z = clamp(s(ζ − γ) + γ,
    0, 1).  Evaluation: z = clamp(sigmoid(log α)(ζ − γ) + γ, 0, 1).
    L0 penalty: P(z ≠ 0) = sigmoid(log α − β log(−γ/ζ)) per gate.

    Args:
        num_gates: gated heads in the layer.
        init: initial log α, or ``"glorot"``: U(±√(3/num_heads)), Glorot's
            bound for the authors' [1, H, 1, 1] variable.
        num_heads: H, the heads of the layer (for ``glorot``).
    """

    def __init__(
        self, num_gates: int, init: Union[str, float] = 3.0, beta: float = 2 / 3,
        gamma: float = -0.1, zeta: float = 1.1, num_heads: int = 0,
    ) -> None:
        super().__init__()
        if not (gamma < 0 and zeta > 1 and beta > 0):
            raise ValueError(f"hard-concrete needs gamma < 0 < 1 < zeta and beta > 0 "
                             f"(got beta {beta}, gamma {gamma}, zeta {zeta})")
        init = parse_gate_init(init)
        if init == "glorot":
            bound = math.sqrt(3.0 / max(num_heads, num_gates))
            log_alpha = torch.empty(num_gates).uniform_(-bound, bound)
        else:
            log_alpha = torch.full((num_gates,), float(init))
        self.log_alpha = nn.Parameter(log_alpha)
        self.beta, self.gamma, self.zeta = beta, gamma, zeta

    def forward(self) -> Tensor:
        """(num_gates,) float32 gate values: sampled in training (noise drawn in
        float32: in fp16 the clamp bounds round to 0 and 1), :meth:`eval_values`
        otherwise."""
        if not self.training:
            return self.eval_values()
        u = torch.rand(self.log_alpha.shape, device=self.log_alpha.device).clamp(1e-6, 1 - 1e-6)
        s = torch.sigmoid((u.log() - (-u).log1p() + self.log_alpha.float()) / self.beta)
        return self._stretch(s)

    def eval_values(self) -> Tensor:
        """(num_gates,) float32 deterministic gates clamp(sigmoid(log α)(ζ − γ) + γ, 0, 1)."""
        return self._stretch(torch.sigmoid(self.log_alpha.float()))

    def _stretch(self, s: Tensor) -> Tensor:
        return (s * (self.zeta - self.gamma) + self.gamma).clamp(0.0, 1.0)

    def l0(self) -> Tensor:
        """(num_gates,) float32 probability that each gate is non-zero."""
        return torch.sigmoid(self.log_alpha.float() - self.beta * math.log(-self.gamma / self.zeta))
