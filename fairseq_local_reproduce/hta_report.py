"""The report of ``reproduce hta``: per analysis the correlation of attention
with the previous-layer and the input contribution per layer (Pascual et
al. Figs. 1, 6), the centres of mass (Figs. 4-5), the figures of ``analyze
hta`` (Figs. 1-7), a figure per analysis drawn here (per layer, with 95 %
intervals over its heads; titled with the model and the scale, layers from
1), and a verdict per finding (:mod:`.hta_findings`).

The findings are decided on the paper's setting, the pretrained RoBERTa on
MNLI pairs (``bert-pairs``; H2 on every analysis of the pretrained model);
the other analyses are shown beside it.  One model and one pass over the
data: every interval is a bootstrap over heads.
"""

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import pande
from .hta import (MAX_LEN, MODELS, PAIR_MODELS, SCALES, SEED, TITLE, analysis_dir, centres_png, examples_dir,
                  model_name)
from .hta_findings import MAIN, findings, grid, heads_of, thirds  # noqa: F401  (thirds: the layer groups)
from .numbers_hta import HTA_FIG1, HTA_SETUP
from .plan import Plan
from .report import read_json, table
from .verdicts import BOOTSTRAP, LEVEL

# the analysed models, as a figure's title names them
SHORT = {"bert-pairs": "pretrained RoBERTa, MNLI pairs", "bert-mnli-pairs": "RoBERTa fine-tuned on MNLI, MNLI pairs",
         "bert-sentences": "pretrained RoBERTa, single sentences", "nmt-sentences": "NMT encoder (a), source sentences"}


def _median(rows) -> Optional[float]:
    xs = heads_of(rows)
    return float(np.median(xs)) if xs else None


def _centres(result: Optional[dict], name: str) -> Optional[List[Optional[float]]]:
    """``attention_centre`` or ``contribution_centre``: the mean over heads per layer."""
    v = (result or {}).get(f"{name}_centre")
    if not isinstance(v, list) or not v:
        return None
    return [float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None for x in v]


def _f(v: Optional[float], digits: int = 2, sign: bool = False) -> str:
    return "-" if v is None else f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _share(rows, above: float) -> Optional[float]:
    xs = heads_of(rows)
    return sum(x > above for x in xs) / len(xs) if xs else None


def head_table(results: Dict[str, Optional[dict]]) -> str:
    """Fig. 1 as numbers: per analysis, the sentences kept and the share of
    heads above the paper's thresholds, beside the paper's."""
    heads = HTA_SETUP["heads"]
    rows = [["paper (BERT-base, MNLI-m)", str(HTA_SETUP["examples"]), "-", "12 x 12",
             f"{100 * HTA_FIG1['pearson_above_0.7_heads'] / heads:.0f} %",
             f"{100 * HTA_FIG1['pearson_above_0.85_share']:.0f} %",
             f"{100 * (heads - HTA_FIG1['spearman_below_0.9_heads']) / heads:.0f} %",
             f"{100 * HTA_FIG1['spearman_above_0.95_share']:.0f} %"]]
    for what, r in results.items():
        p, s = grid(r, "pearson_previous"), grid(r, "spearman_previous")
        cells = [_pct(_share(p, 0.7)), _pct(_share(p, 0.85)), _pct(_share(s, 0.9)), _pct(_share(s, 0.95))]
        rows.append([what, str((r or {}).get("sentences", "-")), str((r or {}).get("skipped", "-")),
                     f"{r['layers']} x {r['heads']}" if r and "layers" in r and "heads" in r else "-", *cells])
    return table(["analysis", "kept", "skipped", "layers x heads", "r > 0.7", "r > 0.85", "ρ > 0.9", "ρ > 0.95"],
                 rows)


def _pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{100 * v:.0f} %"


def layer_table(r: Optional[dict]) -> str:
    """Per layer (from 1): the median over heads of r and ρ with the
    previous-layer and the input contribution (Figs. 1, 6), and the centres
    of mass of attention and input contribution (Figs. 4-5)."""
    grids = [grid(r, k) for k in ("pearson_previous", "spearman_previous", "pearson_input", "spearman_input")]
    att, con = _centres(r, "attention"), _centres(r, "contribution")
    n = max([len(g) for g in grids if g] + [len(att or []), 0])
    rows = []
    for k in range(n):
        cells = [_f(_median([g[k]]) if g and k < len(g) else None) for g in grids]
        cells += [_f(c[k] if c and k < len(c) else None, sign=True) for c in (att, con)]
        rows.append([str(k + 1), *cells])
    return table(["layer", "r previous", "ρ previous", "r input", "ρ input", "attention centre",
                  "contribution centre"], rows or [["-"] * 7])


