"""The report of ``reproduce aaa``: Tables 1, 3, 4, 5 and 6 and Fig. 2 (a PNG
and its table) beside Wang et al.'s numbers, ρ in every table (on the dev
sentences, and at n = 128), the seeds of every row, and a verdict per finding
(:data:`~.numbers_aaa.AAA_FINDINGS`, decided in :mod:`.aaa_findings`).

Scores are GLUE's (:func:`.report.glue_metric`: QQP and MRPC F1, CoLA MCC,
STS-B Spearman, else accuracy), MNLI matched except in Table 1, whose MNLI
column is mismatched as the paper's.  ρ is Eq. 9 on the dev sentences as the
fine-tuning log reports it: ``rho`` (every head) and, for AAA and the learned
diagonals, ``aaa_rho``/``hinge_rho`` of the validation that chose
``checkpoint_best.pt``; Table 6 reads ``aaa_rows`` and ``aaa_cols`` of the same
line (the share of real tokens whose row or column the selector keeps).
Per-example dev predictions (``eval/predictions/TASK.json`` of each row's
first seed) are the units of the bootstrap of :mod:`.aaa_examples`.
"""

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .aaa import (AAA_ROWS, FIXED, PAPER, PRETRAINED, SCALES, TITLE, Row, Scale, fig2_rows, ft_dir,
                  layer_mask_file, mask_file, pattern_name, predictions_dir, col, row_seeds, row_tasks, rows, target)
from .aaa_examples import read_predictions
from .aaa_findings import findings, target_line
from .numbers_aaa import AAA_TABLE1, AAA_TABLE3, AAA_TABLE4, AAA_TABLE5, AAA_TABLE6, AAA_TASKS
from .plan import Plan
from .report import Values, paper_value, table
from .sparsebert import metric, model_shape

BASIS = ("The findings below are decided on 95 % intervals: Welch's t over seeds where both rows have three "
         "or more, else a paired bootstrap over dev examples, as each finding states.")
KEYS = ("rho", "aaa_rho", "hinge_rho", "aaa_rows", "aaa_cols")  # read from the chosen validation line
AT_N = 128  # the length at which SparseBERT (and the tables' second ρ) measure a pattern's sparsity


def valid_stats(run: Path) -> Dict[str, float]:
    """The logged :data:`KEYS` of the validation that chose ``checkpoint_best.pt``
    (the last with the best accuracy; else the last) in RUN/train.log."""
    try:
        lines = (run / "train.log").read_text(errors="replace").splitlines()
    except OSError:
        return {}
    best: Optional[Tuple[float, Dict[str, float]]] = None
    for line in lines:
        if not re.search(r"\| valid \| epoch .*?\| loss ", line):
            continue
        acc = re.search(r"\| accuracy ([0-9.]+)", line)
        vals = {k: float(m.group(1)) for k in KEYS for m in [re.search(rf"\| {k} ([0-9.e+-]+)", line)] if m}
        a = float(acc.group(1)) if acc else float("-inf")
        if best is None or a >= best[0]:
            best = (a, vals)
    out = {} if best is None else dict(best[1])
    train = [line for line in lines if "| train_inner |" in line]
    for k in ("aaa_rho", "aaa_rows"):  # the last training values: what Eq. 10's hinge held (Gumbel noise on)
        m = re.search(rf"\b{k}=([0-9.e+-]+)", train[-1]) if train else None
        if m:
            out[f"train_{k}"] = float(m.group(1))
    return out


