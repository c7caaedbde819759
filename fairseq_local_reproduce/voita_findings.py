"""The findings of ``reproduce voita`` (:data:`~.numbers_voita.VOITA_FINDINGS`),
each decided by :func:`.report.decide` on 95 % intervals (:mod:`.verdicts`).

There is one trained model and one pruning sweep (one seed), so every
interval is a percentile bootstrap over the units the run has many of:

* V1, V2: over the encoder heads (their confidence, LRP importance and role);
* V3: over the encoder heads kept by the runs that keep at most half of them,
  against the base model's heads (specialised or not);
* V5: over the heads of the runs that pruned some of the two attention types
  compared (each (run, head) pair one unit, kept or closed);
* V4: over the test sentences, paired (the base model and a pruned one
  translate the same sentences; corpus BLEU of each resample, from
  sacreBLEU's per-sentence statistics).

What each finding claims (a blog post's summary of the paper, and the
paper's abstract):

* V1, V2: "the most important heads according to relevance propagation are
  those with the sharpest distributions and exactly those from the three
  categories" (positional, syntactic, rare words; Voita §4–5, Fig. 1);
* V3: "the heads from the already mentioned categories tend to survive and the
  'mysterious' heads are the first ones that get removed" (§6, Fig. 8);
* V4: "pruning 38 out of 48 encoder heads results in a drop of only 0.15
  BLEU" (abstract): a one-sided bound of 0.15 BLEU on the cost at 38 of 48
  removed (a pruned model that scores higher loses nothing), and the share
  removed;
* V5: which attention type is "most sensitive to the number of attention
  heads" (the paper's third question, answered in §8): the encoder–decoder
  attention keeps the largest share of its heads when all three types are
  pruned together.
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .bleu_units import corpus_bleu, read_stats
from .numbers_voita import VOITA_FINDINGS, VOITA_PRUNING
from .report import Finding, decide
from .verdicts import (CONTRADICTED, INCONCLUSIVE, REPRODUCED, Clause, Estimate, at_least, at_most, bootstrap,
                       bootstrap_difference, not_comparable, order, proportion_difference)

TEXT = {f["id"]: f["text"] for f in VOITA_FINDINGS}
SPECIAL = ("positional", "syntactic", "rare")  # Voita §5's specialised roles; "other" is the rest
ROLE_RULES = {"positional": "one relative offset holds at least 90 % of its rows' maxima, Voita §5.1",
              "syntactic": "a relation at least 10 points above its positional baseline, §5.2.1",
              "rare": "pointing at the sentence's rarest token in at least half of the sentences, §5.3"}
PAPER_REMOVED = (VOITA_PRUNING["enc_heads"] - VOITA_PRUNING["enc_kept"]) / VOITA_PRUNING["enc_heads"]  # 38/48
BLEU_BOUND = VOITA_PRUNING["bleu_drop"]  # the abstract's "drop of only 0.15 BLEU"
TYPES = {"enc-self": "encoder self-attention", "dec-self": "decoder self-attention",
         "dec-cross": "encoder-decoder attention"}
BASIS = ("One model and one pruning sweep: there is no spread over seeds, so each finding is decided on a 95 % "
         "percentile bootstrap (2,000 resamples) over the encoder heads (V1, V2), over the heads of the runs "
         "that pruned them (V3, V5) or over the test sentences, paired (V4), as each line states.")


def head_points(roles: Optional[dict]) -> List[dict]:
    """One point per encoder head with a confidence, an LRP importance and a
    role: ``{"layer", "head", "confidence", "importance", "role"}`` (layer
    and head from 1), from ``analyze roles``' roles.json with ``analyze
    importance``'s key."""
    if not roles or not isinstance(roles.get("importance"), dict):
        return []
    conf, lrp, role = roles.get("confidence") or [], roles["importance"].get("lrp") or [], roles.get("roles") or []
    out = []
    for l, (cs, vs, rs) in enumerate(zip(conf, lrp, role), 1):
        for h, (c, v, r) in enumerate(zip(cs, vs, rs), 1):
            if c is not None and v is not None:
                out.append({"layer": l, "head": h, "confidence": float(c), "importance": float(v), "role": r})
    return out