FIGURES = (("hta_previous.png", "Fig. 1: attention against previous-layer contribution"),
           ("hta_attention.png", "Fig. 2: attention by relative position"),
           ("hta_contribution.png", "Fig. 3: input contribution by relative position"),
           ("hta_centres.png", "Figs. 4-5: centres of mass per layer"),
           ("hta_input.png", "Fig. 6: attention against input contribution"))


def figure_path(plan: Plan, what: str) -> Path:
    """The per-layer figure of one analysis, drawn by :func:`plot_layers`."""
    return plan.out / "figures" / f"{what}.png"


def _layer_estimates(g, stat) -> Tuple[List[float], List[float], List[float]]:
    """Per layer: ``stat`` (``np.mean`` or ``np.median``) over its heads and
    the 95 % percentile bootstrap interval over them, as
    :func:`.verdicts.bootstrap` makes it (vectorised: one array of resamples
    a layer); NaN without heads, no width with one."""
    values, lo, hi = [], [], []
    for k in range(len(g or [])):
        xs = np.asarray(heads_of(g, [k]), float)
        v = float(stat(xs)) if len(xs) else float("nan")
        a, b = v, v
        if len(xs) > 1:
            draws = stat(xs[np.random.default_rng(0).integers(0, len(xs), (BOOTSTRAP, len(xs)))], axis=1)
            a, b = np.quantile(draws, [0.5 - LEVEL / 2, 0.5 + LEVEL / 2])
        values.append(v), lo.append(float(a)), hi.append(float(b))
    return values, lo, hi


