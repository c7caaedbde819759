"""The verdicts of ``reproduce hta``'s report on Pascual et al.'s findings
(:data:`~.numbers_hta.HTA_FINDINGS`, H1–H9), from the ``hta.json`` of each
analysis (:class:`~fairseq_local.analysis.positions.PositionStats`).

One model and one pass over the data (one seed): every interval is a
percentile bootstrap over the analysis's heads (:func:`.verdicts.bootstrap`),
the units the paper itself counts ("for all heads except for two", "90% of the
heads", "the median head correlation value").  Thresholds the paper states as
counts of BERT-base's 144 heads become shares of heads ("all but two of the
144": at least 142/144 of the heads, whatever the model's head count).  Layer
groups follow the paper's "after four layers" and "the last four layers" of
12: the first and the last third of the layers (:func:`thirds`).

Every finding but H2 is decided on the paper's setting (:data:`MAIN`: the
pretrained model on MNLI pairs, §5).  H2, a claim about the pretrained model
(§7 repeats it on other languages' data, Fig. 4), is decided on each analysis
of the pretrained model (:data:`H2_COMPARABLE`); the fine-tuned model and the
translation encoder are shown beside it, not decided (:data:`H2_OTHERS`).
"""

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .numbers_hta import HTA_FIG1, HTA_FIG6, HTA_FINDINGS, HTA_SETUP
from .report import Finding, decide
from .verdicts import (Clause, Estimate, at_least, at_most, bootstrap, bootstrap_difference, not_comparable, order,
                       share, wilson)

TEXT = {f["id"]: f["text"] for f in HTA_FINDINGS}
MAIN = "bert-pairs"  # the paper's setting
H2_COMPARABLE = {"bert-pairs": "the paper's setting",
                 "bert-sentences": "the same pretrained model on single sentences"}
H2_OTHERS = {"bert-mnli-pairs": "fine-tuned on MNLI, where §5 analyses the non-fine-tuned BERT",
             "nmt-sentences": "a translation encoder, not BERT"}
HEADS = "heads"      # the bootstrap's units
LOCAL = 1            # H6: "around the diagonal": |offset| <= LOCAL
VERTICAL = 0.5       # H7: a head putting at least this share of its attention on <s>/</s> is vertical (§9.1)
BLOCK_MARGIN = 0.05  # H8: "no block pattern": the own sentence at most this far above its share of the tokens
COMMON = 0.25        # H3: the histogram's offsets that at least this share of offset 0's (query, key) pairs reach

Grid = List[List[Optional[float]]]


def _num(x) -> Optional[float]:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else None


def grid(result: Optional[dict], key: str) -> Optional[Grid]:
    """``result[key]`` as [[value per head] per layer] (None where missing or malformed)."""
    v = (result or {}).get(key)
    if not isinstance(v, list) or not v or not all(isinstance(row, list) for row in v):
        return None
    return [[_num(x) for x in row] for row in v]


def heads_of(g: Optional[Grid], layers: Optional[Sequence[int]] = None) -> List[float]:
    """The defined values of the heads of ``layers`` (0-based; all layers by default)."""
    if g is None:
        return []
    ks = range(len(g)) if layers is None else [k for k in layers if k < len(g)]
    return [x for k in ks for x in g[k] if x is not None]


def thirds(layers: int) -> Tuple[List[int], List[int]]:
    """The first and the last third of ``layers`` (at least one layer each;
    4 of 12 as the paper's "after four layers" and "the last four layers")."""
    k = max(1, round(layers / 3))
    return list(range(k)), list(range(layers - k, layers))


def layer_names(ks: Sequence[int]) -> str:
    """Layers from 1, as the paper numbers them."""
    return f"layer {ks[0] + 1}" if len(ks) == 1 else f"layers {ks[0] + 1}-{ks[-1] + 1}"


def mean_of(xs: Sequence[float], name: str) -> Optional[Estimate]:
    return bootstrap(xs, np.mean, HEADS, name)


def median_of(xs: Sequence[float], name: str) -> Optional[Estimate]:
    return bootstrap(xs, np.median, HEADS, name)


