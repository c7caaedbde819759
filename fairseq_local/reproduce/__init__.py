"""``fairseq-local reproduce``: each paper's experiments as a plan of runs
through the project's own scripts, at three scales, and a report that puts
every measured table beside the paper's numbers.

* :mod:`.plan`: a step (one command and its log), a plan, and the runner that
  skips finished steps and resumes interrupted ones.
* :mod:`.environment`: the seeds, hardware and library versions a report records.
* :mod:`.report`: tables, spreads over seeds, and one line per finding.
* one module per paper (:mod:`.pande`) with its scales, plan and report;
  its printed numbers are in :mod:`.numbers`.
"""

PAPERS = {"pande": "Pande et al.: local heads and Q/K tying (Tables 1-4, Figs. 1-3)",
          "sparsebert": "Shi et al. (SparseBERT): no diagonal, DAM vs fixed sparse masks (Tables 1, 3, Figs. 3, 6)"}
SCALES = ("tiny", "small", "paper")


def paper_module(paper: str):
    """The module of ``paper``: its ``build(scale, runs)`` and ``write_report(plan)``."""
    import importlib

    if paper not in PAPERS:
        raise KeyError(paper)
    return importlib.import_module(f"{__name__}.{paper}")