def spearman(points: Sequence[dict]) -> float:
    """Spearman's ρ between the heads' confidence and LRP importance (ties
    at their mean rank); NaN when either is constant."""
    from scipy.stats import rankdata

    x = rankdata([p["confidence"] for p in points])
    y = rankdata([p["importance"] for p in points])
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def head_findings(points: Sequence[dict], scale: Optional[str] = None) -> List[Finding]:
    """V1: Spearman's ρ(confidence, LRP importance) > 0, a bootstrap over the
    encoder heads.  V2: one clause per specialised role (§5): the role's
    heads more important than the "other" heads (difference of mean LRP
    importance > 0, a bootstrap over heads); not comparable for a role that
    the model at ``scale`` has fewer than two heads of."""
    if len(points) < 3:
        return [decide("V1", TEXT["V1"], [not_comparable("ρ > 0", "no importance and confidence of the heads")]),
                decide("V2", TEXT["V2"], [not_comparable("specialised heads more important",
                                                         "no importance and roles of the heads")])]
    rho = bootstrap(points, spearman, "encoder heads", name="Spearman's ρ")
    v1 = decide("V1", TEXT["V1"], [order(rho, "LRP importance rises with confidence (ρ > 0)",
                                         reason="" if rho is not None else "confidence or importance constant")])
    other = [p["importance"] for p in points if p["role"] not in SPECIAL]
    clauses = []
    for role in SPECIAL:
        mine = [p["importance"] for p in points if p["role"] == role]
        claim = f"{role} heads more important than the other heads (Δ mean LRP importance > 0)"
        if len(mine) < 2 or len(other) < 2:
            few = role if len(mine) < 2 else "other"
            n = len(mine) if len(mine) < 2 else len(other)
            where = f" at `{scale}` scale" if scale else ""
            rule = ROLE_RULES.get(few, "no specialised role")
            clauses.append(not_comparable(claim, f"the model{where} has {n} {few} head{'' if n == 1 else 's'} "
                                          f"[{rule}]: no interval over heads"))
            continue
        clauses.append(order(bootstrap_difference(mine, other, "heads", name=f"Δ importance {role}−other"), claim))
    counts = ", ".join(f"{r} {sum(p['role'] == r for p in points)}" for r in (*SPECIAL, "other"))
    return [v1, decide("V2", TEXT["V2"], clauses, f"{len(points)} encoder heads: {counts}")]


def _indicators(kept: int, total: int) -> List[float]:
    """``total`` units, ``kept`` of them 1 (kept) and the rest 0 (closed)."""
    return [1.0] * kept + [0.0] * max(total - kept, 0)


def _special(roles: Dict[str, int]) -> int:
    return sum(roles.get(r, 0) for r in SPECIAL)


def survival_clause(base: dict, pruned: Sequence[dict]) -> Tuple[Clause, str]:
    """V3 (Fig. 8): among the encoder heads that remain in the least-pruned
    run keeping between one and half of them, the share of specialised heads is larger
    than among every head of the base model (Newcombe's score interval of the
    two shares, which stays honest where a group has no specialised head;
    the kept heads are a subset of the base's, so the unpaired interval is
    the wider one).  The roles of a
    pruned run are those of its remaining heads (``prune-curve``)."""
    claim = "specialised heads a larger share of those kept than of all heads (Δ share > 0)"
    n_enc = base["heads"].get("enc-self", 0)
    roles0 = base.get("roles") or {}
    runs = [r for r in pruned if r.get("roles") and 0 < r["kept"].get("enc-self", 0) <= n_enc / 2]
    if not n_enc or not roles0:
        return not_comparable(claim, "no roles of the base model's heads"), ""
    if not runs:
        return not_comparable(claim, "no run keeps between one and half of the encoder heads"), ""
    run = max(runs, key=lambda r: r["kept"].get("enc-self", 0))  # one run: the same heads never count twice
    k1, n1 = _special(run["roles"]), sum(run["roles"].values())
    k2, n2 = _special(roles0), sum(roles0.values())
    lams = f"{run['lambda']:g}"
    est = proportion_difference(k1, n1, k2, n2, f"heads (kept at λ = {lams}; every head)", name="Δ specialised share")
    evidence = f"specialised heads: {k2} of {n2} with every head; {k1} of the {n1} kept at λ = {lams}"
    return order(est, claim, "" if est else "fewer than two heads kept"), evidence