def share_of(xs: Sequence[float], test: Callable[[float], bool], name: str) -> Optional[Estimate]:
    """The share of heads passing ``test``, with Wilson's interval (a bootstrap
    of 0/1 units collapses to a point when every head passes)."""
    return share(sum(bool(test(x)) for x in xs), len(xs), HEADS, name) if len(xs) >= 2 else None


def counted(xs: Sequence[float], test: Callable[[float], bool], name: str) -> Optional[Estimate]:
    """The share k/n of heads passing ``test`` for a count claim ("all but two
    of the 144 heads"): reproduced by the count itself (a claim about one
    model's heads, which no interval over heads could reach: Wilson's lower
    bound of 144/144 is 0.974), contradicted only when Wilson's upper bound
    excludes the paper's share (one failing head of 16 cannot)."""
    if len(xs) < 2:
        return None
    k, n = sum(bool(test(x)) for x in xs), len(xs)
    return Estimate(k / n, k / n, wilson(k, n)[1], f"counted: {k} of {n} {HEADS}; upper end Wilson's", name)


def _missing(fid: str, claim: str, why: str) -> Finding:
    return decide(fid, TEXT[fid], [not_comparable(claim, why)])


def fig1_finding(r: Optional[dict]) -> Finding:
    """H1 (§6, Fig. 1): four thresholds on the shares of heads whose mean
    correlation of attention with the previous-layer contribution passes them."""
    p, s = heads_of(grid(r, "pearson_previous")), heads_of(grid(r, "spearman_previous"))
    if len(p) < 2 or len(s) < 2:
        return _missing("H1", "attention correlates with the previous-layer contribution",
                        "no correlation with the previous-layer contribution yet")
    n = HTA_SETUP["heads"]
    r7, s9 = HTA_FIG1["pearson_above_0.7_heads"], n - HTA_FIG1["spearman_below_0.9_heads"]
    clauses = [
        at_least(counted(p, lambda x: x > 0.7, "share r > 0.7"), r7 / n, f"r > 0.7 for all but {n - r7} of {n} heads"),
        at_least(share_of(p, lambda x: x > 0.85, "share r > 0.85"), HTA_FIG1["pearson_above_0.85_share"],
                 "r > 0.85 for 90 % of the heads"),
        at_least(counted(s, lambda x: x >= 0.9, "share ρ ≥ 0.9"), s9 / n,
                 f"ρ < 0.9 for only {n - s9} of {n} heads"),
        at_least(share_of(s, lambda x: x > 0.95, "share ρ > 0.95"), HTA_FIG1["spearman_above_0.95_share"],
                 "ρ > 0.95 for 75 % of the heads")]
    return decide("H1", TEXT["H1"], clauses,
                  f"{len(p)} heads of `{MAIN}`, median r {np.median(p):.2f}, ρ {np.median(s):.2f}; the paper's "
                  f"counts of its {n} heads are taken as shares of the heads (all but {n - r7} of {n}: "
                  f"{100 * r7 / n:.1f} %, i.e. all but {len(p) * (n - r7) / n:.2f} of these {len(p)})")


def _centre_clauses(what: str, r: Optional[dict]) -> Tuple[List[Clause], str]:
    """H2's clauses on one analysis: the attention centre of mass (per head)
    of the first third below 0, of the last third above 0, and the shift."""
    g = grid(r, "attention_centre_per_head")
    if g is None or len(g) < 2:
        return [not_comparable(f"`{what}`: attention moves from past to future tokens",
                               "no per-head attention centres of mass yet")], f"`{what}`: -"
    first, last = thirds(len(g))
    a0, a1 = heads_of(g, first), heads_of(g, last)
    e0 = mean_of(a0, f"`{what}` centre over {layer_names(first)}")
    e1 = mean_of(a1, f"`{what}` centre over {layer_names(last)}")
    shift = bootstrap_difference(a1, a0, HEADS, name=f"`{what}` shift of the centre") if a0 and a1 else None
    clauses = [at_most(e0, 0, f"`{what}`: the first layers attend more to past tokens (centre < 0)"),
               at_least(e1, 0, f"`{what}`: later layers attend more to future tokens (centre > 0)"),
               order(shift, f"`{what}`: the centre moves toward the future with depth")]
    per_layer = ", ".join("-" if not heads_of(g, [k]) else f"{np.mean(heads_of(g, [k])):+.2f}" for k in range(len(g)))
    return clauses, f"`{what}` per layer {per_layer}"


