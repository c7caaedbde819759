"""The report of ``reproduce voita``: Fig. 1 (each encoder head's LRP
importance against its confidence, coloured by role), the pruning curve
(Fig. 7), the remaining heads by role (Fig. 8), the heads each attention
type keeps (§8), and a verdict per finding
(:data:`~.numbers_voita.VOITA_FINDINGS`).

One trained model and one pruning sweep: there is no spread over seeds, so
each finding is decided by a test over heads (Spearman's ρ, Mann–Whitney U,
the hypergeometric tail) at p < 0.05, or by a stated margin.
"""

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .numbers_voita import VOITA_FINDINGS, VOITA_PRUNING
from .plan import Plan
from .report import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, Finding, read_json, table
from .voita import TITLE, heads_dir, model_dir, prune_dir

TEXT = {f["id"]: f["text"] for f in VOITA_FINDINGS}
ALPHA = 0.05  # significance of the tests over heads
SPECIAL = ("positional", "syntactic", "rare")  # Voita §5's specialised roles; "other" is the rest
BLEU_MARGIN = 1.0  # V4: "little loss" at most this many BLEU points below every head
BASIS = ("With one model and one sweep there is no spread over seeds: the findings below are decided by tests "
         f"over the heads at p < {ALPHA} (Spearman's rank correlation, Mann-Whitney U, the hypergeometric tail) "
         "or by the margin each line states.")
TYPES = {"enc-self": "encoder self-attention", "dec-self": "decoder self-attention",
         "dec-cross": "encoder-decoder attention"}


def _finding(fid: str, ok: Optional[bool], evidence: str) -> Finding:
    verdict = NOT_COMPARABLE if ok is None else REPRODUCED if ok else NOT_REPRODUCED
    return Finding(fid, TEXT[fid], verdict, evidence)


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


def head_findings(points: Sequence[dict]) -> List[Finding]:
    """V1 (importance rises with confidence: Spearman's ρ > 0, p < ALPHA) and
    V2 (specialised heads more important than the others: one-sided
    Mann–Whitney U, p < ALPHA)."""
    from scipy.stats import mannwhitneyu, spearmanr

    if len(points) < 3:
        return [_finding("V1", None, "no importance and confidence of the heads yet"),
                _finding("V2", None, "no importance and roles of the heads yet")]
    r, p = spearmanr([x["confidence"] for x in points], [x["importance"] for x in points])
    v1 = _finding("V1", bool(r > 0 and p < ALPHA),
                  f"Spearman's ρ between confidence and LRP importance over {len(points)} encoder heads "
                  f"{r:+.2f} (p = {p:.2g})")
    special = [x["importance"] for x in points if x["role"] in SPECIAL]
    other = [x["importance"] for x in points if x["role"] not in SPECIAL]
    if not special or not other:
        v2 = _finding("V2", None, f"{len(special)} specialised and {len(other)} other heads: no comparison")
    else:
        u = mannwhitneyu(special, other, alternative="greater")
        mean_s, mean_o = sum(special) / len(special), sum(other) / len(other)
        v2 = _finding("V2", bool(u.pvalue < ALPHA),
                      f"mean LRP importance {mean_s:.3f} for the {len(special)} specialised heads against "
                      f"{mean_o:.3f} for the {len(other)} others (one-sided Mann-Whitney p = {u.pvalue:.2g})")
    return [v1, v2]


def _special(roles: Dict[str, int]) -> int:
    return sum(roles.get(r, 0) for r in SPECIAL)


