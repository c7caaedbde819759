"""``reproduce hta`` (Pascual et al., Hidden Token Attribution): the plan at
every scale reuses Pande et al.'s very steps, and the report's findings on
hand-made hta.json results whose verdicts are known."""

import json
from pathlib import Path

import pytest

from fairseq_local.reproduce import hta, pande
from fairseq_local.reproduce import hta_report as rep
from fairseq_local.reproduce.plan import dependencies, estimate
from fairseq_local.reproduce.report import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED


def _flag(cmd, name):
    return cmd[cmd.index(name) + 1]


def _step(plan, sid):
    return next(s for s in plan.steps if s.id == sid)


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_every_experiment_is_planned(tmp_path, scale):
    plan = hta.build(scale, tmp_path)
    ids = [s.id for s in plan.steps]
    assert len(ids) == len(set(ids))
    mine = [f"hta/analysis/{w}" for w in hta.MODELS] + [f"hta/examples/{w}" for w in hta.PAIR_MODELS] + ["hta/centres"]
    assert set(mine) <= set(ids)
    needs = dependencies(plan.steps)
    s = hta.SCALES[scale]
    for what in hta.MODELS:
        cmd = _step(plan, f"hta/analysis/{what}").cmd
        assert cmd[1:3] == ("analyze", "hta") and _flag(cmd, "--out") == str(hta.analysis_dir(plan, what))
        assert _flag(cmd, "--max-len") == str(hta.MAX_LEN)  # §5: at most 64 tokens
        assert ("--cuda" in cmd) == (scale == "paper")
    # the pair analyses read MNLI dev-matched with GLUE's columns, both models the same pairs
    pretrained, finetuned = (_step(plan, f"hta/analysis/{w}").cmd for w in hta.PAIR_MODELS)
    for cmd in (pretrained, finetuned):
        assert _flag(cmd, "--pairs").endswith("MNLI/dev_matched.tsv") and _flag(cmd, "--columns") == "sentence1,sentence2"
        assert _flag(cmd, "--max-sentences") == str(s.pairs)
    assert _flag(pretrained, "--pairs") == _flag(finetuned, "--pairs")
    assert _flag(pretrained, "--path").endswith("pande/bert/roberta_local_base/checkpoint_last.pt")
    assert _flag(finetuned, "--path").endswith("pande/bert/roberta_local_base/glue-s1/MNLI/checkpoint_best.pt")
    assert _flag(finetuned, "--data").endswith("MNLI-bin")
    assert "pande/bert/roberta_local_base/pretrain" in needs["hta/analysis/bert-pairs"]
    assert "pande/bert/roberta_local_base/glue-s1/MNLI" in needs["hta/analysis/bert-mnli-pairs"]
    nmt = _step(plan, "hta/analysis/nmt-sentences")
    assert "--pairs" not in nmt.cmd and _flag(nmt.cmd, "--path").endswith(
        "wmt14_en-de/a/checkpoint_best.pt" if scale == "paper" else "pande/nmt/a-s1/checkpoint_last.pt")
    for what in hta.PAIR_MODELS:  # Fig. 7: the first pairs, drawn whatever their length
        ex = _step(plan, f"hta/examples/{what}").cmd
        assert _flag(ex, "--examples") == ",".join(map(str, s.examples))
        assert int(_flag(ex, "--max-sentences")) == max(s.examples) + 1 and _flag(ex, "--max-len") == "512"
    centres = _step(plan, "hta/centres")
    assert centres.cmd[1:3] == ("analyze", "table") and _flag(centres.cmd, "--centres") == str(hta.centres_png(plan))
    assert {f"hta/analysis/{w}" for w in hta.MODELS} <= needs["hta/centres"]


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_shared_steps_are_pandes_very_steps(tmp_path, scale):
    plan, theirs = hta.build(scale, tmp_path), pande.build(scale, tmp_path)
    by_id = {s.id: s for s in theirs.steps}
    borrowed = [s for s in plan.steps if not s.id.startswith("hta/")]
    assert {s.id for s in borrowed} >= set(hta.pande_step_ids(scale))
    for s in borrowed:
        assert s == by_id[s.id]  # same id, command and estimate: a second paper skips it
    if scale != "paper":
        assert [s.id for s in borrowed if s.id.startswith("data-")] == [s.id for s in theirs.steps
                                                                         if s.id.startswith(f"data-{scale}/")]
        single = _step(plan, "hta/analysis/bert-sentences").cmd
        assert _flag(single, "--conllu").endswith("bert-standins/standin-sentences.conllu")
        assert f"data-{scale}/bert-standins" in dependencies(plan.steps)["hta/analysis/bert-sentences"]
    else:
        assert plan.minutes() is None


