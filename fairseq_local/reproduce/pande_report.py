"""The report of ``reproduce pande``: Tables 1–4 beside the paper's numbers,
Figs. 1–3 of the NMT baseline and of BERT-base, and a verdict per finding
(:data:`~.numbers_pande.PANDE_FINDINGS`).

On stand-in data the values cannot equal the paper's; what can repeat is
the direction of each comparison.  "Matches the baseline" is read as "not
measurably below it": the difference stays within twice its standard error
over seeds (:func:`.report.margin`).
"""

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .numbers_pande import PANDE_FINDINGS, PANDE_NMT, PANDE_TABLE4
from .pande import (BERT_HEADS, BERT_LAYERS, BERT_ROWS, LETTERS, SCALES, TASKS, TITLE, analysis_dir, bert_run,
                    ft_dir, nmt_run, seeds_of, table4_layout)
from .plan import Plan
from .report import (NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, Finding, Values, collect, glue_metric,
                     margin, paper_value, pooled_sd, read_json, table)

ROW_NAMES = dict(zip(("roberta_local_base", "roberta_band2", "roberta_band6", "roberta_band6_all_tied",
                      "roberta_band6_132_tied", "roberta_band6_120_tied"), PANDE_TABLE4["rows"]))
TEXT = {f["id"]: f["text"] for f in PANDE_FINDINGS}


def mask_sparsity(arch: str, n: int = 128) -> float:
    """Mean over the arch's heads of 1 − |M|/n² at length n (global heads: 0)."""
    from ..attention.layout import parse_layout
    from ..cli.sparsity import sparsity
    from ..models.archs import get_config

    layout = get_config(arch).layout
    if not layout:  # BERT-base: every head global
        return 0.0
    heads = [h for layer in parse_layout(layout) for h in layer.heads]
    return sum(sparsity(h.mask, n) for h in heads) / len(heads)


def _verdict(ok: Optional[bool]) -> str:
    return NOT_COMPARABLE if ok is None else REPRODUCED if ok else NOT_REPRODUCED


def _finding(fid: str, ok: Optional[bool], evidence: str) -> Finding:
    return Finding(fid, TEXT[fid], _verdict(ok), evidence)


def nmt_findings(bleu: Dict[str, Values], weights: Dict[str, int]) -> List[Finding]:
    """P7–P13 on the synthetic pair: a configuration "matches" (a) when it is
    not measurably below it."""
    sd = pooled_sd(bleu.values())
    a = bleu.get("a", Values(()))

    def d(x: str) -> Optional[float]:
        return None if not bleu.get(x) or not bleu[x].values or not a.values else bleu[x].mean - a.mean

    def within(xs: Sequence[str]) -> "tuple[Optional[bool], str]":
        ds = {x: d(x) for x in xs}
        if sd is None or a.n == 0 or any(v is None for v in ds.values()):
            return None, "needs every configuration and several seeds of (a) for a spread"
        ms = {x: margin(sd, bleu[x].n, a.n) for x in xs}
        low = [x for x in xs if ds[x] < -ms[x]]
        text = ", ".join(f"({x}) {ds[x]:+.2f}" for x in xs)
        return not low, (f"BLEU − BLEU(a): {text}; margin ±{max(ms.values()):.2f} (2 standard errors, "
                         f"seed sd {sd:.2f})" + (f"; measurably below: {', '.join(low)}" if low else ""))

    out = []
    ok, ev = within(list("bcdef"))
    out.append(_finding("P7", ok, ev))
    ok, ev = within(["f"])
    out.append(_finding("P8", ok, ev))
    ds = {x: d(x) for x in "bcdef"}
    if any(v is None for v in ds.values()):
        out.append(_finding("P9", None, "needs (a)-(f)"))
    else:
        above = [x for x, v in ds.items() if v > 0]
        out.append(_finding("P9", len(above) == 5, f"above (a): {', '.join(above) or 'none'} of b-f"))
    ok, ev = within(list("ghij"))
    out.append(_finding("P10", ok, ev))
    for fid, x, paper_ratio in (("P11", "i", 0.5625), ("P12", "l", 0.5104)):
        ok, ev = within([x])
        ratio = weights[x] / weights["a"] if weights.get(x) and weights.get("a") else None
        same = ratio is not None and abs(ratio - paper_ratio) < 5e-3
        ev += f"; weights ({x})/(a) = {ratio:.4f} (paper {paper_ratio})" if ratio else "; no weight count"
        out.append(_finding(fid, None if ok is None else ok and same, ev))
    ok, ev = within(list("bcdefghijkl"))
    out.append(_finding("P13", ok, ev))
    return out


