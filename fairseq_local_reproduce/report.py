"""What every reproduction report shares: values over seeds with their
spread, Markdown tables beside the paper's numbers, one verdict line per
finding, and the record of seeds and hardware.

Findings are decided by :mod:`.verdicts`: four verdicts, each resting on
a 95 % interval (over three seeds or more, else a bootstrap over sentences
or heads), with an equivalence test against a stated margin for every claim
of equality.
"""

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from .verdicts import (CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED, VERDICTS, Clause,  # noqa: F401
                       combine)


@dataclass(frozen=True)
class Values:
    """One measured quantity over seeds (the runs that finished)."""

    values: Sequence[float]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> Optional[float]:
        return statistics.fmean(self.values) if self.values else None

    @property
    def sd(self) -> Optional[float]:
        return statistics.stdev(self.values) if self.n > 1 else None

    def cell(self, digits: int = 2) -> str:
        """``mean ± sd (n)``; the value alone for one run; "-" for none."""
        if not self.values:
            return "-"
        if self.n == 1:
            return f"{self.values[0]:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.sd:.{digits}f} ({self.n})"


@dataclass(frozen=True)
class Finding:
    """One of a paper's findings and what the measurements say about it:
    one of the four :data:`~.verdicts.VERDICTS`, the deciding clause's
    estimate and 95 % interval (``"-"`` where none), and the evidence."""

    id: str
    text: str
    verdict: str
    evidence: str
    estimate: str = "-"

    def line(self) -> str:
        return f"- **{self.id}** {self.text} **{self.verdict}** {{{self.estimate}}}: {self.evidence}"


def decide(fid: str, text: str, clauses: Sequence[Clause], evidence: str = "") -> Finding:
    """A finding decided by :func:`~.verdicts.combine` over its clauses,
    every clause's test written into the evidence."""
    verdict, key = combine(clauses)
    est = key.estimate.text() if key is not None and key.estimate is not None else "-"
    tests = "; ".join(c.text() for c in clauses)
    return Finding(fid, text, verdict, f"{evidence}. Tests: {tests}" if evidence else f"Tests: {tests}", est)


def read_findings(text: str) -> List[Finding]:
    """The findings of a report's text: its :meth:`Finding.line` lines."""
    import re

    verdicts = "|".join(re.escape(v) for v in VERDICTS)
    pattern = re.compile(rf"^- \*\*(\S+)\*\* (.*) \*\*({verdicts})\*\* \{{(.*?)\}}: (.*)$")
    # a report written under the earlier two-way rule: its verdict is marked as such, never read as a new one
    legacy = re.compile(r"^- \*\*(\S+)\*\* (.*) \*\*(reproduced|not reproduced|not comparable)\*\*: (.*)$")
    out = []
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            out.append(Finding(m[1], m[2], m[3], m[5], m[4]))
        elif (m := legacy.match(line)):
            out.append(Finding(m[1], m[2], f"{m[3]} (earlier two-way rule)", m[4]))
    return out


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def paper_value(v: Optional[float], digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


BY_SPREAD = ("The findings below are decided on 95 % intervals: Welch's t over seeds where a row has three "
             "or more, else a bootstrap over sentences or heads, as each finding states.")


def environment_section(env: Dict[str, str], seeds: Sequence[int], timing: str, basis: str = BY_SPREAD) -> str:
    """Seeds, hardware and versions, and what repeats: a seed gives the same
    numbers again on this machine, not on another CPU (kernels sum in other
    orders), so findings rest on the spread over seeds (``basis``: how the
    findings are decided instead, for a paper without one)."""
    lines = ["## How these numbers were made", "",
             f"- Seeds: {', '.join(map(str, seeds))}.",
             f"- Hardware: {env['cpu']} ({env['cores']} cores, torch threads {env['threads']}, "
             f"OMP_NUM_THREADS {env['OMP_NUM_THREADS']}); GPU: {env['gpu']}.",
             f"- Software: torch {env['torch']}, fairseq-fixed {env['fairseq']}, Python {env['python']}, "
             f"commit {env['commit']}."]
    if timing != "-":
        lines.append(f"- Time of the runs (their stamps): {timing}.")
    lines += ["- A seed repeats exactly on one machine with the same thread count; on another CPU the "
              f"kernels sum in another order and the numbers move by about the spread over seeds. {basis}", ""]
    return "\n".join(lines)


def findings_section(findings: Sequence[Finding]) -> str:
    counts = {v: sum(f.verdict == v for f in findings) for v in VERDICTS}
    head = ", ".join(f"{n} {v}" for v, n in counts.items())
    return "\n".join(["## Findings", "", f"{len(findings)} findings: {head}.", ""]
                     + [f.line() for f in findings]) + "\n"


def read_json(path: Path) -> Optional[dict]:
    """A JSON object, or None when the file is missing or unreadable."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def glue_metric(path: Path, task: str, key: Optional[str] = None, set_name: Optional[str] = None) -> Optional[float]:
    """The task's metric in percent from ``glue evaluate``'s TASK.json (MNLI:
    matched, or the set ``set_name``, e.g. "MNLI-mm"): ``key``, or GLUE's own:
    CoLA MCC, MRPC and QQP F1, STS-B Spearman, else accuracy.  None when the
    file, the set or the metric is missing."""
    obj = read_json(path)
    sets = (obj or {}).get("sets")
    if not isinstance(sets, dict) or not sets:
        return None
    m = sets.get(set_name) if set_name else sets.get("MNLI-m" if task == "MNLI" else task) or next(iter(sets.values()))
    key = key or {"CoLA": "mcc", "STS-B": "spearman", "MRPC": "f1", "QQP": "f1"}.get(task, "accuracy")
    v = m.get(key) if isinstance(m, dict) else None
    return 100 * float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def bleu(path: Path) -> Optional[float]:
    """sacreBLEU's score from its JSON output."""
    obj = read_json(path)
    v = (obj or {}).get("score")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def collect(paths: Iterable[Path], read) -> Values:
    """The values ``read`` finds in ``paths`` (missing ones left out)."""
    out: List[float] = []
    for p in paths:
        v = read(p)
        if v is not None:
            out.append(v)
    return Values(tuple(out))
