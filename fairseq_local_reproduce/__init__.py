"""``fairseq-local reproduce``: each paper's experiments as a plan of runs
through the project's own scripts, at three scales, and a report that puts
every measured table beside the paper's numbers.

* :mod:`.plan`: a step (one command and its log), a plan, and the runner that
  skips finished steps and resumes interrupted ones.
* :mod:`.environment`: the seeds, hardware and library versions a report records.
* :mod:`.report`: tables, spreads over seeds, and one line per finding.
* per paper a plan module (:mod:`.pande`, :mod:`.sparsebert`, :mod:`.voita`, :mod:`.aaa`, :mod:`.hta`:
  scales and steps) and a report module (:mod:`.pande_report`, ...), which
  reads the plan module, never the other way; the papers' printed numbers
  are in :mod:`.numbers` (Pande, SparseBERT, Wang), :mod:`.numbers_voita` and :mod:`.numbers_hta`.
"""

PAPERS = {"pande": "Pande et al.: local heads and Q/K tying (Tables 1-4, Figs. 1-3)",
          "sparsebert": "Shi et al. (SparseBERT): no diagonal, DAM vs fixed sparse masks (Tables 1, 3, Figs. 3, 6)",
          "voita": "Voita et al.: head roles, importance and pruning (Figs. 1, 7, 8, §8)",
          "aaa": "Wang et al. (Adaptive Axis Attention): sparse fine-tuning, local/global, AAA (Tables 1, 3-6, Fig. 2)",
          "hta": "Pascual et al. (Hidden Token Attribution): attention against contribution (Figs. 1-7)"}
SCALES = ("tiny", "small", "paper")


def paper_module(paper: str, part: str = "plan"):
    """The module of ``paper``'s plan (``build(scale, runs)``, ``TITLE``) or,
    with ``part="report"``, of its report (``write_report(plan)``)."""
    import importlib

    if paper not in PAPERS or part not in ("plan", "report"):
        raise KeyError(paper)
    return importlib.import_module(f"{__name__}.{paper}" + ("_report" if part == "report" else ""))