def bert_findings(scores: Dict[str, Dict[str, Values]], tasks: Sequence[str]) -> List[Finding]:
    """P14–P17 on the stand-in tasks that BERT-base learnt (:func:`learnt`);
    the spread is the base model's over fine-tuning seeds, per task."""
    base, b2, b6, allt, t132, t120 = (scores.get(a, {}) for a in ROW_NAMES)
    unlearnt = [t for t in tasks if base.get(t, Values(())).mean is not None and not learnt(t, base[t])]
    tasks = [t for t in tasks if t not in unlearnt]
    if not tasks:
        return [_finding(f, None, f"BERT-base learnt none of the tasks (at chance: {', '.join(unlearnt)})")
                for f in ("P14", "P15", "P16", "P17")]

    def m(task: str, x: Dict[str, Values]) -> Optional[float]:
        return margin(base.get(task, Values(())).sd, x.get(task, Values(())).n, base.get(task, Values(())).n)

    def mean(x: Dict[str, Values], t: str) -> Optional[float]:
        return x.get(t, Values(())).mean

    def have(*rows) -> bool:
        return all(mean(r, t) is not None for r in rows for t in tasks)

    out = []
    if not have(base, b2, b6) or any(m(t, b2) is None for t in tasks):
        out.append(_finding("P14", None, "needs BERT-base with several seeds, Band2 and Band6"))
    else:
        drops = {t: max(mean(base, t) - mean(b2, t), mean(base, t) - mean(b6, t)) for t in tasks}
        worst = max(drops, key=drops.get)
        ok = all(drops[t] <= max(3.1, m(t, b2)) for t in tasks)
        out.append(_finding("P14", ok, "largest drop of Band2/Band6 from BERT-base per task: "
                            + ", ".join(f"{t} {drops[t]:.1f}" for t in tasks)
                            + f" (allowed: 3.1 points, the paper's largest, or the margin; worst {worst})"))
    if not have(b2, b6):
        out.append(_finding("P15", None, "needs Band2 and Band6"))
    else:
        diff = {t: mean(b6, t) - mean(b2, t) for t in tasks}
        out.append(_finding("P15", all(v >= 0 for v in diff.values()),
                            "Band6 − Band2: " + ", ".join(f"{t} {v:+.1f}" for t, v in diff.items())))
    if not have(b6, allt) or any(m(t, allt) is None for t in tasks):
        out.append(_finding("P16", None, "needs Band6, AllTied and a spread"))
    else:
        diff = {t: mean(allt, t) - mean(b6, t) for t in tasks}
        below = [t for t in tasks if diff[t] < -m(t, allt)]
        out.append(_finding("P16", len(below) == len(tasks),
                            "AllTied − Band6: " + ", ".join(f"{t} {v:+.1f}" for t, v in diff.items())
                            + f"; measurably below on {', '.join(below) or 'no task'}"))
    if not have(allt, t132, t120, b6) or any(m(t, t120) is None for t in tasks):
        out.append(_finding("P17", None, "needs AllTied, 132Tied, 120Tied, Band6 and a spread"))
    else:
        rec = all(mean(t132, t) > mean(allt, t) for t in tasks)
        close = [t for t in tasks if abs(mean(t120, t) - mean(b6, t)) <= max(0.55, m(t, t120))]
        out.append(_finding("P17", rec and len(close) == len(tasks),
                            "132Tied − AllTied: " + ", ".join(f"{t} {mean(t132, t) - mean(allt, t):+.1f}" for t in tasks)
                            + "; 120Tied − Band6: " + ", ".join(f"{t} {mean(t120, t) - mean(b6, t):+.1f}" for t in tasks)
                            + f"; within the margin on {len(close)} of {len(tasks)}"))
    if unlearnt:  # the rows cannot differ where the baseline is at chance
        out = [Finding(f.id, f.text, f.verdict, f.evidence + f"; left out, BERT-base at chance: {', '.join(unlearnt)}")
               for f in out]
    return out


