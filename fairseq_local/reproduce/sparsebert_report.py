"""The report of ``reproduce sparsebert``: Tables 1 and 3, Fig. 3 (a PNG and
its table) and Fig. 6 beside the paper's numbers, and a verdict per finding
(:data:`~.numbers_sparsebert.SPARSEBERT_FINDINGS`).

Metrics are GLUE's (:func:`.report.glue_metric`: CoLA MCC, QQP and MRPC F1,
STS-B Spearman, else accuracy); an average is over a seed's tasks.  Sparsity
ρ = 1 − |M|/n² (§3) twice: at n = 128 as the paper (fixed patterns counted,
DAM's evaluation mask 1[α > 0], Fig. 3's exported mask file), and on the dev
sentences as the fine-tuning log reports it (``rho`` of the validation that
chose ``checkpoint_best.pt``, Eq. 9).  Findings compare dev sparsities: the
stand-in sentences have 11–71 tokens, and entries beyond them are never used.

Verdicts rest on the spread over fine-tuning seeds (Table 1's rows, pooled),
also for rows run with one seed: a claim that A scores higher (lower) than B
holds when the difference exceeds :func:`.report.margin` in that direction;
"does not hurt" when A is not measurably below B.  Without the runs or a
spread: "not comparable".
"""

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .numbers_sparsebert import GLUE_COLUMNS, SPARSEBERT_FINDINGS, SPARSEBERT_TABLE1, SPARSEBERT_TABLE3
from .report import (NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, Finding, Values, compare, margin, paper_value,
                     pooled_sd, table)
from .plan import Plan
from .sparsebert import (FIXED, MODELS, N, PAPER, SCALES, TABLE1, TITLE, Scale, bert_dir, class_means, columns, dam_row,
                         dam_rows, fig3_source, ft_dir, gather, lam_name, mask_path, mean)

TEXT = {f["id"]: f["text"] for f in SPARSEBERT_FINDINGS}
BLOCK = 16  # reduced scales: P is read on the first 16 positions, which ~95 % of the stand-in sentences reach
NEAR = 0.10  # Fig. 6: a two-stage mask is "at comparable sparsity" within 10 points of dev ρ
NB_ONLY, NB_SPECIAL = ("strided", "fixed", "logsparse"), ("bigbird", "longformer", "star")  # §4.2's categories
Scores = Dict[str, Dict[str, Values]]


def dam_heads(ckpt: Path) -> Optional[list]:
    """The distinct DAM masks of a checkpoint (one per head when heads share α across layers)."""
    if not ckpt.is_file():
        return None
    from ..checkpoint_compat import read_checkpoint
    from ..cli.export import dam_masks

    cfg, state = read_checkpoint(str(ckpt))
    masks = list({id(m): m for m in dam_masks(cfg, state).values()}.values())
    return masks or None


def hard_sparsity(ckpts: Sequence[Path], n: int = N) -> Optional[float]:
    """ρ of the evaluation masks 1[α > 0] at length n, mean over heads and checkpoints."""
    out = []
    for c in ckpts:
        heads = dam_heads(c)
        if heads:
            out += [1 - float(m.matrix(min(n, m.max_len), "hard").mean()) for m in heads]
    return mean(out)


def mask_share(path: Path) -> Optional[float]:
    """The share of entries an exported mask file removes, mean over its heads."""
    from ..attention.masks.file import load_mask_file
    from ..errors import OneLineError

    try:
        masks = load_mask_file(str(path))
    except OneLineError:
        return None
    return mean([1 - float(e["matrix"].float().mean()) for e in masks.values()])


def _f(fid: str, ok: Optional[bool], evidence: str) -> Finding:
    verdict = NOT_COMPARABLE if ok is None else REPRODUCED if ok else NOT_REPRODUCED
    return Finding(fid, TEXT[fid], verdict, evidence)


def _cmp(a: Values, b: Values, sd: Optional[float]) -> Tuple[Optional[str], str]:
    """(compare's outcome, "+d.dd") of mean(a) − mean(b); (None, why) without runs or a spread."""
    if not a.values or not b.values:
        return None, "missing runs"
    return compare(a, b, sd), f"{a.mean - b.mean:+.2f}"  # type: ignore[operator]