class Runs:
    """What the finished runs of a plan measured, per row, seed and task."""

    def __init__(self, plan: Plan, s: Scale) -> None:
        self.plan, self.s, self.rows = plan, s, rows(s)
        self.raw: Dict[str, Dict[str, List[Optional[float]]]] = {}   # row -> column -> per seed
        self.stats: Dict[str, Dict[str, List[Dict[str, float]]]] = {}  # row -> task -> per seed
        for key in self.rows:
            seeds, tasks = row_seeds(s, key), row_tasks(s, key)
            cols = [c for t in tasks for c in dict.fromkeys((col(t), col(t, True)))]
            self.raw[key] = {c: [metric(ft_dir(plan, key, k) / "eval", c) for k in seeds] for c in cols}
            self.stats[key] = {t: [valid_stats(ft_dir(plan, key, k) / t) for k in seeds] for t in tasks}

    def score(self, key: str, c: str) -> Values:
        return Values(tuple(v for v in self.raw.get(key, {}).get(c, []) if v is not None))

    def average(self, key: str, cols: Sequence[str]) -> Values:
        """Per seed the mean over ``cols`` (seeds with every column)."""
        per = [self.raw.get(key, {}).get(c, []) for c in cols]
        if not per or any(len(p) != len(per[0]) for p in per):
            return Values(())
        return Values(tuple(sum(p[i] for p in per) / len(per) for i in range(len(per[0]))  # type: ignore[misc]
                            if all(p[i] is not None for p in per)))

    def value(self, key: str, task: str, name: str = "rho") -> Optional[float]:
        """A logged value (:data:`KEYS`) of ``key`` on ``task``, mean over seeds; None without one."""
        xs = [x[name] for x in self.stats.get(key, {}).get(task, []) if name in x]
        return sum(xs) / len(xs) if xs else None

    def rho(self, key: str, tasks: Optional[Sequence[str]] = None) -> Optional[float]:
        xs = [v for t in (tasks or self.s.tasks) for v in [self.value(key, t)] if v is not None]
        return sum(xs) / len(xs) if xs else None

    def examples(self, keys: Sequence[str], tasks: Sequence[str]) -> Optional[Dict[str, list]]:
        """{task: [(gold, pred) of each row of ``keys``]}: the dev predictions of each row's first seed;
        None when one is missing."""
        out: Dict[str, list] = {}
        for t in tasks:
            out[t] = []
            for key in keys:
                got = read_predictions(predictions_dir(self.plan, key, self.s.seeds[0]) / f"{t}.json")
                if got is None:
                    return None
                out[t].append(got)
        return out

    def rho128(self, key: str, tasks: Optional[Sequence[str]] = None) -> Optional[float]:
        """ρ of row ``key``'s pattern at n = 128 (mean over ``tasks``): a fixed pattern's from its token,
        a learned diagonal's from its exported mask (seed 1); None for AAA (its pattern depends on the
        sentence) or a missing mask file."""
        row = self.rows[key]
        if row.kind == "full":
            return 0.0
        if row.kind == "fixed":
            return _sparsity(row.token, AT_N)
        xs = [v for t in (tasks or self.s.tasks) for v in [_file_rho(self._mask(row, t))] if v is not None]
        return sum(xs) / len(xs) if xs else None

    def _mask(self, row: Row, task: str) -> Optional[Path]:
        if row.kind == "file":
            return mask_file(self.plan, self.s, task)
        if self.plan.scale == "paper":
            return None
        if row.kind == "dam":
            return self.plan.out / "masks" / f"dam-s-{task}.pt"
        return layer_mask_file(self.plan, task) if row.kind == "dam-layer" else None


def _sparsity(mask, n: int) -> float:
    """1 − |M|/n² of a mask (or mask token) at length n."""
    from fairseq_local.attention.masks.measure import sparsity

    return sparsity(mask, n)


def _file_rho(path: Optional[Path], n: int = 128) -> Optional[float]:
    """Mean over the heads of an exported mask file of 1 − |M|/n² at n (with dam-s's end rows and columns)."""
    from fairseq_local.attention.masks import MaskSpecError
    from fairseq_local.attention.masks.file import FileMask, load_mask_file

    if path is None or not path.is_file():
        return None
    try:
        heads = [tuple(map(int, k.split("."))) for k in load_mask_file(str(path))]
        return sum(_sparsity(FileMask(layer, head, str(path)), n) for layer, head in heads) / len(heads)
    except (MaskSpecError, ValueError, RuntimeError):
        return None


def _pct(v: Optional[float], digits: int = 1) -> str:
    return "-" if v is None else f"{100 * v:.{digits}f}"


def _mean(xs: Sequence[Optional[float]]) -> Optional[float]:
    ys = [x for x in xs if x is not None]
    return sum(ys) / len(ys) if ys else None


