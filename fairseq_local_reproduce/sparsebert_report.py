"""The report of ``reproduce sparsebert``: Tables 1 and 3, Figs. 2 and 3 (PNGs
and tables) and Fig. 6 beside the paper's numbers, and a verdict per finding
(:mod:`.sparsebert_findings`).

Metrics are GLUE's (:func:`.report.glue_metric`: CoLA MCC, QQP and MRPC F1,
STS-B Spearman, else accuracy); an average is over a seed's tasks.  Sparsity
ρ = 1 − |M|/n² (§3) twice: at n = 128 as the paper counts it (fixed patterns,
DAM's evaluation mask 1[α > 0], the mask files), and realised on the dev
sentences, the mean over them of each sentence's ρ (``rho`` of the fine-tuning
log's validation that chose ``checkpoint_best.pt``, Eq. 9).  Comparisons "at
the same sparsity" use the realised one.
"""

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .numbers_sparsebert import GLUE_COLUMNS, SPARSEBERT_TABLE1, SPARSEBERT_TABLE3
from .plan import Plan
from .report import Values, paper_value, table
from .sparsebert import (FILE_ROWS, FIXED, MODELS, N, PAPER, SCALES, TABLE1, TITLE, bert_dir, columns, dam_row,
                         dam_rows, ft_dir, mask_path, mean, model_shape, p_checkpoint, p_lr_scale, row_mask)
from .sparsebert_findings import REACH, fig3_findings, fig6_findings, p_findings, table1_findings, table3_findings
from .sparsebert_figures import fig2_png, fig3_png, model_name
from .sparsebert_masks import sentence_lengths
from .sparsebert_runs import Runs, gather, p_units

Scores = Dict[str, Dict[str, Values]]


def dam_heads(ckpt: Path) -> Optional[list]:
    """The distinct DAM masks of a checkpoint (one per head when heads share α across layers)."""
    if not ckpt.is_file():
        return None
    from fairseq_local.checkpoint_compat import read_checkpoint
    from fairseq_local.attention.config import attention_options
    from fairseq_local.attention.export import learned_masks

    cfg, state = read_checkpoint(str(ckpt))
    masks = list({id(m): m for m in learned_masks(attention_options(cfg), state).values()}.values())
    return masks or None


def hard_sparsity(ckpts: Sequence[Path], n: int = N) -> Optional[float]:
    """ρ of the evaluation masks 1[α > 0] at length n, mean over heads and checkpoints."""
    out = []
    for c in ckpts:
        heads = dam_heads(c)
        if heads:
            out += [1 - float(m.matrix(min(n, m.max_len), "hard").mean()) for m in heads]
    return mean(out)


def mask_matrices(path: Path) -> Optional[list]:
    """The bool (N, N) matrices of a mask file, or None."""
    from fairseq_local.attention.masks.file import load_mask_file
    from fairseq_local.errors import OneLineError

    try:
        return [e["matrix"].bool() for e in load_mask_file(str(path)).values()]
    except OneLineError:
        return None


def mask_share(path: Path) -> Optional[float]:
    """The share of entries a mask file removes, mean over its heads."""
    ms = mask_matrices(path)
    return None if ms is None else mean([1 - float(m.float().mean()) for m in ms])


def dev_lengths(plan: Plan, task: str) -> Optional[List[int]]:
    """Tokens per dev sentence of ``task`` as the model reads them, or None before the data."""
    from .pande import data_dirs

    glue = plan.runs / "data-paper" / "glue-bin" if plan.scale == "paper" else data_dirs(plan.runs, plan.scale)["glue"]
    try:
        return sentence_lengths(glue / f"{task}-bin")
    except (OSError, ValueError):
        return None


def fixed_matrix(plan: Plan, row: str, task: str) -> Optional[object]:
    """A fixed row's bool (N, N) mask: its file (reduced :data:`FILE_ROWS`), else its token."""
    if plan.scale != "paper" and row in FILE_ROWS:
        ms = mask_matrices(row_mask(plan, row, task))
        return ms[0] if ms else None
    from fairseq_local.attention.masks import parse_mask
    import torch

    pos = torch.arange(N)
    return parse_mask(MODELS[row][1]).dense(pos, pos).expand(N, N)  # type: ignore[arg-type]