def centre_finding(results: Dict[str, Optional[dict]]) -> Finding:
    """H2 (§7, Figs. 2 and 4), decided on every analysis of the pretrained
    model, each with its own intervals over heads."""
    clauses: List[Clause] = []
    shown = []
    for what in H2_COMPARABLE:
        cs, text = _centre_clauses(what, results.get(what))
        clauses += cs
        shown.append(text)
    others = []
    for what, why in H2_OTHERS.items():
        _, text = _centre_clauses(what, results.get(what))
        others.append(f"{text} ({why}: not decided)")
    comparable = ", ".join(f"`{w}` ({why})" for w, why in H2_COMPARABLE.items())
    return decide("H2", TEXT["H2"], clauses,
                  f"decided on {comparable}; attention centre of mass, mean over heads: {'; '.join(shown)}; "
                  f"shown only: {'; '.join(others)}")


def _entropy(hist: Sequence, keep: Sequence[bool]) -> Optional[float]:
    """Normalised entropy (0: one offset, 1: uniform) of a head's histogram over the offsets kept."""
    xs = [max(float(v), 0.0) for v, k in zip(hist, keep) if k and _num(v) is not None]
    total = sum(xs)
    if len(xs) < 2 or total <= 0:
        return None
    p = np.asarray(xs) / total
    return float(-(p[p > 0] * np.log(p[p > 0])).sum() / math.log(len(xs)))


def _common_offsets(r: dict, name: str) -> List[bool]:
    """The offsets that at least :data:`COMMON` of offset 0's (query, key) pairs reach (all without counts)."""
    offsets, counts = r.get("offsets") or [], r.get(f"{name}_offset_counts")
    if not isinstance(counts, list) or len(counts) != len(offsets) or 0 not in offsets:
        return [True] * len(offsets)
    zero = counts[offsets.index(0)] or 0
    return [(c or 0) >= COMMON * zero for c in counts]


def uniformity_units(r: Optional[dict], layers: Sequence[int]) -> List[Tuple[float, float]]:
    """(attention, input contribution) normalised entropy of each head of ``layers``."""
    ha, hc = (r or {}).get("attention_histogram"), (r or {}).get("contribution_histogram")
    if not isinstance(ha, list) or not isinstance(hc, list):
        return []
    keep_a, keep_c = _common_offsets(r, "attention"), _common_offsets(r, "contribution")  # type: ignore[arg-type]
    units = []
    for k in layers:
        if k < len(ha) and k < len(hc):
            for a, c in zip(ha[k], hc[k]):
                ea, ec = _entropy(a, keep_a), _entropy(c, keep_c)
                if ea is not None and ec is not None:
                    units.append((ea, ec))
    return units


def uniform_finding(r: Optional[dict]) -> Finding:
    """H3 (§8, Figs. 3 and 5): after the first third, the input contribution's
    centre of mass nearer 0 than attention's (per layer, mean over heads, as
    Fig. 5), and its histogram more uniform (normalised entropy, per head)."""
    att, con = grid(r, "attention_centre_per_head"), grid(r, "contribution_centre_per_head")
    if att is None or con is None or len(att) < 2 or len(con) != len(att):
        return _missing("H3", "the input contribution is more uniform than attention",
                        "no input contribution centres of mass yet")
    first, _ = thirds(len(att))
    later = list(range(len(first), len(att)))
    units = [(k, a, c) for k in later for a, c in zip(att[k], con[k]) if a is not None and c is not None]

    def nearer(us) -> float:  # mean over layers of |mean attention centre| − |mean contribution centre|
        by = {}
        for k, a, c in us:
            by.setdefault(k, []).append((a, c))
        return float(np.mean([abs(np.mean([a for a, _ in v])) - abs(np.mean([c for _, c in v])) for v in by.values()]))

    est = bootstrap(units, nearer, HEADS, "|attention centre| − |contribution centre|")
    ent = uniformity_units(r, later)
    est_u = bootstrap(ent, lambda us: float(np.mean([c - a for a, c in us])), HEADS,
                      "entropy(contribution) − entropy(attention)")
    return decide("H3", TEXT["H3"], [
        order(est, f"over {layer_names(later)}, the contribution's centre of mass is nearer the attending token"),
        order(est_u, f"over {layer_names(later)}, the contribution's histogram is more uniform (normalised "
                     f"entropy over the offsets at least {100 * COMMON:.0f} % of offset 0's pairs reach)")],
        f"`{MAIN}`, {len(units)} heads after {layer_names(first)}")