def test_reduced_plans_fit_their_budgets(tmp_path):
    assert estimate(hta.build("tiny", tmp_path), 2) <= 45
    assert estimate(hta.build("small", tmp_path), 2) <= 180


def _result(pp, sp, pi, si, att, con, hist=None, **extra):
    """An hta.json: per-head grids (layers x heads) and per-layer centres."""
    layers, heads = len(pp), len(pp[0])
    out = {"sentences": 10, "max_len": 5, "layers": layers, "heads": heads, "skipped": 1,
           "pearson_previous": pp, "spearman_previous": sp, "pearson_input": pi, "spearman_input": si,
           "offsets": [-2, -1, 0, 1, 2], "attention_centre": att, "contribution_centre": con,
           "attention_histogram": hist, "contribution_histogram": hist}
    out.update(extra)
    return out


def _grid(*layers, heads=4):
    return [[v] * heads for v in layers]


PEAK0 = [0.1, 0.2, 0.9, 0.2, 0.1]   # a histogram peaking at offset 0
FAR = [0.9, 0.2, 0.1, 0.2, 0.1]     # one peaking at offset -2


def _paperlike():
    """As the paper: high local correlation, input correlation falling with
    depth, attention centre from past to future, contribution near 0."""
    return _result(_grid(0.9, 0.9, 0.9, 0.88), _grid(0.97, 0.96, 0.96, 0.95), _grid(0.9, 0.6, 0.4, 0.2),
                   _grid(0.9, 0.7, 0.5, 0.3), [-1.5, -0.5, 0.8, 1.6], [-0.4, -0.1, 0.1, 0.2],
                   [[PEAK0] * 4] * 4, attention_special=_grid(0.1, 0.7, 0.8, 0.2),
                   contribution_special=_grid(0.1, 0.15, 0.2, 0.1), contribution_same_sentence=_grid(0.8, 0.7, 0.6, 0.55),
                   same_sentence_share=0.5)


def test_findings_reproduced_on_paperlike_values():
    found = rep.findings({"bert-pairs": _paperlike(), "nmt-sentences": None})
    assert [f.id for f in found] == [f"H{k}" for k in range(1, 10)]
    assert [f.verdict for f in found] == [REPRODUCED] * 8 + [NOT_COMPARABLE]  # H9: no German or Arabic BERT
    assert "100 % of 16 heads have r > 0.7" in found[0].evidence
    assert "r 0.90 / 0.20" in found[3].evidence


def test_findings_not_reproduced():
    r = _result(_grid(0.5, 0.5, 0.5, 0.5), _grid(0.97, 0.96, 0.96, 0.95), _grid(0.5, 0.5, 0.45, 0.45),
                _grid(0.6, 0.6, 0.6, 0.6), [1.0, 0.5, -0.2, -0.5], [2.0, 1.5, 1.0, 1.0], [[FAR] * 4] * 4,
                attention_special=_grid(0.9, 0.9, 0.1, 0.1), contribution_special=_grid(0.8, 0.8, 0.1, 0.1),
                contribution_same_sentence=_grid(0.5, 0.5, 0.5, 0.5), same_sentence_share=0.5)
    found = {f.id: f.verdict for f in rep.findings({"bert-pairs": r})}
    assert found == {"H1": NOT_REPRODUCED, "H2": NOT_REPRODUCED, "H3": NOT_REPRODUCED, "H4": NOT_REPRODUCED,
                     "H5": NOT_REPRODUCED, "H6": NOT_REPRODUCED, "H7": NOT_REPRODUCED, "H8": NOT_REPRODUCED,
                     "H9": NOT_COMPARABLE}
    # no vertical head at all: H7 not reproduced, saying so
    r["attention_special"] = _grid(0.1, 0.2, 0.1, 0.1)
    h7 = rep.special_finding(r)
    assert h7.verdict == NOT_REPRODUCED and "no head puts 50 %" in h7.evidence