CLASSES = {"MNLI": 3}  # the tasks' classes (the others: 2)


def learnt(task: str, base: Values) -> bool:
    """Whether BERT-base learnt ``task``: its mean accuracy 5 points or two
    standard deviations (the larger) above chance."""
    chance = 100.0 / CLASSES.get(task, 2)
    return base.mean is not None and base.mean - chance > max(5.0, 2 * (base.sd or 0.0))


def _layer_means(rows: Sequence[Sequence[Optional[float]]]) -> List[Optional[float]]:
    out = []
    for r in rows:
        v = [x for x in r if x is not None]
        out.append(sum(v) / len(v) if v else None)
    return out


def analysis_findings(analyses: Dict[str, Path]) -> List[Finding]:
    """P1–P6 from ``sensitivity.json`` and ``bias.json`` of each model that
    has them (the evidence names the models)."""
    sens = {k: v for k, p in analyses.items() if (v := read_json(p / "sensitivity.json"))}
    bias = {k: v for k, p in analyses.items() if (v := read_json(p / "bias.json"))}
    out = []
    if not sens:
        out += [_finding("P1", None, "no sensitivity analysis"), _finding("P2", None, "no sensitivity analysis")]
    else:
        order, small, ev1, ev2 = [], [], [], []
        for k, s in sens.items():
            loc, syn, unr = (_layer_means(s[x]) for x in ("local", "syntactic", "unrelated"))
            good = [i for i in range(len(loc)) if None not in (loc[i], syn[i], unr[i]) and loc[i] > syn[i] > unr[i]]
            order.append(len(good) == len(loc))
            ratio = max((unr[i] / loc[i]) for i in range(len(loc)) if loc[i] and unr[i] is not None)
            small.append(ratio <= 0.25)
            ev1.append(f"{k}: γ_L > γ_S > γ_U in {len(good)} of {len(loc)} layers")
            ev2.append(f"{k}: largest γ_U/γ_L {ratio:.2f}")
        out.append(_finding("P1", all(order), "; ".join(ev1)))
        out.append(_finding("P2", all(small), "; ".join(ev2) + " (negligible read as ≤ 0.25)"))
    if not bias:
        return out + [_finding(f, None, "no bias analysis") for f in ("P3", "P4", "P5", "P6")]
    ev3, ok3, ev4, ok4, ev5, ok5, ev6, ok6 = [], [], [], [], [], [], [], []
    for k, b in bias.items():
        loc = [x for layer in b["local"] for x in layer if x is not None]
        syn = [x for layer in b["syntactic"] for x in layer if x is not None]
        n = sum(len(layer) for layer in b["local"])
        fl = [sum(x > t for x in loc) / n for t in range(1, 6)]
        fs = [sum(x > t for x in syn) / n for t in range(1, 6)]
        ok3.append(all(a > s or a == s == 0 for a, s in zip(fl, fs)))
        ev3.append(f"{k}: local " + "/".join(f"{v:.2f}" for v in fl) + ", syntactic " + "/".join(f"{v:.2f}" for v in fs))
        ok4.append(fl[2] > 0.25)
        ev4.append(f"{k} {fl[2]:.2f}")
        per_layer = [sum(x is not None and x > 3 for x in layer) for layer in b["local"]]
        ok5.append(sum(c > 0 for c in per_layer) * 2 >= len(per_layer) and per_layer[-1] < per_layer[0])
        ev5.append(f"{k}: " + " ".join(map(str, per_layer)))
        cs, cl = sum(x > 3 for x in syn), sum(x > 3 for x in loc)
        ok6.append(None if cl == 0 else cs < cl)  # no head above 3 at all: nothing to compare
        ev6.append(f"{k}: {cs} syntactic vs {cl} local")
    out.append(_finding("P3", all(ok3), "fraction of heads above t = 1..5: " + "; ".join(ev3)))
    out.append(_finding("P4", all(ok4), "fraction with locality bias > 3: " + ", ".join(ev4)
                        + " (the paper: > 0.25 in 4 of its 6 tasks)"))
    out.append(_finding("P5", all(ok5), "heads with locality bias > 3 per layer: " + "; ".join(ev5)))
    out.append(_finding("P6", None if None in ok6 else all(ok6), "heads above 3: " + "; ".join(ev6)))
    return out