def score_table(r: Runs, lines: Sequence[Tuple[str, str, dict]], tasks: Sequence[str], table1: bool = False,
                targets: bool = False) -> str:
    """One line per (name, row, the paper's {task: (ρ, score)} or {task: score}): the row's seeds, its ρ
    at n = 128, per task ρ on the dev sentences here (and the target of Eq. 10), ρ in the paper, the score
    here (mean ± sd (seeds finished) where there are several) and in the paper; the averages."""
    out = []
    for name, key, paper in lines:
        at_n = r.rho128(key)
        cells = [name, ", ".join(map(str, row_seeds(r.s, key))),
                 "input-dependent" if at_n is None and r.rows[key].kind == "aaa" else _pct(at_n)]
        for t in tasks:
            p = paper.get(t)
            p_rho, p_score = (p if isinstance(p, tuple) else (None, p)) if p is not None else (None, None)
            rho = _pct(r.value(key, t)) if t in row_tasks(r.s, key) else "-"
            if targets:
                row = r.rows[key]
                rho += f" ({_pct(target(r.plan.scale, row, t))})" if row.kind in ("aaa", "dam", "dam-layer") else ""
            cells += [rho, paper_value(p_rho, 0), r.score(key, col(t, table1)).cell(1), paper_value(p_score, 0)]
        same = _mean([(paper[t][1] if isinstance(paper.get(t), tuple) else paper.get(t)) for t in tasks])
        out.append(cells + [r.average(key, [col(t, table1) for t in tasks]).cell(1), paper_value(same, 1)])
    head = ["row", "seeds", f"ρ % at n = {AT_N}"] + [
        x for t in tasks for x in (f"{t} dev ρ %{' (target)' if targets else ''}", f"{t} ρ paper", f"{t} here",
                                   f"{t} paper")]
    return table(head + ["average here", "average paper (same tasks)"], out)


def _paper(rows_: Dict[str, Sequence], name: str) -> dict:
    return dict(zip(AAA_TASKS, rows_.get(name, ())))


def table1_lines(r: Runs) -> List[Tuple[str, str, dict]]:
    out = [("Full Pattern (pre-train & fine-tune)", "full", _paper(AAA_TABLE1, "Full Pattern (pre-train & fine-tune)"))]
    for key in PRETRAINED:
        for k, how in ((f"{key}-pt", "pre-train & fine-tune"), (key, "fine-tune")):
            name = f"{pattern_name(*FIXED[key])} ({how})"
            out.append((name, k, _paper(AAA_TABLE1, name)))
    return out


def table4_lines() -> List[Tuple[str, str, dict]]:
    out = [("Full", "full", AAA_TABLE4["Full"])]
    for key, printed in (("l2g2", None), ("l3g1", "aaa-l2g2"), ("l2g1r1", "aaa-l2g1r1"), ("l1g1r2", "aaa-l1g1r2")):
        out.append((pattern_name(*FIXED[key]), key, AAA_TABLE4[pattern_name(*FIXED[key])]))
        if printed:
            name = next(n for n in AAA_TABLE4 if n.startswith("AAA (vs " + pattern_name(*FIXED[AAA_ROWS[printed]])))
            out.append((f"AAA at the rho of {pattern_name(*FIXED[AAA_ROWS[printed]])}", printed, AAA_TABLE4[name]))
    return out


def table5_lines() -> List[Tuple[str, str, dict]]:
    out = []
    for key in PRETRAINED:
        name = pattern_name(*FIXED[key])
        out += [(f"{name} (pre-train & fine-tune)", f"{key}-pt", AAA_TABLE5[f"{name} (pre-train & fine-tune)"]),
                (f"AAA (fine-tune), at the rho of {name}", f"aaa-{key}", AAA_TABLE5[f"AAA (fine-tune) vs {name}"])]
    return out


def fig2_md(r: Runs) -> str:
    lines = []
    for t in r.s.fig2_tasks:
        for k in r.s.sizes:
            cells = [str(k), t]
            for key in (f"l{k}g2", f"l2g{k}"):
                cells += [r.score(key, col(t)).cell(1), _pct(r.value(key, t)), _pct(r.rho128(key))]
            lines.append(cells)
    return table(["size", "task", "Local_size + Global2", "dev ρ %", f"ρ % at n = {AT_N}", "Local2 + Global_size",
                  "dev ρ %", f"ρ % at n = {AT_N}"], lines)