def depth_finding(r: Optional[dict]) -> Finding:
    """H4 (§9, Fig. 6): the correlation of attention with the input
    contribution falls with depth, and the paper's four thresholds."""
    pi, si = grid(r, "pearson_input"), grid(r, "spearman_input")
    if pi is None or si is None or len(pi) < 2:
        return _missing("H4", "the correlation with the input contribution falls with depth",
                        "no correlation with the input contribution yet")
    L = len(pi)
    first, last = thirds(L)
    later = list(range(len(first), L))
    k3 = math.ceil(HTA_FIG6["spearman_median_below_0.7_from_layer"] * L / 12) - 1  # layer 3 of 12, 0-based
    r0, r1, rl = heads_of(pi, first), heads_of(pi, last), heads_of(pi, later)
    fall = bootstrap_difference(r0, r1, HEADS, name="r first − last third") if r0 and r1 else None
    clauses = [order(fall, f"r falls from {layer_names(first)} to {layer_names(last)}"),
               at_least(share_of(rl, lambda x: x < 0.5, "share r < 0.5"), 0.5,
                        f"after {layer_names(first)}, r < 0.5 for most heads"),
               at_most(median_of(r1, "median r"), 0.25, f"median r over {layer_names(last)} below 0.25")]
    if k3 == 0:
        clauses.append(not_comparable(f"median ρ under 0.7 at layer 3 of 12 (layer 1 of {L})",
                                      "layer 1's input contribution is its previous-layer contribution "
                                      "(e^0 is layer 1's input, §3-4), where Fig. 1's ρ applies"))
    else:
        clauses.append(at_most(median_of(heads_of(si, [k3]), "median ρ"), 0.7,
                               f"median ρ under 0.7 at layer {k3 + 1} (layer 3 of 12)"))
    clauses.append(at_most(median_of(heads_of(si, [L - 1]), "median ρ"),
                           HTA_FIG6["spearman_median_last_layer_below"], f"median ρ under 0.25 at layer {L}"))
    return decide("H4", TEXT["H4"], clauses, f"`{MAIN}`, {len(heads_of(pi))} heads in {L} layers")


def mismatch_finding(r: Optional[dict]) -> Finding:
    """H5 (§9-10): the gap r(previous) − r(input) per head grows from the first
    to the last third, and is positive in the last."""
    pp, pi = grid(r, "pearson_previous"), grid(r, "pearson_input")
    if pp is None or pi is None or len(pi) < 2 or len(pp) != len(pi):
        return _missing("H5", "the mismatch grows with depth", "no correlation with both contributions yet")
    first, last = thirds(len(pi))

    def gaps(ks):
        return [a - b for k in ks for a, b in zip(pp[k], pi[k]) if a is not None and b is not None]

    g0, g1 = gaps(first), gaps(last)
    grow = bootstrap_difference(g1, g0, HEADS, name="gap last − first third") if g0 and g1 else None
    return decide("H5", TEXT["H5"], [
        order(grow, f"r(previous) − r(input) grows from {layer_names(first)} to {layer_names(last)}"),
        order(mean_of(g1, "gap"), f"over {layer_names(last)}, attention correlates better with the previous-layer "
                                  f"than with the input contribution")],
        f"`{MAIN}`, per head r with the previous-layer minus r with the input contribution")


def peaks(r: Optional[dict], name: str) -> List[bool]:
    """Per head: does its histogram (``attention`` or ``contribution``) peak within |offset| <= LOCAL?"""
    offsets, hist = (r or {}).get("offsets"), (r or {}).get(f"{name}_histogram")
    out = []
    if isinstance(offsets, list) and isinstance(hist, list):
        for layer in hist:
            for head in layer if isinstance(layer, list) else []:
                seen = [(float(v), o) for v, o in zip(head, offsets) if _num(v) is not None]
                if seen:
                    out.append(abs(max(seen)[1]) <= LOCAL)
    return out