def plot_layers(plan: Plan, what: str, r: Optional[dict]) -> Optional[Path]:
    """Per layer (numbered from 1), with 95 % bootstrap intervals over the
    layer's heads: the median r of attention with the previous-layer and with
    the input contribution (Figs. 1 and 6), and the mean centre of mass of
    attention and input contribution (Figs. 4-5).  The title names the model,
    its size and the scale.  None (nothing drawn) without correlations."""
    from fairseq_local.analysis.figures import save  # quiets matplotlib's loggers before its first import
    from matplotlib.figure import Figure

    series = [("pearson_previous", "r, previous layer", "-", "C0"), ("pearson_input", "r, input", "--", "C1"),
              ("attention_centre_per_head", "attention", "-", "C0"),
              ("contribution_centre_per_head", "input contribution", "--", "C1")]
    grids = {key: grid(r, key) for key, *_ in series}
    if grids["pearson_previous"] is None:
        return None
    fig = Figure(figsize=(8.5, 3.4), layout="constrained")
    axes = fig.subplots(1, 2)
    for k, (key, label, style, colour) in enumerate(series):
        g = grids[key]
        if g is None:
            continue
        ax = axes[k // 2]
        values, lo, hi = _layer_estimates(g, np.median if k < 2 else np.mean)
        x = np.arange(1, len(values) + 1) + (0.08 if k % 2 else -0.08)
        ax.errorbar(x, values, yerr=[np.subtract(values, lo), np.subtract(hi, values)], linestyle=style,
                    marker="o", color=colour, label=label, capsize=3)
    layers = len(grids["pearson_previous"])
    for ax, ylabel in zip(axes, ("Pearson's r (median over heads)", "centre of mass (offset, mean over heads)")):
        ax.set_xticks(np.arange(1, layers + 1))
        ax.set_xlabel("layer")
        ax.set_ylabel(ylabel)
        ax.legend(frameon=False, fontsize=7)
    axes[1].axhline(0, color="black", linewidth=0.5)
    heads = len(grids["pearson_previous"][0])
    fig.suptitle(f"Pascual et al. (HTA): {SHORT.get(what, what)}, {layers} layers x {heads} heads, "
                 f"{plan.scale} scale (95 % intervals over heads)", fontsize=9)
    return save(fig, figure_path(plan, what))


def _links(plan: Plan, folder: Path, names: Sequence[Tuple[str, str]]) -> List[str]:
    """Markdown images of the files that exist, relative to RUNS/hta."""
    return [f"![{label}]({(folder / name).relative_to(plan.out).as_posix()})"
            for name, label in names if (folder / name).is_file()]


def _size(results: Dict[str, Optional[dict]], what: str, name: str) -> str:
    """``"RoBERTa 4 layers x 4 heads"`` from an analysis's hta.json (``name`` alone without it)."""
    r = results.get(what) or {}
    return f"{name} {r['layers']} layers x {r['heads']} heads" if "layers" in r and "heads" in r else name


def given_model(plan: Plan) -> str:
    """Which BERT-base the paper scale analyses."""
    if plan.bert:
        return (f"the Hugging Face model given with `--bert {plan.bert}`, converted exactly with "
                f"`fairseq-local convert-hf`, and its own MNLI fine-tuning")
    return "Pande et al.'s pretraining"


def write_report(plan: Plan) -> Path:
    """``RUNS/hta/report.md`` from the finished steps; what is not there
    yet reads "-" or "not comparable"."""
    from fairseq_local import outputs
    from .environment import environment
    from .plan import ROOT, step_timing
    from .models import PLATEAU_RULE, stops_line
    from .report import environment_section, findings_section

    results = {what: read_json(analysis_dir(plan, what) / "hta.json") for what in MODELS}
    reduced = plan.scale != "paper"
    s = SCALES[plan.scale]
    data = (f"Pande et al.'s reduced models ({_size(results, 'bert-pairs', 'RoBERTa')}, "
            f"{_size(results, 'nmt-sentences', 'NMT')}) on the stand-in data: the hard stand-in MNLI's "
            f"dev-matched pairs (the first {s.pairs}), the stand-in corpus's gold-tree sentences, the hard "
            f"synthetic corpus's test sentences. Pairs and sentences of at most {MAX_LEN} tokens are kept as in "
            f"the paper, but the heads are narrower than {MAX_LEN}, so attention is not identifiable there (§5). "
            f"The NMT model is the reduced scales' shared baseline (a), seed {SEED}, {PLATEAU_RULE}"
            f"{f' ({stops})' if (stops := stops_line({'(a) s1': pande.nmt_run(plan, 'a', SEED)})) else ''}"
            if reduced else
            f"BERT-base ({given_model(plan)}) on MNLI dev-matched (the first {s.pairs} pairs, those of at "
            f"most {MAX_LEN} tokens kept) and Transformer-base (WMT'14 en-de) on newstest2014")
    parts = [f"{TITLE} at `{plan.scale}` scale", "",
             "Pascual, Brunner and Wattenhofer, \"Telling BERT's Full Story: from Local Attention to Global "
             f"Aggregation\" (EACL 2021). Data and models: {data}. Made by `fairseq-local reproduce hta --scale "
             f"{plan.scale}`.", "",
             environment_section(environment(ROOT), plan.seeds, step_timing(plan.runs, [x.id for x in plan.steps]),
                                 f"Findings are decided on `{MAIN}` ({model_name(plan, MAIN)}; H2 on every analysis of "
                                 "the pretrained model): one model and one pass over the data, so every interval "
                                 "is a 95 % percentile bootstrap over the heads (2,000 resamples), and the paper's "
                                 "counts of its 144 heads are shares of the heads; the first and last third of the "
                                 "layers stand for the paper's first and last four of 12. Layers are numbered "
                                 "from 1."),
             findings_section(findings(results)),
             "## Fig. 1: heads above the paper's thresholds", "",
             "Per head, the mean over attention rows of Pearson's r and Spearman's ρ of attention with the "
             "previous-layer contribution (`analyze hta`, Eq. 1 per head output).", "", head_table(results)]
    for what, r in results.items():
        parts += [f"## `{what}`: {model_name(plan, what)}", "", "Correlations: the median over the heads of a layer; "
                  "centres of mass: the mean over its heads (negative: past tokens).", "", layer_table(r),
                  *_links(plan, figure_path(plan, what).parent,
                          [(figure_path(plan, what).name, "per layer, 95 % intervals over heads")]
                          if plot_layers(plan, what, r) else []),
                  *_links(plan, analysis_dir(plan, what), FIGURES),
                  ""]
    parts += ["## Figs. 4-5: centres of mass of every analysis", "",
              "Attention solid, input contribution dashed (`analyze table --centres`); negative: past tokens.", ""]
    parts += _links(plan, centres_png(plan).parent, [(centres_png(plan).name, "Figs. 4-5: centres of mass")]) or ["-"]
    parts += ["", "## Fig. 7 and Appendix C: attention above input contribution", ""]
    for what in PAIR_MODELS:
        names = [(f"hta_example_{k}.png", f"Fig. 7: {what}, pair {k}") for k in s.examples]
        parts += [f"`{what}`, pairs {', '.join(map(str, s.examples))} (head 0 of every layer):", "",
                  *(_links(plan, examples_dir(plan, what), names) or ["-"]), ""]
    plan.out.mkdir(parents=True, exist_ok=True)
    path = plan.out / "report.md"
    outputs.write_text(path, "\n".join(parts))
    return path