def fig2_png(r: Runs, path: Path) -> Optional[Path]:
    """Score against pattern size, local and global varied, one panel per Fig. 2 task; error bars (± one
    standard deviation over seeds) where a size has several seeds; titles name the model and scale."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    from matplotlib.figure import Figure

    from fairseq_local.analysis.figures import save

    tasks = r.s.fig2_tasks
    fig = Figure(figsize=(4.6 * len(tasks), 3.4), layout="constrained")
    axes, drawn = fig.subplots(1, len(tasks), squeeze=False)[0], False
    for ax, t in zip(axes, tasks):
        for label, fmt, style in (("local size (global 2)", "l{}g2", "o-"), ("global size (local 2)", "l2g{}", "s--")):
            vals = [(k, r.score(fmt.format(k), col(t))) for k in r.s.sizes]
            pts = [(k, v.mean, v.sd or 0.0) for k, v in vals if v.values]
            if pts:
                ax.errorbar([x for x, _, _ in pts], [y for _, y, _ in pts], yerr=[e for _, _, e in pts], fmt=style,
                            capsize=3, label=label)
                drawn = True
        ax.set_xticks(list(r.s.sizes))
        ax.set_xlabel("pattern size (error bars: ± sd over seeds)")
        ax.set_ylabel(f"{t} dev ({'F1' if t == 'QQP' else 'accuracy'}, %)")
        ax.set_title(f"Fig. 2: {t}, {model_name(r)}, {r.plan.scale}", fontsize=9)
        if ax.get_lines():
            ax.legend(fontsize=8)
    return save(fig, path) if drawn else None


def table6_md(r: Runs) -> str:
    lines = []
    for t in r.s.tasks:
        here = {k: _mean([r.value(a, t, f"aaa_{k}") for a in AAA_ROWS]) for k in ("rows", "cols")}
        lines.append([t, _pct(here["rows"], 2), paper_value(AAA_TABLE6["row"].get(t), 1),
                      _pct(here["cols"], 2), paper_value(AAA_TABLE6["column"].get(t), 1)])
    return table(["task", "row tokens % here", "paper", "column tokens % here", "paper"], lines)


def model_name(r: Runs) -> str:
    """The fine-tuned model in words: BERT-base, or the reduced BERT with its shape."""
    if r.plan.scale == "paper":
        return "BERT-base (12 layers x 12 heads)"
    layers, heads = model_shape()
    return f"reduced BERT ({layers} layers x {heads} heads)"


def seeds_text(r: Runs) -> str:
    """Which rows have which seeds, as the plan runs them."""
    many = [k for k in r.rows if len(row_seeds(r.s, k)) > 1]
    seeds = ", ".join(map(str, r.s.seeds))
    if not many:
        return f"every row has one fine-tuning seed ({r.s.seeds[0]})"
    if len(many) == len(r.rows):
        return f"every row has seeds {seeds}"
    return (f"the rows {', '.join(many)} have seeds {seeds}; every other row has seed {r.s.seeds[0]} only "
            "(the tables' \"seeds\" column)")


def write_report(plan: Plan) -> Path:
    """``RUNS/aaa/report.md`` and ``report_fig2.png``; runs not yet finished are "-"."""
    from fairseq_local import outputs
    from .environment import environment
    from .plan import ROOT, step_timing
    from .report import environment_section, findings_section

    s, paper = SCALES[plan.scale], plan.scale == "paper"
    r = Runs(plan, s)
    png = fig2_png(r, plan.out / "report_fig2.png")
    timing = step_timing(plan.runs, [st.id for st in plan.steps])
    t3 = [(name, key, AAA_TABLE3[name]) for key, name in (("diag-fixed", "Fixed"), ("diag-task", "Task-adaptive"),
                                                            ("diag-task-layer", "Task & Layer-adaptive"))]
    full = (f"the full model given with `--bert {plan.bert}` (converted exactly with convert-hf; its rows "
            f"fine-tuned on GLUE prepared with its WordPiece), two models pretrained (Local2 + Global2, Local2 + "
            f"Global1 + Random1) whose comparison with the full model's rows is no longer one of a single "
            f"pretraining recipe" if plan.bert else
            "three models pretrained (full, Local2 + Global2, Local2 + Global1 + Random1)")
    data = (f"the BERT corpus and GLUE; {full} and a SparseBERT as the source of Table 3's fixed diagonal" if paper else
            "the stand-in corpus and the hard stand-in GLUE tasks; three reduced BERTs with segment embedding "
            "pretrained (full, Local2 + Global2, Local2 + Global1 + Random1), every other row fine-tuned from the "
            "full one with its layout")
    fixed_src = ("the pre-trained SparseBERT's mask" if paper else
                 "the task-adaptive diagonal learnt on the next task of the list (" +
                 ", ".join(f"{t} from {s.tasks[(i + 1) % len(s.tasks)]}" for i, t in enumerate(s.tasks)) + ")")
    text = "\n".join([
        f"{TITLE} at `{plan.scale}` scale", "",
        "Wang et al., \"Learning Adaptive Axis Attentions in Fine-tuning: Beyond Fixed Sparse Attention "
        f"Patterns\". Data: {data}. Tasks: {', '.join(s.tasks)}. "
        f"Made by `fairseq-local reproduce {PAPER} --scale {plan.scale}`.", "",
        f"Model: {model_name(r)}. " + ("Values on stand-in data cannot equal the paper's: what can repeat is "
                                         "the direction and size of each difference. " if not paper else "")
        + f"Seeds: {seeds_text(r)}. A difference between two rows has Welch's t interval over seeds where both "
        "have three or more, else a paired bootstrap over the dev examples of their first seed "
        "(`eval/predictions`). ρ: Eq. 9 on the dev sentences (%), from the validation that chose "
        "`checkpoint_best.pt`; comparisons \"at the same sparsity\" are made at that ρ, and the tables also give "
        f"each pattern's ρ at n = {AT_N} (SparseBERT's length; AAA's depends on the sentence). AAA's dev pattern "
        "keeps per sentence the round(Σ sigmoid(logit)) tokens of highest logit, the count its Gumbel samples "
        "keep on average in training.", "",
        environment_section(environment(ROOT), plan.seeds, timing, basis=BASIS),
        findings_section(findings(r)),
        target_line(r), "",
        "## Table 1: sparse pre-training against sparse fine-tuning only", "",
        "MNLI: mismatched accuracy, as the paper's column.", "",
        score_table(r, table1_lines(r), s.tasks, table1=True),
        "## Fig. 2: local against global pattern size", "",
        "The paper prints no values; fine-tuned from the full model.", "",
        fig2_md(r), *([f"![Fig. 2]({png.name})", ""] if png else []),
        "## Table 3: diagonal patterns of growing adaptiveness", "",
        f"Each with the first and last tokens' rows and columns (dam-s, SparseBERT §4.1). Fixed: {fixed_src}; "
        "the learned ones with Eq. 10's hinge on the DAM heads; dev ρ here (target); ρ at n = 128 from each "
        "row's exported mask (seed 1).", "",
        score_table(r, t3, s.tasks, targets=True),
        "## Table 4: AAA against fixed patterns at equal ρ", "",
        "AAA: axis OR Local2 (Eq. 11-12), trained by Eq. 10 to the fixed pattern's ρ; dev ρ here (target).", "",
        score_table(r, table4_lines(), s.tasks, targets=True),
        "## Table 5: AAA against patterns pre-trained with them", "",
        score_table(r, table5_lines(), s.tasks),
        "## Table 6: row and column tokens AAA selects", "",
        "Mean over the AAA runs of Table 4, in % of the real tokens.", "",
        table6_md(r),
    ])
    path = plan.out / "report.md"
    plan.out.mkdir(parents=True, exist_ok=True)
    outputs.write_text(path, text)
    return path


__all__ = ["Runs", "valid_stats", "write_report", "fig2_rows", "Row"]