def _margin_text(sd: Optional[float], n1: int = 1, n2: int = 1) -> str:
    return "no spread" if sd is None else f"margin ±{margin(sd, n1, n2):.2f} (2 standard errors, seed sd {sd:.2f})"


def p_findings(heads: Optional[List[Dict[str, float]]]) -> List[Finding]:
    """S1–S3 from the class means of each head's P (the spread: over heads)."""
    if not heads:
        return [_f(x, None, "needs a learned P (a DAM_u checkpoint)") for x in ("S1", "S2", "S3")]
    v = {c: Values(tuple(h[c] for h in heads)) for c in ("diag", "neighbour", "special", "other")}
    sd = pooled_sd(v.values())
    means = ", ".join(f"{c} {x.mean:.3f}" for c, x in v.items()) + f" over {len(heads)} heads; " + _margin_text(
        sd, len(heads), len(heads)).replace("seed sd", "sd over heads")
    if sd is None:
        return [_f(x, None, "needs several heads for a spread") for x in ("S1", "S2", "S3")]
    others = [c for c in v if c != "diag"]
    s1 = all(compare(v["diag"], v[c], sd) == "below" for c in others)
    s2 = all(compare(v["neighbour"], v[c], sd) == "above" for c in v if c != "neighbour")
    spread = sum(h["other_sd"] for h in heads) / len(heads)
    s3 = compare(v["special"], v["other"], sd) == "above" and spread < v["special"].mean - v["other"].mean
    return [_f("S1", s1, "mean P: " + means), _f("S2", s2, "mean P: " + means),
            _f("S3", s3, f"mean P: {means}; sd of P over the other positions {spread:.3f}")]


def table1_findings(avgs: Dict[str, Values], sd: Optional[float]) -> List[Finding]:
    """S4–S7: Table 1's averages (S4 is a theorem, S7 needs SWAG and SQuAD)."""
    out = [_f("S4", None, "a theorem (proof in the paper's Appendix A); nothing to measure")]
    base, rnd, nd = (avgs.get(r, Values(())) for r in TABLE1)
    c_nd, d_nd = _cmp(nd, base, sd)
    c_rnd, d_rnd = _cmp(rnd, base, sd)
    ev = (f"average no-diag − base {d_nd}, random − base {d_rnd}; " + _margin_text(sd, nd.n, base.n)
          if c_nd and c_rnd else "needs the three rows and several seeds for a spread")
    out.append(_f("S5", None if c_nd is None else c_nd != "below", ev))
    out.append(_f("S6", None if c_rnd is None else c_rnd == "below", ev))
    out.append(_f("S7", None, "SWAG and SQuAD are not run by this plan"))
    return out


def fig3_findings(scores: Scores, prune: Sequence[int], tasks: Sequence[str], sd: Dict[str, Optional[float]]
                  ) -> List[Finding]:
    """S8 (P beats random at every P and task) and S9 (CoLA stable, RTE drops)."""
    cols, diffs, miss, ok = columns(tasks), [], [], True
    for c in cols:
        for p in prune:
            out, d = _cmp(scores.get(f"prune-{p}", {}).get(c, Values(())),
                          scores.get(f"random-{p}", {}).get(c, Values(())), sd.get(c))
            if out is None:
                miss.append(f"{c} {p}%")
                continue
            diffs.append(f"{c} {p}% {d}")
            ok = ok and out == "above"
    if miss or not diffs:
        s8 = _f("S8", None, "needs every P-pruned and random run and a spread; missing: " + (", ".join(miss) or "all"))
    else:
        s8 = _f("S8", ok, "P-pruned − random: " + "; ".join(diffs) + "; "
                + ", ".join(f"{c} {_margin_text(sd[c])}" for c in cols))
    lo, hi = f"prune-{min(prune)}", f"prune-{max(prune)}"
    parts, verdicts = [], []
    for task, want in (("CoLA", "stable"), ("RTE", "drops")):
        out, d = _cmp(scores.get(hi, {}).get(task, Values(())), scores.get(lo, {}).get(task, Values(())), sd.get(task))
        if out is None:
            parts.append(f"{task}: no runs or spread")
            verdicts.append(None)
        else:
            parts.append(f"{task} {max(prune)}% − {min(prune)}% {d} ({out})")
            verdicts.append(out != "below" if want == "stable" else out == "below")
    s9 = _f("S9", None if None in verdicts else all(verdicts), "; ".join(parts))
    return [s8, s9]