def nmt_table(bleu: Dict[str, Values], weights: Dict[str, int]) -> str:
    """Tables 1–3 in one: every configuration, its weights and BLEU beside the paper's."""
    a = bleu.get("a", Values(()))
    rows = []
    for letter, cfg in PANDE_NMT["configs"].items():
        v = bleu.get(letter, Values(()))
        delta = f"{v.mean - a.mean:+.2f}" if v.values and a.values else "-"
        pa = PANDE_NMT["configs"]["a"]
        tab = next(t for t, xs in PANDE_NMT["tables"].items() if letter in xs and (letter != "a" or t == "table1"))
        rows.append([f"({letter}) {cfg['name']}", tab.replace("table", ""), f"{weights.get(letter, 0):,}" if weights.get(letter) else "-",
                     f"{cfg['attn_weights']:,}", v.cell(), delta, paper_value(cfg["en_de"]),
                     f"{cfg['en_de'] - pa['en_de']:+.2f}", paper_value(cfg["en_ru"]), f"{cfg['en_ru'] - pa['en_ru']:+.2f}"])
    return table(["config", "table", "attn weights (here)", "attn weights (paper)", "BLEU (here)", "Δ (a) here",
                  "En-De paper", "Δ (a) En-De", "En-Ru paper", "Δ (a) En-Ru"], rows)


def bert_table(scores: Dict[str, Dict[str, Values]], weights: Dict[str, int], tasks: Sequence[str], n: int) -> str:
    """Table 4 with a sparsity column: each task here (mean ± sd over seeds) and in the paper."""
    rows = []
    for arch, name in ROW_NAMES.items():
        paper = dict(zip(PANDE_TABLE4["columns"], PANDE_TABLE4["rows"][name]["scores"]))
        row = [name, f"{weights[arch]:,}" if weights.get(arch) else "-", f"{100 * mask_sparsity(arch, n):.1f}"]
        for t in tasks:
            row += [scores.get(arch, {}).get(t, Values(())).cell(1), paper_value(paper.get(t), 2)]
        rows.append(row)
    cols = ["configuration", "attn weights (here)", f"sparsity % (n={n})"]
    for t in tasks:
        cols += [f"{t} here", f"{t} paper"]
    return table(cols, rows)


def layouts_note() -> str:
    """How the reduced scales scale Table 4's 12 x 12 layouts down."""
    shown = "; ".join(f"{ROW_NAMES[a]} `{table4_layout(a)}`" for a in BERT_ROWS)
    return (f" Here every row is a {BERT_LAYERS}-layer model with {BERT_HEADS} heads per layer and BERT's "
            f"segment embedding (`--segment-embeddings`; pretrained and fine-tuned as the plan shows): 132Tied "
            f"keeps the paper's last layer untied and 120Tied its last two (132 and 120 of BERT-base's 144 heads "
            f"tied). The layouts: {shown}.")


def glue_scores(run_dirs: Dict[str, List[Path]], tasks: Sequence[str]) -> Dict[str, Dict[str, Values]]:
    """Accuracy (Table 4's metric) per row and task over the seeds' eval folders."""
    return {arch: {t: collect([d / f"{t}.json" for d in dirs], lambda p, t=t: glue_metric(p, t, "accuracy"))
                   for t in tasks} for arch, dirs in run_dirs.items()}