def prune_findings(rows: Sequence[dict]) -> List[Finding]:
    """V3–V5 from ``prune-curve``'s rows (:mod:`fairseq_local.analysis.pruning`)."""
    from scipy.stats import hypergeom

    base = next((r for r in rows if r.get("lambda") is None), None)
    pruned = [r for r in rows if r.get("lambda") is not None]
    if base is None or not pruned:
        return [_finding(f, None, "no pruning curve yet") for f in ("V3", "V4", "V5")]
    n_enc = base["heads"].get("enc-self", 0)
    # V3: among the runs keeping at most half of the encoder heads, the one keeping fewest (at least one)
    half = [r for r in pruned if 0 < r["kept"].get("enc-self", 0) <= n_enc / 2 and r.get("roles")]
    total_s = _special(base.get("roles") or {})
    if not half or not n_enc:
        v3 = _finding("V3", None, "no run keeps between one and half of the encoder heads")
    else:
        r = min(half, key=lambda x: x["kept"]["enc-self"])
        k, s = sum(r["roles"].values()), _special(r["roles"])
        p = float(hypergeom.sf(s - 1, n_enc, total_s, k))  # P(at least s specialised among k drawn at random)
        v3 = _finding("V3", bool(s / k > total_s / n_enc and p < ALPHA),
                      f"specialised heads: {total_s} of {n_enc} ({100 * total_s / n_enc:.0f} %) with every head; "
                      f"{s} of the {k} kept at λ = {r['lambda']:g} ({100 * s / k:.0f} %; "
                      f"as many or more by chance: p = {p:.2g})")
    # V4: the run keeping fewest encoder heads whose BLEU is within BLEU_MARGIN of the base
    scored = [r for r in pruned if r.get("bleu") is not None]
    if base.get("bleu") is None or not scored:
        v4 = _finding("V4", None, "no BLEU of the pruned models yet")
    else:
        close = [r for r in scored if r["bleu"] >= base["bleu"] - BLEU_MARGIN]
        paper_share = VOITA_PRUNING["enc_kept"] / VOITA_PRUNING["enc_heads"]
        best = min(close, key=lambda x: x["kept"].get("enc-self", n_enc), default=None)
        kept = best["kept"].get("enc-self", n_enc) if best else n_enc
        v4 = _finding("V4", kept <= max(1, round(paper_share * n_enc)) if best else False,
                      (f"fewest encoder heads within {BLEU_MARGIN:g} BLEU of every head ({base['bleu']:.2f}): "
                       f"{kept} of {n_enc} at λ = {best['lambda']:g} (BLEU {best['bleu']:.2f})" if best else
                       f"every pruned run loses more than {BLEU_MARGIN:g} BLEU against {base['bleu']:.2f}")
                      + f"; the paper keeps {VOITA_PRUNING['enc_kept']} of {VOITA_PRUNING['enc_heads']} "
                        f"({100 * paper_share:.0f} %) for {VOITA_PRUNING['bleu_drop']} BLEU")
    # V5: share of each type's heads kept, summed over the runs that closed any head
    closing = [r for r in pruned if sum(r["kept"].values()) < sum(r["heads"].values())]
    types = [t for t in TYPES if t in base["heads"] and base["heads"][t]]
    if not closing or "dec-cross" not in types:
        v5 = _finding("V5", None, "no run closed a head" if not closing else "no encoder-decoder gates")
    else:
        share = {t: sum(r["kept"][t] for r in closing) / (len(closing) * base["heads"][t]) for t in types}
        order = sorted(types, key=lambda t: -share[t])
        v5 = _finding("V5", order[0] == "dec-cross" and share["dec-cross"] > min(share.values()),
                      "share of heads kept over the " + f"{len(closing)} runs that closed any: "
                      + ", ".join(f"{TYPES[t]} {100 * share[t]:.0f} %" for t in order))
    return [v3, v4, v5]


def type_table(rows: Sequence[dict]) -> str:
    """§8: the share of each attention type's heads kept per λ."""
    out = []
    for r in sorted(rows, key=lambda x: -1 if x.get("lambda") is None else x["lambda"]):
        cells = ["none (base)" if r.get("lambda") is None else f"{r['lambda']:g}"]
        cells += [f"{r['kept'][t]}/{r['heads'][t]} ({100 * r['kept'][t] / r['heads'][t]:.0f} %)"
                  if r["heads"].get(t) else "-" for t in TYPES]
        out.append(cells)
    return table(["λ", *TYPES.values()], out)


def role_table(points: Sequence[dict]) -> str:
    """Fig. 1 as numbers: heads, mean confidence and mean LRP importance per role."""
    from ..analysis.roles import ROLES

    rows = []
    for role in ROLES:
        xs = [x for x in points if x["role"] == role]
        rows.append([role, str(len(xs)), f"{sum(x['confidence'] for x in xs) / len(xs):.2f}" if xs else "-",
                     f"{sum(x['importance'] for x in xs) / len(xs):.3f}" if xs else "-"])
    return table(["role", "heads", "mean confidence", "mean LRP importance"], rows)