def table3_findings(avgs: Dict[str, Values], rho: Dict[str, Optional[float]], s: Scale, sd: Optional[float],
                    masks: Dict[str, Optional[list]]) -> List[Finding]:
    """S10–S15 on the averages and the dev sparsities of Table 3's rows;
    S14 on the learned masks at the largest λ (``masks``: kind -> hard (n, n) matrices)."""
    out = []
    dam, pairs, above, below = dam_rows(s), 0, 0, []
    for r in dam:
        for f in FIXED:
            if rho.get(r) is None or rho.get(f) is None or rho[f] > rho[r]:
                continue
            c, _ = _cmp(avgs.get(r, Values(())), avgs.get(f, Values(())), sd)
            if c is None:
                continue
            pairs += 1
            above += c == "above"
            below += [f"{r} < {f}"] if c == "below" else []
    out.append(_f("S10", None if not pairs else above >= 0.8 * pairs,
                  f"DAM measurably above in {above} of {pairs} pairs with the fixed mask at most as sparse (dev); "
                  f"measurably below: {', '.join(below) or 'none'} (the paper: 22 of 25 above); " + _margin_text(sd)
                  if pairs else "needs DAM and fixed rows with dev sparsities, and a spread"))
    r, bb = dam_row("s", 1e-1), "bigbird"
    c, d = _cmp(avgs.get(r, Values(())), avgs.get(bb, Values(())), sd)
    if c is None or rho.get(r) is None or rho.get(bb) is None:
        out.append(_f("S11", None, "needs DAM_s (lambda=1e-1), BigBird and a spread"))
    else:
        out.append(_f("S11", rho[r] > rho[bb] and c == "above", f"dev ρ {100 * rho[r]:.1f}% vs {100 * rho[bb]:.1f}%; "
                      f"average DAM_s − BigBird {d}; " + _margin_text(sd)))
    lams = sorted(s.lambdas)
    seq = {k: [rho.get(dam_row(k, x)) for x in lams] for k in ("u", "s")}
    if len(lams) < 2 or any(v is None for xs in seq.values() for v in xs):
        out.append(_f("S12", None, "needs two lambdas or more with dev sparsities"))
    else:
        ok = all(a < b for xs in seq.values() for a, b in zip(xs, xs[1:]))
        out.append(_f("S12", ok, "dev ρ by λ " + ", ".join(lam_name(x) for x in lams) + ": " + "; ".join(
            f"DAM_{k} " + " / ".join(f"{100 * v:.1f}%" for v in xs) for k, xs in seq.items())))
    texts, oks = [], []
    for k in ("u", "s"):
        v = [avgs.get(dam_row(k, x), Values(())) for x in lams]
        ends, d = _cmp(v[-1], v[0], sd)
        steps = [_cmp(b, a, sd)[0] for a, b in zip(v, v[1:])]
        oks.append(None if ends is None or None in steps or len(lams) < 2 else ends == "below" and "above" not in steps)
        texts.append(f"DAM_{k} " + " / ".join(x.cell() for x in v))
    out.append(_f("S13", None if None in oks else all(oks), "average by λ " + ", ".join(lam_name(x) for x in lams)
                  + ": " + "; ".join(texts) + "; " + _margin_text(sd)))
    out.append(_s14(masks))
    cats = {name: Values(tuple(x for r in rows for x in avgs.get(r, Values(())).values))
            for name, rows in (("DAM", dam), ("neighbour+special", NB_SPECIAL), ("neighbour only", NB_ONLY))}
    c, _ = _cmp(cats["neighbour only"], cats["DAM"], sd)
    if c is None or not cats["neighbour+special"].values:
        out.append(_f("S15", None, "needs every Table 3 row and a spread"))
    else:
        m = [x.mean for x in cats.values()]
        out.append(_f("S15", m[0] > m[1] > m[2] and c == "below", "average by category: " + ", ".join(
            f"{k} {x.mean:.2f} ({x.n} runs)" for k, x in cats.items()) + "; "
            + _margin_text(sd, cats["neighbour only"].n, cats["DAM"].n)))
    return out