def cannot_work(plan: Plan, task: str, lengths: Optional[List[int]]) -> Dict[str, str]:
    """Longformer and BigBird when their global positions (the rows a mask
    keeps whole) lie in fewer than :data:`REACH` of the dev sentences."""
    out = {}
    for row in ("longformer", "bigbird"):
        kept = fixed_matrix(plan, row, task)
        if kept is None or not lengths:
            continue
        g = [i for i in range(N) if bool(kept[i].all())]  # type: ignore[index]
        share = sum(any(x < n for x in g) for n in lengths) / len(lengths)
        if share < REACH:
            out[row] = (f"its global positions {[x + 1 for x in g]} lie beyond {100 * (1 - share):.0f}% of the "
                        "dev sentences: the pattern is its window alone there")
    return out


def sentence_rhos(plan: Plan, rows: Sequence[str], task: str, lengths: List[int], ckpt) -> Dict[str, List[float]]:
    """ρ of each dev sentence for DAM rows (first seed's hard masks, mean over heads) and fixed rows."""
    out: Dict[str, List[float]] = {}
    for r in rows:
        if r in FIXED:
            kept = fixed_matrix(plan, r, task)
            if kept is not None:
                out[r] = [1 - float(kept[:n, :n].float().mean()) for n in lengths]  # type: ignore[index]
            continue
        heads = dam_heads(ckpt(r)[0])
        if heads:
            out[r] = [mean([1 - float(m.matrix(n, "hard").mean()) for m in heads]) for n in lengths]  # type: ignore
    return out


def s14_units(ckpts: Sequence[Path], lengths: List[int]) -> Optional[List[Tuple[float, float]]]:
    """(share of inner diagonal entries off, of inner neighbour entries on) over
    the dev sentences, for each head of each checkpoint."""
    import torch

    out = []
    for c in ckpts:
        for m in dam_heads(c) or []:
            off = on = n_d = n_nb = 0.0
            for n in lengths:
                if n < 4:
                    continue
                inner = m.matrix(n, "hard")[1:n - 1, 1:n - 1]
                i = torch.arange(n - 2)
                off += float((1 - inner[i, i]).sum())
                on += float(inner[i[:-1], i[:-1] + 1].sum() + inner[i[:-1] + 1, i[:-1]].sum())
                n_d, n_nb = n_d + n - 2, n_nb + 2 * (n - 3)
            if n_d and n_nb:
                out.append((off / n_d, on / n_nb))
    return out or None


def _pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def score_table(rows: Sequence[Tuple[str, str, Optional[float], dict]], runs: Runs, cols: Sequence[str]) -> str:
    """One line per (name, row, ρ at n = 128, the paper's {column: value}):
    the seeds that finished, the sparsities, each column here and in the paper, and the averages."""
    out = []
    for name, r, sp, paper in rows:
        cells = [name, f"{runs.avgs[r].n} of {len(runs.seeds[r])}", _pct(sp), _pct(runs.rho[r]["all"]),
                 paper_value(paper.get("sparsity"), 1)]
        for c in cols:
            cells += [runs.scores[r][c].cell(1), paper_value(paper.get(c), 1)]
        same = mean([paper[c] for c in cols if paper.get(c) is not None])
        out.append(cells + [runs.avgs[r].cell(1), paper_value(same, 1)])
    head = ["row", "seeds", f"ρ % (n={N})", "ρ % (dev)", "ρ % paper",
            *[x for c in cols for x in (f"{c} here", f"{c} paper")]]
    return table(head + ["average here", "average paper (same tasks)"], out)


def fig3_md(runs: Runs, shares: Dict[Tuple[str, str], Optional[float]], prune: Sequence[int],
            tasks: Sequence[str]) -> str:
    rows = []
    for t in tasks:
        for p in prune:
            cells = [f"{p}", t]
            for how in ("prune", "random"):
                r = f"{how}-{p}"
                c = columns([t])[0]
                cells += [runs.scores.get(r, {}).get(c, Values(())).cell(1), _pct(runs.rho.get(r, {}).get(t)),
                          _pct(shares.get((r, t)))]
            rows.append(cells)
    return table(["ρ % target", "task", "by P", "ρ % (dev)", f"pruned % (n={N})", "random", "ρ % (dev)",
                  f"pruned % (n={N})"], rows)


def fig6_md(runs: Runs, one: Sequence[str], two: Sequence[str], tasks: Sequence[str]) -> str:
    rows = []
    for stage, rs in (("one-stage (DAM)", one), ("two-stage (P pruned)", two)):
        for r in rs:
            for t in tasks:
                score = runs.scores.get(r, {}).get(columns([t])[0], Values(()))
                rows.append([stage, r, t, _pct(runs.rho.get(r, {}).get(t)), score.cell(1)])
    return table(["stage", "run", "task", "ρ % (dev)", "score"], rows)