def diagonal_finding(r: Optional[dict]) -> Finding:
    """H6 (§9.1, Fig. 7): the input contribution peaks around the diagonal for most heads."""
    con, att = peaks(r, "contribution"), peaks(r, "attention")
    if len(con) < 2:
        return _missing("H6", "the input contribution peaks around the diagonal", "no input contribution yet")
    est = share_of([float(x) for x in con], bool, "share peaking near the diagonal")
    return decide("H6", TEXT["H6"], [at_least(est, 0.5, f"most heads' input contribution peaks within {LOCAL} "
                                                        f"token(s) of the attending token")],
                  f"`{MAIN}`, {len(con)} heads (attention: {100 * np.mean(att):.0f} % of them)" if att else "")


def special_finding(r: Optional[dict]) -> Finding:
    """H7 (§9.1): the vertical heads' input contribution from <s>/</s> is
    below half their attention to them."""
    att, con = grid(r, "attention_special"), grid(r, "contribution_special")
    if att is None or con is None:
        return _missing("H7", "vertical heads aggregate general context",
                        "hta.json has no attention and contribution mass on <s> and </s>")
    pairs = [(a, c) for ra, rc in zip(att, con) for a, c in zip(ra, rc) if a is not None and c is not None]
    vertical = [(a, c) for a, c in pairs if a >= VERTICAL]
    claim = "the vertical heads' input contribution from <s> and </s> is below half their attention to them"
    if len(vertical) < 2:
        return decide("H7", TEXT["H7"], [not_comparable(
            claim, f"{len(vertical)} of {len(pairs)} heads put {100 * VERTICAL:.0f} % of their attention on <s> "
                   f"and </s> (at most {max((a for a, _ in pairs), default=0):.2f}): this model has too few "
                   f"vertical heads")])
    est = bootstrap(vertical, lambda us: float(np.mean([a / 2 - c for a, c in us])), HEADS,
                    "attention / 2 − contribution")
    return decide("H7", TEXT["H7"], [order(est, claim)],
                  f"`{MAIN}`, {len(vertical)} of {len(pairs)} heads put at least {100 * VERTICAL:.0f} % of their "
                  f"attention on <s> and </s> (mean {np.mean([a for a, _ in vertical]):.2f}; their input "
                  f"contribution from them {np.mean([c for _, c in vertical]):.2f})")


def block_finding(r: Optional[dict]) -> Finding:
    """H8 (§9.1): the own sentence's input contribution above its share of the
    tokens in the first third of the layers, and within BLOCK_MARGIN of it after."""
    same, base = grid(r, "contribution_same_sentence"), _num((r or {}).get("same_sentence_share"))
    if same is None or base is None or len(same) < 2:
        return _missing("H8", "block patterns up to layer 4", "hta.json has no same-sentence contribution of pairs")
    first, _ = thirds(len(same))
    later = list(range(len(first), len(same)))
    e0 = mean_of([x - base for x in heads_of(same, first)], "own sentence − share")
    e1 = mean_of([x - base for x in heads_of(same, later)], "own sentence − share")
    return decide("H8", TEXT["H8"], [
        order(e0, f"over {layer_names(first)}, the own sentence contributes more than its share of the tokens"),
        at_most(e1, BLOCK_MARGIN, f"over {layer_names(later)}, no block pattern (a stated margin)")],
        f"`{MAIN}`, the own sentence's share of the tokens {base:.2f}")


def languages_finding(results: Dict[str, Optional[dict]]) -> Finding:
    """H9: no German or Arabic BERT here."""
    return decide("H9", TEXT["H9"], [not_comparable("German and Arabic BERT follow the English trend",
                                                    "no German or Arabic model here")])


def findings(results: Dict[str, Optional[dict]]) -> List[Finding]:
    """Every finding: H2 on :data:`H2_COMPARABLE`, the others on :data:`MAIN`."""
    r = results.get(MAIN)
    return [fig1_finding(r), centre_finding(results), uniform_finding(r), depth_finding(r), mismatch_finding(r),
            diagonal_finding(r), special_finding(r), block_finding(r), languages_finding(results)]