def _s14(masks: Dict[str, Optional[list]]) -> Finding:
    """S14: the share of diagonal entries off and of neighbour entries on in
    the hard (n, n) masks of each DAM kind, inside the first and last rows and
    columns (which dam-s always keeps)."""
    import torch

    ev, oks = [], []
    for k in ("u", "s"):
        ms = masks.get(k)
        if not ms:
            return _f("S14", None, "needs the DAM_u and DAM_s masks at the largest lambda")
        n = ms[0].shape[0]
        i, j = torch.arange(n - 2)[:, None], torch.arange(n - 2)[None, :]
        inner = [m[1:n - 1, 1:n - 1].float() for m in ms]
        off = mean([float(1 - m[i == j].mean()) for m in inner])
        near = mean([float(m[(i - j).abs() == 1].mean()) for m in inner])
        oks.append(off > 0.5 and near > 0.5)
        ev.append(f"DAM_{k}: diagonal off {100 * off:.0f}%, neighbours on {100 * near:.0f}%")
    return _f("S14", all(oks), "; ".join(ev) + " of the entries at the largest lambda (most: more than half)")


def fig6_findings(scores: Scores, rho: Dict[str, Dict[str, Optional[float]]], one: Sequence[str],
                  two: Sequence[str], tasks: Sequence[str], sd: Dict[str, Optional[float]]) -> List[Finding]:
    """S16: each one-stage DAM run against the two-stage run nearest in dev ρ (within :data:`NEAR`)."""
    use = [t for t in ("QNLI", "MRPC") if t in tasks] or list(tasks)
    parts, ok = [], True
    for t in use:
        for r in one:
            x = rho.get(r, {}).get(t)
            near = [(abs(rho[q][t] - x), q) for q in two if x is not None and rho.get(q, {}).get(t) is not None]
            if not near or min(near)[0] > NEAR:
                continue
            q = min(near)[1]
            c, d = _cmp(scores.get(r, {}).get(t, Values(())), scores.get(q, {}).get(t, Values(())), sd.get(t))
            if c is None:
                continue
            parts.append(f"{t}: {r} (ρ {100 * x:.0f}%) − {q} (ρ {100 * rho[q][t]:.0f}%) {d}")
            ok = ok and c == "above"
    note = "" if {"QNLI", "MRPC"} & set(tasks) else "QNLI and MRPC not run, so on the tasks run: "
    if not parts:
        return [_f("S16", None, f"{note}no one-stage run within {100 * NEAR:.0f} points of a two-stage run's dev "
                                f"sparsity on {', '.join(use)}, or no spread")]
    return [_f("S16", ok, note + "; ".join(parts) + "; " + ", ".join(f"{t} {_margin_text(sd.get(t))}" for t in use))]


def _pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def score_table(rows: Sequence[Tuple[str, str, Optional[float], dict]], scores: Scores, avgs: Dict[str, Values],
                rho: dict, cols: Sequence[str]) -> str:
    """One line per (name, row, ρ at n = 128, the paper's {column: value}):
    the sparsities, each column here and in the paper, and the averages."""
    out = []
    for name, r, sp, paper in rows:
        cells = [name, _pct(sp), _pct(rho[r]["all"]), paper_value(paper.get("sparsity"), 1)]
        for c in cols:
            cells += [scores[r][c].cell(1), paper_value(paper.get(c), 1)]
        same = mean([paper[c] for c in cols if paper.get(c) is not None])
        out.append(cells + [avgs[r].cell(1), paper_value(same, 1)])
    head = ["row", f"ρ % (n={N})", "ρ % (dev)", "ρ % paper", *[x for c in cols for x in (f"{c} here", f"{c} paper")]]
    return table(head + ["average here", "average paper (same tasks)"], out)