bleu_stats = read_stats  # (N, 10) per-sentence BLEU statistics of a hyp and a ref file, or None


def bleu_cost(base: np.ndarray, run: np.ndarray) -> Optional[Estimate]:
    """BLEU(base) − BLEU(run) with a paired percentile bootstrap over the
    test sentences: both corpus BLEUs recomputed on every resample."""
    if base.shape != run.shape:
        return None
    return bootstrap(range(len(base)), lambda idx: corpus_bleu(base[list(idx)]) - corpus_bleu(run[list(idx)]),
                     "test sentences, paired", name="BLEU cost")


GATES_ONLY = ("the gates alone were trained; Voita et al. fine-tune every weight with them (§6), so that the "
              "model adapts to the heads it loses")


def cost_clause(base: dict, pruned: Sequence[dict], stats: Callable[[dict], Optional[np.ndarray]],
                gates_only: bool = False) -> List[Clause]:
    """V4: the share of encoder heads removed and the BLEU cost at the paper's
    operating point (38 of 48 removed, at most 0.15 BLEU).

    The run is the least pruned that removes at least 38/48 of the encoder
    heads: its cost below the bound reproduces the claim.  The cost of
    removing heads grows with the heads removed, so the claim is contradicted
    only when the most pruned run that removes at most 38/48 already costs
    more than the bound; otherwise it is inconclusive.  ``stats(row)``: the
    run's per-sentence BLEU statistics (:func:`bleu_stats`), or None.  With
    ``gates_only`` (the reduced scales' pruning, not the paper's) the cost is
    not comparable: the rest of the model could not adapt."""
    n_enc = base["heads"].get("enc-self", 0)
    share_claim = (f"share of encoder heads removed at least the paper's "
                   f"{VOITA_PRUNING['enc_heads'] - VOITA_PRUNING['enc_kept']} of {VOITA_PRUNING['enc_heads']}")
    cost_claim = "BLEU cost at that share at most the paper's 0.15"
    removed = {id(r): 1 - r["kept"].get("enc-self", n_enc) / n_enc for r in pruned} if n_enc else {}
    beyond = [r for r in pruned if removed.get(id(r), 0) >= PAPER_REMOVED - 1e-9]
    if not beyond:
        most = max(pruned, key=lambda r: removed.get(id(r), 0), default=None)
        why = "no λ of the sweep removes that many" + (
            f" (most: {n_enc - most['kept'].get('enc-self', n_enc)} of {n_enc} at λ = {most['lambda']:g})"
            if most is not None and n_enc else "")
        return [not_comparable(share_claim, why), not_comparable(cost_claim, why)]
    run = min(beyond, key=lambda r: removed[id(r)])
    share = Estimate(removed[id(run)], removed[id(run)], removed[id(run)],
                     f"{n_enc - run['kept']['enc-self']} of {n_enc} gates closed at λ = {run['lambda']:g}",
                     "share removed")
    base_stats = stats(base)
    clauses = [at_least(share, PAPER_REMOVED - 1e-9, share_claim)]
    if gates_only:
        return clauses + [not_comparable(cost_claim, GATES_ONLY)]
    run_stats = stats(run)
    if base_stats is None or run_stats is None:
        return clauses + [not_comparable(cost_claim, "no per-sentence translations of the runs (test.hyp)")]
    est = bleu_cost(base_stats, run_stats)
    hi = at_most(est, BLEU_BOUND, f"{cost_claim}, λ = {run['lambda']:g}")
    if hi.verdict == REPRODUCED or hi.estimate is None or removed[id(run)] <= PAPER_REMOVED + 1e-9:
        return clauses + [hi]  # decided at the paper's share itself, or reproduced beyond it
    # removing fewer heads costs no more: the most pruned run within the paper's share can exclude the claim
    below = [r for r in pruned if removed[id(r)] <= PAPER_REMOVED + 1e-9]
    lower = max(below, key=lambda r: removed[id(r)], default=None)
    lower_stats = None if lower is None else stats(lower)
    lo = None if lower_stats is None else at_most(bleu_cost(base_stats, lower_stats), BLEU_BOUND, "")
    if lo is not None and lo.verdict == CONTRADICTED:
        return clauses + [Clause(CONTRADICTED, hi.claim, lo.estimate,
                                 f"λ = {lower['lambda']:g}, removing only {n_enc - lower['kept']['enc-self']} "
                                 f"of {n_enc}, already costs more")]
    if hi.verdict == INCONCLUSIVE:
        return clauses + [hi]
    return clauses + [Clause(INCONCLUSIVE, hi.claim, hi.estimate,
                             f"it removes {100 * removed[id(run)]:.0f} %, more than the paper's "
                             f"{100 * PAPER_REMOVED:.0f} %, and no run removing at most that share costs more")]


