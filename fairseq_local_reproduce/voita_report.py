"""The report of ``reproduce voita``: Fig. 1 (each encoder head's LRP
importance against its confidence, coloured by role), the pruning curve
(Fig. 7), the remaining heads by role (Fig. 8), the heads each attention
type keeps (§8), and a verdict per finding (:mod:`.voita_findings`).

One trained model and one pruning sweep: there is no spread over seeds, so
each finding is decided on a bootstrap over heads or test sentences.
"""

from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from .pande import SCALES as PANDE_SCALES
from .plan import Plan
from .report import read_json, table
from .voita import SCALES, TITLE, heads_dir, model_dir, prune_dir
from .voita_figures import plot_curve, plot_heads, plot_roles, run_name
from .voita_findings import (BASIS, TYPES, bleu_stats, corpus_bleu, head_findings, head_points,  # noqa: F401
                             prune_findings)
from .verdicts import bootstrap

Stats = Optional[np.ndarray]


def model_title(plan: Plan) -> str:
    """The model and scale, for the figures' titles."""
    if plan.scale == "paper":
        return "Transformer-base, WMT EN-RU (paper scale)"
    return (f"config (a), d = {PANDE_SCALES[plan.scale].nmt_width}, 6 x 8 encoder heads, "
            f"synthetic NMT ({plan.scale} scale)")


def run_stats(plan: Plan) -> Callable[[dict], Stats]:
    """``row -> `` the run's per-sentence BLEU statistics, read once from
    ``prune/<run>/test.{hyp,ref}``; None when they are missing or do not
    give the row's BLEU (to 0.01)."""
    cache: Dict[str, Stats] = {}

    def stats(row: dict) -> Stats:
        name = run_name(row)
        if name not in cache:
            run = prune_dir(plan) / name
            st = bleu_stats(run / "test.hyp", run / "test.ref")
            if st is not None and (row.get("bleu") is None or abs(corpus_bleu(st) - row["bleu"]) > 0.01):
                st = None
            cache[name] = st
        return cache[name]

    return stats


def bleu_intervals(rows: Sequence[dict], stats: Callable[[dict], Stats]) -> Dict[str, Tuple[float, float]]:
    """Each run's corpus BLEU 95 % interval, a bootstrap over its test
    sentences, keyed by the run's name; runs without translations left out."""
    out = {}
    for r in rows:
        st = stats(r)
        est = None if st is None else bootstrap(range(len(st)), lambda idx, st=st: corpus_bleu(st[list(idx)]),
                                                "test sentences", name="BLEU")
        if est is not None:
            out[run_name(r)] = (est.lo, est.hi)
    return out


def type_table(rows: Sequence[dict], intervals: Optional[Dict[str, Tuple[float, float]]] = None) -> str:
    """§8: the share of each attention type's heads kept per λ, and BLEU
    with its 95 % interval over the test sentences (``intervals``)."""
    out = []
    for r in sorted(rows, key=lambda x: -1 if x.get("lambda") is None else x["lambda"]):
        cells = ["none (base)" if r.get("lambda") is None else f"{r['lambda']:g}"]
        cells += [f"{r['kept'][t]}/{r['heads'][t]} ({100 * r['kept'][t] / r['heads'][t]:.0f} %)"
                  if r["heads"].get(t) else "-" for t in TYPES]
        ci = (intervals or {}).get(run_name(r))
        cells.append("-" if r.get("bleu") is None else f"{r['bleu']:.2f}"
                     + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""))
        out.append(cells)
    return table(["λ", *TYPES.values(), "BLEU [95 % interval]"], out)


def role_table(points: Sequence[dict]) -> str:
    """Fig. 1 as numbers: heads, mean confidence and mean LRP importance per role."""
    from fairseq_local.analysis.roles import ROLES

    rows = []
    for role in ROLES:
        xs = [x for x in points if x["role"] == role]
        rows.append([role, str(len(xs)), f"{sum(x['confidence'] for x in xs) / len(xs):.2f}" if xs else "-",
                     f"{sum(x['importance'] for x in xs) / len(xs):.3f}" if xs else "-"])
    return table(["role", "heads", "mean confidence", "mean LRP importance"], rows)


def write_report(plan: Plan) -> Path:
    """``RUNS/voita/report.md`` and its figures from the finished steps;
    what is not there yet reads "-" or "not comparable"."""
    from fairseq_local import outputs
    from fairseq_local.analysis.pruning import curve_table
    from .environment import environment
    from .plan import ROOT, step_timing
    from .models import PLATEAU_RULE, stops_line
    from .report import bleu, environment_section, findings_section

    points = head_points(read_json(heads_dir(plan) / "roles.json"))
    curve = read_json(prune_dir(plan) / "prune_curve.json") or {}
    rows = [r for r in curve.get("rows", []) if isinstance(r, dict)]
    stats = run_stats(plan)
    s = SCALES.get(plan.scale)
    findings = head_findings(points, plan.scale) + prune_findings(rows, stats, bool(s and s.gates_only))
    intervals = bleu_intervals(rows, stats)
    plan.out.mkdir(parents=True, exist_ok=True)
    title = model_title(plan)
    figs = []
    if points:
        plot_heads(points, plan.out / "report_heads.png", title)
        figs.append("![Fig. 1: importance against confidence](report_heads.png)")
    if rows:  # the figures again from the JSON, so that the report and its figures agree
        plot_curve(rows, intervals, plan.out / "report_curve.png", title)
        plot_roles(rows, plan.out / "report_roles.png", title)
        figs += ["![Fig. 7: BLEU against encoder heads kept](report_curve.png)",
                 "![Fig. 8: encoder heads kept, by role](report_roles.png)"]
    base_bleu = bleu(model_dir(plan) / "test.bleu.json")
    reduced = plan.scale != "paper"
    data = (f"the hard synthetic corpus (Pande et al.'s reduced scales), config (a) at width "
            f"{PANDE_SCALES[plan.scale].nmt_width} with 6 encoder layers of 8 heads and 2 decoder layers; the gates alone "
            f"are trained; the model is the reduced scales' shared baseline (a), seed 1, {PLATEAU_RULE}"
            f"{f' ({stops})' if (stops := stops_line({'(a) s1': model_dir(plan)})) else ''}" if reduced else
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
        "BLEU's interval: a percentile bootstrap over the test sentences (2,000 resamples), one seed.", "",
        type_table(rows, intervals) if rows else "-\n",
        "\n\n".join(figs), "",
    ])
    path = plan.out / "report.md"
    outputs.write_text(path, text)
    return path