def fig3_md(scores: Scores, rho: dict, shares: Dict[Tuple[str, str], Optional[float]], prune: Sequence[int],
            tasks: Sequence[str]) -> str:
    rows = []
    for t in tasks:
        for p in prune:
            cells = [f"{p}", t]
            for how in ("prune", "random"):
                r, sh = f"{how}-{p}", shares.get((f"{how}-{p}", t))
                v = rho.get(r, {}).get(t)
                c = columns([t])[0]
                cells += [scores.get(r, {}).get(c, Values(())).cell(1), _pct(v), _pct(sh)]
            rows.append(cells)
    return table(["P %", "task", "by P", "ρ % (dev)", f"pruned % (n={N})", "random", "ρ % (dev)",
                  f"pruned % (n={N})"], rows)


def fig3_png(scores: Scores, rho: dict, prune: Sequence[int], tasks: Sequence[str], path: Path) -> Optional[Path]:
    """Metric against dev sparsity, pruning by P against random pruning, one panel per task."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # before matplotlib's import-time debug lines
    from matplotlib.figure import Figure

    from ..analysis.figures import save

    fig = Figure(figsize=(4 * len(tasks), 3.2))
    axes, drawn = fig.subplots(1, len(tasks), squeeze=False)[0], False
    for ax, t in zip(axes, tasks):
        c = columns([t])[0]
        for how, label, style in (("prune", "pruning by P", "o-"), ("random", "random pruning", "s--")):
            pts = sorted((100 * rho[r][t], scores[r][c].mean) for r in (f"{how}-{p}" for p in prune)
                         if rho.get(r, {}).get(t) is not None and scores.get(r, {}).get(c, Values(())).values)
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], style, label=label)
                drawn = True
        ax.set_xlabel("sparsity % (dev sentences)")
        ax.set_ylabel(f"{t} ({'MCC' if t == 'CoLA' else 'metric'})")
        ax.set_title(f"Fig. 3: {t}")
        ax.legend(fontsize=8)
    return save(fig, path) if drawn else None


def fig6_md(scores: Scores, rho: dict, one: Sequence[str], two: Sequence[str], tasks: Sequence[str]) -> str:
    rows = []
    for stage, rs in (("one-stage (DAM)", one), ("two-stage (P pruned)", two)):
        for r in rs:
            for t in tasks:
                v = rho.get(r, {}).get(t)
                rows.append([stage, r, t, _pct(v), scores.get(r, {}).get(columns([t])[0], Values(())).cell(1)])
    return table(["stage", "run", "task", "ρ % (dev)", "score"], rows)


def write_report(plan: Plan) -> Path:
    """``RUNS/sparsebert/report.md`` and ``report_fig3.png``; runs not yet finished are "-"."""
    from .. import outputs
    from .environment import environment
    from .plan import ROOT, step_timing
    from .report import environment_section, findings_section
    from ..cli.sparsity import sparsity

    s, paper = SCALES[plan.scale], plan.scale == "paper"
    fig3 = [f"{h}-{p}" for p in s.prune for h in ("prune", "random")]
    two = [f"prune-{p}" for p in sorted(set(s.prune) | set(s.fig6_prune))]
    rows = [*TABLE1, *dam_rows(s), *FIXED, *dict.fromkeys(fig3 + two)]
    seeds = {r: s.seeds if r in TABLE1 else s.sweep_seeds for r in rows}
    scores, avgs, rho = gather(plan, rows, seeds, s.tasks)
    cols = columns(s.tasks)
    sd_col = {c: pooled_sd(scores[r][c] for r in rows) for c in cols}
    sd_avg = pooled_sd(avgs.values())

    def ckpts(r: str) -> List[Path]:  # where a DAM row's learned mask is
        if paper:
            return [bert_dir(plan, r) / "checkpoint_last.pt"]
        return [ft_dir(plan, r, k) / t / "checkpoint_best.pt" for k in s.sweep_seeds for t in s.tasks]

    rho128 = {r: sparsity(FIXED[r][1], N) for r in FIXED}
    rho128.update({r: hard_sparsity(ckpts(r)) for r in dam_rows(s)})
    p_src = bert_dir(plan, "p") / "checkpoint_last.pt" if paper else ckpts(dam_row("u", min(s.lambdas)))[0]
    p_heads = dam_heads(p_src)
    block = N if paper else BLOCK
    classes = [class_means(m.matrix(block, "prob")) for m in p_heads] if p_heads else None
    last = {k: dam_heads(ckpts(dam_row(k, max(s.lambdas)))[0]) for k in ("u", "s")}
    masks = {k: [m.matrix(block, "hard") for m in v] if v else None for k, v in last.items()}
    shares = {(f"{h}-{p}", t): mask_share(mask_path(plan, s, h, p, "" if paper else t))
              for p in s.prune for h in ("prune", "random") for t in s.tasks}
    findings = (p_findings(classes) + table1_findings(avgs, sd_avg) + fig3_findings(scores, s.prune, s.tasks, sd_col)
                + table3_findings(avgs, {r: rho[r]["all"] for r in rows}, s, sd_avg, masks)
                + fig6_findings(scores, rho, dam_rows(s), two, s.tasks, sd_col))
    t1 = [(name, r, sparsity(MODELS[r][1], N) if MODELS[r][1] else 0.0,
           dict(zip(GLUE_COLUMNS, SPARSEBERT_TABLE1["dev"][name]))) for r, name in TABLE1.items()]
    names = {**{r: f"DAM_{r[4]} (lambda={r[6:]})" for r in dam_rows(s)}, **{r: FIXED[r][0] for r in FIXED}}
    t3 = [(name, r, rho128.get(r), dict(zip(SPARSEBERT_TABLE3["columns"], SPARSEBERT_TABLE3["rows"].get(name, ()))))
          for r, name in names.items()]
    png = fig3_png(scores, rho, s.prune, s.tasks, plan.out / "report_fig3.png")
    timing = step_timing(plan.runs, [st.id for st in plan.steps])
    data = ("the BERT corpus and GLUE, each row pretrained with its mask" if paper else
            "the stand-in corpus and the hard stand-in GLUE tasks (labels that need non-local information); one "
            "full-attention model pretrained, converted into every layout, masks learned in fine-tuning")
    text = "\n".join([
        f"{TITLE} at `{plan.scale}` scale", "",
        "Shi et al., \"SparseBERT: Rethinking the Importance Analysis in Self-attention\". "
        f"Data: {data}. Tasks: {', '.join(s.tasks)}. "
        f"Made by `fairseq-local reproduce {PAPER} --scale {plan.scale}`.", "",
        "Values on stand-in data cannot equal the paper's: what can repeat is the direction and size of each "
        "difference, decided on the spread over fine-tuning seeds.", "",
        environment_section(environment(ROOT), plan.seeds, timing),
        findings_section(findings),
        "## Table 1: removing the diagonal, dropping random entries", "",
        f"Dev metric (CoLA: MCC), mean ± sd over seeds; ρ at n = {N} and on the dev sentences (random dropping "
        f"removes n²/{N} entries of a sentence of n tokens, the diagonal n).", "",
        score_table(t1, scores, avgs, rho, cols),
        "## Table 3: DAM against fixed sparse masks", "",
        f"ρ at n = {N}: fixed masks counted, DAM's evaluation mask 1[α > 0] (entries beyond the sentences only "
        "feel the L1 term); ρ (dev): the fine-tuning log's.", "",
        score_table(t3, scores, avgs, rho, cols),
        "## Fig. 3: pruning by P against random pruning", "",
        f"Two-stage masks from {'the §3.1 run' if paper else fig3_source(s)}'s P; the paper prints no values.", "",
        fig3_md(scores, rho, shares, s.prune, s.tasks), *([f"![Fig. 3]({png.name})", ""] if png else []),
        "## Fig. 6: one stage against two stages", "",
        "The paper prints no values (Fig. 6 plots QNLI and MRPC).", "",
        fig6_md(scores, rho, dam_rows(s), two, [t for t in s.tasks if t in (s.fig6_tasks or s.tasks)]),
    ])
    path = plan.out / "report.md"
    plan.out.mkdir(parents=True, exist_ok=True)
    outputs.write_text(path, text)
    return path