def type_clauses(base: dict, pruned: Sequence[dict]) -> List[Clause]:
    """V5 (§8): the encoder–decoder attention keeps a larger share of its
    heads than each other type (Δ share kept > 0), over the runs in which
    the two types together closed some but not all of their heads: each
    (run, head) one unit, a bootstrap over them."""
    heads = base["heads"]
    if not heads.get("dec-cross"):
        return [not_comparable("encoder-decoder attention keeps the largest share", "no encoder-decoder gates")]
    out = []
    for t in ("enc-self", "dec-self"):
        claim = f"encoder-decoder attention keeps a larger share than {TYPES[t]} (Δ share kept > 0)"
        if not heads.get(t):
            out.append(not_comparable(claim, f"no {TYPES[t]} heads"))
            continue
        runs = [r for r in pruned
                if 0 < r["kept"].get("dec-cross", 0) + r["kept"].get(t, 0) < heads["dec-cross"] + heads[t]]
        if not runs:
            out.append(not_comparable(claim, "no run closed some but not all of their heads"))
            continue
        # one run, so that no head counts twice: the one whose two types together keep nearest half their
        # heads (the most informative; chosen on the sum, blind to the difference tested)
        n2 = heads["dec-cross"] + heads[t]
        r = min(runs, key=lambda x: (abs((x["kept"].get("dec-cross", 0) + x["kept"].get(t, 0)) / n2 - 0.5), x["lambda"]))
        est = proportion_difference(r["kept"].get("dec-cross", 0), heads["dec-cross"], r["kept"].get(t, 0), heads[t],
                                    f"heads at λ = {r['lambda']:g}", name=f"Δ share cross−{t}")
        out.append(order(est, claim))
    return out


def prune_findings(rows: Sequence[dict], stats: Callable[[dict], Optional[np.ndarray]] = lambda r: None,
                   gates_only: bool = False) -> List[Finding]:
    """V3–V5 from ``prune-curve``'s rows (:mod:`fairseq_local.analysis.pruning`);
    ``stats(row)``: the run's per-sentence BLEU statistics, or None (V4's
    cost then not comparable); ``gates_only``: the runs trained the gates
    alone (V4's cost not comparable, :func:`cost_clause`)."""
    base = next((r for r in rows if r.get("lambda") is None), None)
    pruned = [r for r in rows if r.get("lambda") is not None]
    if base is None or not pruned:
        return [decide(f, TEXT[f], [not_comparable("the pruning curve", "no pruning curve yet")])
                for f in ("V3", "V4", "V5")]
    v3, evidence = survival_clause(base, pruned)
    n_enc = base["heads"].get("enc-self", 0)
    kept = ", ".join(f"λ = {r['lambda']:g}: {r['kept'].get('enc-self')}/{n_enc}"
                     + (f" ({r['bleu']:.2f})" if r.get("bleu") is not None else "") for r in pruned)
    base_bleu = "-" if base.get("bleu") is None else f"{base['bleu']:.2f}"
    closing = [r for r in pruned if sum(r["kept"].values()) < sum(r["heads"].values())]
    shares = ", ".join(f"{TYPES[t]} {sum(r['kept'].get(t, 0) for r in closing)}/{len(closing) * base['heads'][t]}"
                       for t in TYPES if base["heads"].get(t)) if closing else "no run closed a head"
    return [decide("V3", TEXT["V3"], [v3], evidence),
            decide("V4", TEXT["V4"], cost_clause(base, pruned, stats, gates_only),
                   f"encoder heads kept (BLEU): every head {base_bleu}; {kept}"),
            decide("V5", TEXT["V5"], type_clauses(base, pruned),
                   f"heads kept over the {len(closing)} runs that closed any: {shares}")]
