"""Learned attention masks, the parts of
:class:`~fairseq_local.attention.module.LocalMultiheadAttention` whose
pattern has parameters (head gates are in :mod:`fairseq_local.attention.gates`).

* :class:`DamMask` (:mod:`.dam`) — SparseBERT's Differentiable Attention Mask
  (Shi et al. 2021, §3.1, §4.1, Algorithm 1, Eq. 3–5): parameters α per head.
  In training, the Gumbel-sigmoid sample ``sigmoid((α + G1 − G2)/τ)`` with
  either estimator: ``hard`` (default, as the authors' released code runs it:
  the forward value is the 0/1 sample 1[α + G1 − G2 > 0], the backward pass
  the soft sample's gradient, "straight-through") or ``soft`` (the paper's
  literal Eq. 3: the soft sample itself).  In evaluation ``M = 1[α > 0]``,
  deterministic (the authors' code samples in evaluation too).  ``dam-u``
  (unstructured) has one α per position pair, α_ij = α_ji, up to a maximum
  length; ``dam-s`` (structured) has one α per offset |i − j| (M is Toeplitz,
  the noise is shared along each diagonal) and keeps the first and last
  tokens' rows and columns on (the paper's §4.1; the authors' code omits it).
  Without noise (``--dam-no-noise``) training uses P = sigmoid(α) itself, the
  soft mask of §3.1 (Eq. 3–4), whatever the estimator.
* :class:`AxisSelector` (:mod:`.axis`) — Adaptive Axis Attention (Wang et al.
  2022, §4.2, Eq. 11–12): a fully connected layer maps each token to a row and
  a column logit; a Gumbel-sigmoid "retrieves a 0/1 indicator" I_r, I_c
  (straight-through: 0/1 forward, the soft sample's gradient backward) and
  ``B_ij = I_r,i + I_c,j − I_r,i·I_c,j``, OR-ed with ``local-W`` (W = 2 by
  default) so no row is empty.  Evaluation keeps, per sentence, the
  round(Σ sigmoid(logit)) real tokens of highest logit (:func:`.axis.expected_topk`):
  as many axes as training keeps on average.
* Each is one learned kind (:mod:`.kind`): a :class:`LearnedKind` class,
  registered with :func:`register_learned_kind`, that builds its parameter
  module, realises M, counts it, and gives its penalty, options, resume
  signature and export; :class:`DamSpec` (``dam``) and
  :class:`AxisAdaptiveSpec` (``aaa``) are the two built in.
* The Gumbel noise and estimators (:mod:`.noise`) and the temperature
  schedule :class:`TauSchedule` (:mod:`.tau`).

Noise is drawn in float32 (in fp16, U's clamp bounds round to 0 and 1 and
the Gumbel difference can be ±inf or NaN), and the samples and their
straight-through gradients are float32 whatever the model's dtype.  Noise is
drawn from torch's global generator, which fairseq reseeds at every
update (``seed + num_updates``), so a resumed run draws the same noise as an
uninterrupted one.  The temperature τ follows :class:`TauSchedule` on the
update number, which fairseq hands to every module through
``set_num_updates``.
"""

from ..masks.learned import LearnedMask
from .kind import (LEARNED_KINDS, Exportable, KindBuild, KindUse, LearnedKind, Realised, kinds_in,
                   register_learned_kind, unregister_learned_kind, upgrade_learned_keys)
from .dam import DAM_ESTIMATORS, DamMask, DamSpec  # registers the kind dam (dam-u, dam-s)
from .axis import AxisAdaptiveSpec, AxisSelector  # registers the kind aaa
from .noise import gumbel_noise_difference, gumbel_sigmoid, scale_grad
from .tau import TAU_SCHEDULES, TauSchedule

__all__ = ["AxisAdaptiveSpec", "AxisSelector", "DAM_ESTIMATORS", "DamMask", "DamSpec", "Exportable", "KindBuild",
           "KindUse", "LEARNED_KINDS", "LearnedKind", "LearnedMask", "Realised", "TAU_SCHEDULES", "TauSchedule",
           "gumbel_noise_difference", "gumbel_sigmoid", "kinds_in", "register_learned_kind", "scale_grad",
           "unregister_learned_kind", "upgrade_learned_keys"]