def write_report(plan: Plan) -> Path:
    """``RUNS/sparsebert/report.md`` and its PNGs; runs not yet finished are "-"."""
    from fairseq_local import outputs
    from fairseq_local.attention.masks.measure import sparsity
    from .environment import environment
    from .plan import ROOT, step_timing
    from .report import environment_section, findings_section

    s, paper = SCALES[plan.scale], plan.scale == "paper"
    shape = (12, 12) if paper else model_shape()
    model = model_name(plan.scale, shape)
    fig3 = [f"{h}-{p}" for p in s.prune for h in ("prune", "random")]
    two = [f"prune-{p}" for p in sorted(set(s.prune) | set(s.fig6_prune))]
    rows = [*TABLE1, *dam_rows(s), *FIXED, *dict.fromkeys(fig3 + two)]
    seeds = {r: s.seeds if r in TABLE1 else s.sweep_seeds for r in rows}
    runs = gather(lambda r, k: ft_dir(plan, r, k), rows, seeds, s.tasks)
    cols, task = columns(s.tasks), s.tasks[0]
    lengths = {t: dev_lengths(plan, t) for t in s.tasks}

    def ckpts(r: str) -> List[Path]:  # where a DAM row's learned masks are, one per seed
        if paper:
            return [bert_dir(plan, r) / "checkpoint_last.pt"]
        return [ft_dir(plan, r, k) / task / "checkpoint_best.pt" for k in s.sweep_seeds]

    def at_n(r: str) -> Optional[float]:  # ρ of a fixed row's mask at n = 128 (its file's at the reduced scales)
        if not paper and r in FILE_ROWS:
            return mask_share(row_mask(plan, r, task))
        return sparsity(MODELS[r][1], N) if MODELS[r][1] else 0.0

    rho128 = {r: at_n(r) for r in FIXED}
    rho128.update({r: hard_sparsity(ckpts(r)) for r in dam_rows(s)})
    # §3.1's P: read on the sentences it was learned on (reduced: each task's dev sentences; paper: n = 128)
    units, p_heads, base = [], [], 0
    for t in (["CoLA"] if paper else s.tasks):
        heads = dam_heads(p_checkpoint(plan, t))
        read = [N] if paper else lengths[t]
        if heads and read:
            mats = [m.matrix(min(N, m.max_len), "prob") for m in heads]
            units += [{**u, "head": u["head"] + base} for u in p_units(mats, read)]
            p_heads += mats
            base += len(mats)
    where = ("P of the §3.1 pre-training at n = 128 (special: tokens 1 and 128)" if paper else
             f"P of the §3.1 runs on {', '.join(s.tasks)} read on their dev sentences (special: each sentence's "
             f"first and last token; α's lr × {p_lr_scale(s)})")
    cannot = cannot_work(plan, task, [n for t in s.tasks for n in lengths[t] or []])
    per_sentence = sentence_rhos(plan, [*dam_rows(s), *FIXED], task, lengths[task], ckpts) if lengths[task] else {}
    last = {k: s14_units(ckpts(dam_row(k, max(s.lambdas))), [N] if paper else lengths[task] or [])
            for k in ("u", "s")}
    shares = {(f"{h}-{p}", t): mask_share(mask_path(plan, h, p, t)) for p in s.prune for h in ("prune", "random")
              for t in s.tasks}
    fig6_tasks = [t for t in s.tasks if t in (s.fig6_tasks or s.tasks)]
    findings = (p_findings(units, where) + table1_findings(runs, s.tasks, paper) + fig3_findings(runs, s.prune, s.tasks)
                + table3_findings(runs, dam_rows(s), s.lambdas, s.tasks, per_sentence, last, cannot)
                + fig6_findings(runs, dam_rows(s), two, s.tasks))
    t1 = [(name, r, at_n(r), dict(zip(GLUE_COLUMNS, SPARSEBERT_TABLE1["dev"][name]))) for r, name in TABLE1.items()]
    names = {**{r: f"DAM_{r[4]} (lambda={r[6:]})" for r in dam_rows(s)}, **{r: FIXED[r][0] for r in FIXED}}
    t3 = [(name, r, rho128.get(r), dict(zip(SPARSEBERT_TABLE3["columns"], SPARSEBERT_TABLE3["rows"].get(name, ()))))
          for r, name in names.items()]
    scale = f"{plan.scale} scale"
    n_fig2 = N if paper else (sorted(lengths[task])[len(lengths[task]) // 2] if lengths[task] else 0)
    png2 = fig2_png(p_heads[:shape[1]], n_fig2, f"Fig. 2: P averaged over {min(len(p_heads), shape[1])} heads "
                    f"({task if not paper else 'pre-training'}, n = {n_fig2})\n{model}, {scale}",
                    plan.out / "report_fig2.png") if p_heads and n_fig2 else None
    png3 = fig3_png(runs.scores, runs.rho, s.prune, s.tasks, f"Fig. 3: {model}, {scale}", plan.out / "report_fig3.png")
    timing = step_timing(plan.runs, [st.id for st in plan.steps])
    data = ("the BERT corpus and GLUE, each row pretrained with its mask" if paper else
            "the stand-in corpus and the hard stand-in GLUE tasks (labels that need non-local information); one "
            "full-attention model pretrained, converted into every layout, masks and P learned in fine-tuning")
    seeds_line = (f"Seeds per row: Table 1's rows {len(s.seeds)} ({', '.join(map(str, s.seeds))}); Table 3's, "
                  f"Fig. 3's and Fig. 6's rows {len(s.sweep_seeds)} ({', '.join(map(str, s.sweep_seeds))}); §3.1's "
                  "P one; the tables' \"seeds\" column counts those that finished.")
    text = "\n".join([
        f"{TITLE} at `{plan.scale}` scale", "",
        "Shi et al., \"SparseBERT: Rethinking the Importance Analysis in Self-attention\". "
        f"Model: {model}. Data: {data}. Tasks: {', '.join(s.tasks)}. "
        f"Made by `fairseq-local reproduce {PAPER} --scale {plan.scale}`.", "",
        "Values on stand-in data cannot equal the paper's: what can repeat is the direction and size of each "
        "difference, decided on 95 % intervals as each finding states. " + seeds_line, "",
        environment_section(environment(ROOT), plan.seeds, timing),
        findings_section(findings),
        "## Fig. 2: the importance P of §3.1", "",
        "P = sigmoid(α) learned with P ⊙ A after the softmax, no Gumbel noise and no sparsity penalty (§3.1, "
        f"Eq. 3-4). {where}.", "", *([f"![Fig. 2]({png2.name})", ""] if png2 else []),
        "## Table 1: removing the diagonal, dropping random entries", "",
        f"Dev metric (CoLA: MCC), mean ± sd (seeds). ρ at n = {N} and realised on the dev sentences. The paper "
        f"drops 128 random entries of the 128×128 mask, as many as the diagonal at n = {N}; on a sentence of n "
        f"tokens that pattern drops about n²/{N} entries where the diagonal drops n (the authors pad every "
        "sentence to 128, so their runs had that gap on short sentences). "
        + ("Here the authors' pattern." if paper else
           "Here the random entries are drawn on the dev sentences' positions until the realised ρ is the "
           "diagonal's (`sparsebert_masks random-drop`)."), "",
        score_table(t1, runs, cols),
        "## Table 3: DAM against fixed sparse masks", "",
        f"ρ at n = {N}: fixed masks counted, DAM's evaluation mask 1[α > 0]; ρ (dev): the fine-tuning log's. "
        + ("" if paper else "Longformer's and BigBird's random positions are drawn among those of the dev "
           "sentences (§4.2's \"input locations\"); drawn among 128 they lie beyond the stand-in sentences."), "",
        score_table(t3, runs, cols),
        "## Fig. 3: pruning by P against random pruning", "",
        f"Two-stage masks from §3.1's P, both pruned to the same ρ realised on each task's dev sentences "
        f"(the paper prunes P % of the {N}×{N} entries); the paper prints no values.", "",
        fig3_md(runs, shares, s.prune, s.tasks), *([f"![Fig. 3]({png3.name})", ""] if png3 else []),
        "## Fig. 6: one stage against two stages", "",
        "The paper prints no values (Fig. 6 plots QNLI and MRPC).", "",
        fig6_md(runs, dam_rows(s), two, fig6_tasks),
    ])
    path = plan.out / "report.md"
    plan.out.mkdir(parents=True, exist_ok=True)
    outputs.write_text(path, text)
    return path