def plot_heads(points: Sequence[dict], path: Path) -> Path:
    """Fig. 1: LRP importance against confidence, one point per encoder
    head, coloured by role."""
    from ..analysis.figures import save  # first: it quiets matplotlib's import-time debug lines
    from matplotlib.figure import Figure
    from ..analysis.roles import ROLE_COLOURS, ROLES

    fig = Figure(figsize=(5.5, 4.0))
    ax = fig.add_subplot()
    for role in ROLES:
        xs = [x for x in points if x["role"] == role]
        if xs:
            ax.scatter([x["confidence"] for x in xs], [x["importance"] for x in xs], s=28,
                       color=ROLE_COLOURS[role], edgecolor="0.3", linewidth=0.5, label=f"{role} ({len(xs)})")
    ax.set_xlabel("confidence (mean maximum attention weight)")
    ax.set_ylabel("LRP importance")
    ax.set_title("Encoder heads: importance against confidence (Voita et al. 2019, Fig. 1)", fontsize=9)
    ax.legend(fontsize=8)
    save(fig, str(path))
    return path


def write_report(plan: Plan) -> Path:
    """``RUNS/voita/report.md`` and ``report_heads.png`` from the finished
    steps; what is not there yet reads "-" or "not comparable"."""
    from .. import outputs
    from ..analysis.pruning import curve_table, plot_curve, plot_roles
    from .environment import environment
    from .plan import ROOT, step_timing
    from .report import bleu, environment_section, findings_section

    points = head_points(read_json(heads_dir(plan) / "roles.json"))
    curve = read_json(prune_dir(plan) / "prune_curve.json") or {}
    rows = [r for r in curve.get("rows", []) if isinstance(r, dict)]
    findings = head_findings(points) + prune_findings(rows)
    plan.out.mkdir(parents=True, exist_ok=True)
    figs = []
    if points:
        png = plot_heads(points, plan.out / "report_heads.png")
        figs.append(f"![Fig. 1: importance against confidence]({png.name})")
    if rows:  # the figures again from the JSON, so that the report and its figures agree
        plot_curve(rows, str(plan.out / "report_curve.png"))
        plot_roles(rows, str(plan.out / "report_roles.png"))
        figs += ["![Fig. 7: BLEU against heads kept](report_curve.png)",
                 "![Fig. 8: encoder heads kept, by role](report_roles.png)"]
    base_bleu = bleu(model_dir(plan) / "test.bleu.json")
    reduced = plan.scale != "paper"
    data = ("the hard synthetic corpus (Pande et al.'s reduced scales), config (a) at width 64 with 6 encoder "
            "layers of 8 heads and 2 decoder layers; the gates alone are trained" if reduced else
            "WMT EN-RU and Transformer-base, every weight fine-tuned with the gates, as the paper")
    text = "\n".join([
        f"{TITLE} at `{plan.scale}` scale", "",
        "Voita et al., \"Analyzing Multi-Head Self-Attention: Specialized Heads Do the Heavy Lifting, the Rest "
        f"Can Be Pruned\" (ACL 2019). Data and model: {data}. Made by `fairseq-local reproduce voita "
        f"--scale {plan.scale}`.", "",
        environment_section(environment(ROOT), plan.seeds, step_timing(plan.runs, [s.id for s in plan.steps]),
                            BASIS),
        findings_section(findings),
        "## Fig. 1: importance, confidence and role of each encoder head", "",
        "Confidence: a head's mean maximum attention weight; importance: its LRP relevance (`analyze "
        "importance --method lrp`); roles by Voita et al.'s rules (`analyze roles`, docs/analysis.md). "
        f"Test-set BLEU of the model: {'-' if base_bleu is None else f'{base_bleu:.2f}'}.", "",
        role_table(points),
        "## Figs. 7-8: the pruning curve", "",
        "Each λ fine-tunes the model with a gate on every head of the three attention types "
        "(`prune-curve`); a closed head is removed when translating. Roles: of the encoder heads that remain.",
        "", curve_table(rows) if rows else "-\n",
        "## §8: heads kept per attention type", "",
        type_table(rows) if rows else "-\n",
        "\n\n".join(figs), "",
    ])
    path = plan.out / "report.md"
    outputs.write_text(path, text)
    return path