def weight_counts(runs: Dict[str, Path]) -> Dict[str, int]:
    """Encoder attention weights of each run's checkpoint (fairseq-local results' count)."""
    from ..cli.results import checkpoint_info

    out = {}
    for key, run in runs.items():
        info = checkpoint_info(run) if run.is_dir() else {}
        if info.get("attn weights"):
            out[key] = int(info["attn weights"].replace(",", ""))
    return out


def write_report(plan: Plan) -> Path:
    """``RUNS/pande/report.md`` and ``report_nmt.png``, ``report_bert.png``
    from the finished runs; cells of runs not yet finished are "-"."""
    from .. import outputs
    from .environment import environment
    from .plan import ROOT, step_timing
    from .report import bleu, environment_section, findings_section

    s = SCALES.get(plan.scale)
    seeds = {x: seeds_of(s, x == "a") if s else (1,) for x in LETTERS}
    nmt_dirs = ({x: [nmt_run(plan, x, k) for k in seeds[x]] for x in LETTERS} if s else
                {x: [plan.out / "wmt14_en-de" / x] for x in LETTERS})
    bleus = {x: collect([r / "test.bleu.json" for r in dirs], bleu) for x, dirs in nmt_dirs.items()}
    weights = weight_counts({x: dirs[0] for x, dirs in nmt_dirs.items()})
    ft = {a: [ft_dir(plan, a, k) / "eval" for k in (seeds_of(s, a == BERT_ROWS[0]) if s else (1,))]
          for a in BERT_ROWS}
    scores = glue_scores(ft, TASKS)
    bert_weights = weight_counts({a: bert_run(plan, a) for a in BERT_ROWS})
    analyses = {"NMT (a)": analysis_dir(plan, "nmt"), "BERT-base": analysis_dir(plan, "bert")}
    findings = (analysis_findings(analyses) + nmt_findings(bleus, weights)
                + bert_findings(scores, TASKS))
    timing = step_timing(plan.runs, [st.id for st in plan.steps])
    data = ("the hard synthetic corpus and the hard stand-in GLUE tasks (labels that need non-local "
            "information), with reduced models" if s else "WMT'14 and GLUE, as the paper")
    figs = []
    for what, title in (("nmt", "NMT baseline (a)"), ("bert", "BERT-base")):
        d = analysis_dir(plan, what)
        for png, fig in (("sensitivity.png", "Fig. 1"), ("bias_thresholds.png", "Fig. 2"), ("bias_heads.png", "Fig. 3")):
            if (d / png).is_file():
                figs.append(f"![{fig}, {title}]({(d / png).relative_to(plan.out).as_posix()})")
    text = "\n".join([
        f"{TITLE} at `{plan.scale}` scale", "",
        "Pande et al., \"On the Importance of Local Information in Transformer Based Models\". "
        f"Data: {data}. Made by `fairseq-local reproduce pande --scale {plan.scale}`.", "",
        "Values on stand-in data cannot equal the paper's: the comparison is of the direction and size of "
        "each difference against the baseline, decided on the spread over seeds.", "",
        environment_section(environment(ROOT), plan.seeds, timing),
        findings_section(findings),
        "## Tables 1–3: NMT configurations (a)–(l)", "",
        "BLEU here: the synthetic test set (sacreBLEU), mean ± sd (seeds) where several. The paper: "
        "WMT'14 En-De and En-Ru.", "", nmt_table(bleus, weights),
        "## Table 4: BERT-base layouts on GLUE", "",
        "Dev accuracy (MNLI: matched), mean ± sd over fine-tuning seeds where several; sparsity is the "
        "share of masked query-key pairs at length 128." + (layouts_note() if s else ""), "",
        bert_table(scores, bert_weights, TASKS, 128),
        "## Figs. 1–3: sensitivity and attention bias", "", *figs, "",
    ])
    path = plan.out / "report.md"
    plan.out.mkdir(parents=True, exist_ok=True)
    outputs.write_text(path, text)
    return path