def test_findings_without_results_or_keys():
    assert [f.verdict for f in rep.findings({})] == [NOT_COMPARABLE] * 9
    r = _paperlike()
    for key in ("attention_special", "contribution_special", "contribution_same_sentence", "same_sentence_share"):
        del r[key]  # a result written before analyze hta had these keys
    verdicts = {f.id: f.verdict for f in rep.findings({"bert-pairs": r})}
    assert verdicts["H7"] == verdicts["H8"] == NOT_COMPARABLE and verdicts["H1"] == REPRODUCED
    r["pearson_input"] = r["spearman_input"] = r["contribution_centre"] = r["contribution_histogram"] = None  # --no-input
    verdicts = {f.id: f.verdict for f in rep.findings({"bert-pairs": r})}
    assert [verdicts[k] for k in ("H1", "H2", "H3", "H4", "H5", "H6")] == [
        REPRODUCED, REPRODUCED, NOT_COMPARABLE, NOT_COMPARABLE, NOT_COMPARABLE, NOT_COMPARABLE]


def test_thirds_follow_the_papers_four_of_twelve():
    assert rep.thirds(12) == ([0, 1, 2, 3], [8, 9, 10, 11])
    assert rep.thirds(4) == ([0], [3]) and rep.thirds(6) == ([0, 1], [4, 5])


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def test_report_from_finished_steps(tmp_path, monkeypatch):
    from fairseq_local.reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = hta.build("tiny", tmp_path)
    _write(hta.analysis_dir(plan, "bert-pairs") / "hta.json", _paperlike())
    _write(hta.analysis_dir(plan, "nmt-sentences") / "hta.json",
           _result(_grid(0.5), _grid(0.9), _grid(0.4), _grid(0.8), [0.5], [0.1]))
    png = hta.analysis_dir(plan, "bert-pairs") / "hta_previous.png"
    png.write_bytes(b"\x89PNG")
    (hta.examples_dir(plan, "bert-pairs") / "hta_example_1.png").parent.mkdir(parents=True)
    (hta.examples_dir(plan, "bert-pairs") / "hta_example_1.png").write_bytes(b"\x89PNG")
    text = rep.write_report(plan).read_text()
    assert text.startswith(hta.TITLE + " at `tiny` scale")
    assert "9 findings: 8 reproduced, 0 not reproduced, 1 not comparable." in text
    assert "](analysis/bert-pairs/hta_previous.png)" in text  # relative to RUNS/hta
    assert "](analysis/bert-pairs-examples/hta_example_1.png)" in text
    assert "hta_example_0.png" not in text and "hta_input.png" not in text  # only the figures made
    assert "| 1 | 0.90 | 0.97 | 0.90 | 0.90 | -1.50 | -0.40 |" in text  # per layer, from 1
    assert "| bert-pairs | 10 | 1 | 4 x 4 | 100 % | 100 % | 100 % | 75 % |" in text
    assert "| nmt-sentences | 10 | 1 | 1 x 4 | 0 % | 0 % | 0 % | 0 % |" in text
    assert "| bert-sentences | - | - | - | - | - | - | - |" in text


def test_report_with_nothing_finished(tmp_path, monkeypatch):
    from fairseq_local.reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    for scale in ("tiny", "paper"):
        text = rep.write_report(hta.build(scale, tmp_path / scale)).read_text()
        assert "9 findings: 0 reproduced, 0 not reproduced, 9 not comparable." in text
        assert "![" not in text
