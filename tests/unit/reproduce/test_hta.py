"""``reproduce hta`` (Pascual et al., Hidden Token Attribution): the plan at
every scale reuses Pande et al.'s very steps, and the report's findings on
hand-made hta.json results whose verdicts are known."""

import json
from pathlib import Path

import pytest

from fairseq_local_reproduce import hta, pande
from fairseq_local_reproduce import hta_report as rep
from fairseq_local_reproduce.plan import BUDGETS, dependencies, estimate
from fairseq_local_reproduce import hta_findings as fin
from fairseq_local_reproduce.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED


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
    assert _flag(pretrained, "--path").endswith(
        "pande/bert/roberta_local_base/checkpoint_last.pt" if scale == "paper" else f"models-{scale}/bert/base/checkpoint_last.pt")
    assert _flag(finetuned, "--path").endswith("pande/bert/roberta_local_base/glue-s1/MNLI/checkpoint_best.pt")
    assert _flag(finetuned, "--data").endswith("MNLI-bin")
    assert ("pande/bert/roberta_local_base/pretrain" if scale == "paper" else f"models-{scale}/bert/base/pretrain") \
        in needs["hta/analysis/bert-pairs"]
    assert "pande/bert/roberta_local_base/glue-s1/MNLI" in needs["hta/analysis/bert-mnli-pairs"]
    nmt = _step(plan, "hta/analysis/nmt-sentences")
    assert "--pairs" not in nmt.cmd and _flag(nmt.cmd, "--path").endswith(
        "wmt14_en-de/a/checkpoint_best.pt" if scale == "paper" else f"models-{scale}/nmt/a-s1/checkpoint_best.pt")
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
    for scale in ("tiny", "small"):
        assert round(estimate(hta.build(scale, tmp_path), 2)) <= BUDGETS[scale]["hta"]


@pytest.mark.parametrize("scale", ["tiny", "small"])
def test_cuda_plans_pass_no_cpu_flag(tmp_path, scale):
    """``device="cuda"``: the analyses run with ``--cuda``, no step says
    ``--cpu``, and the borrowed steps are Pande et al.'s CUDA steps."""
    plan = hta.build(scale, tmp_path, device="cuda")
    assert plan.device == "cuda"
    assert not any("--cpu" in s.cmd for s in plan.steps)
    for what in hta.MODELS:
        assert "--cuda" in _step(plan, f"hta/analysis/{what}").cmd
    theirs = {s.id: s for s in pande.build(scale, tmp_path, device="cuda").steps}
    assert all(s == theirs[s.id] for s in plan.steps if not s.id.startswith("hta/"))
    cpu = hta.build(scale, tmp_path)
    assert any("--cpu" in s.cmd for s in cpu.steps) and not any("--cuda" in s.cmd for s in cpu.steps
                                                                 if s.id.startswith("hta/"))


SPREAD = (-0.02, 0.0, 0.01, 0.02)  # the heads of a layer differ a little: intervals have a width


def _grid(*layers, spread=SPREAD):
    """[[value per head] per layer]: each layer's value plus the heads' spread."""
    return [[round(v + d, 4) for d in spread] for v in layers]


PEAK0 = [0.1, 0.2, 0.9, 0.2, 0.1]    # a histogram peaking at offset 0
FLAT0 = [0.3, 0.35, 0.4, 0.35, 0.3]  # a flatter one, still peaking at 0
FAR = [0.9, 0.2, 0.1, 0.2, 0.1]      # one peaking at offset -2
L12 = range(12)


def _result(**grids):
    """An hta.json of 12 layers x 4 heads as the paper describes BERT-base:
    local correlation high, input correlation falling with depth, attention
    from past to future, contribution near 0 and flatter, vertical heads,
    blocks in the first layers; ``grids`` replace keys."""
    r_in = [0.95, 0.8, 0.6, 0.45, 0.35, 0.3, 0.25, 0.2, 0.15, 0.12, 0.1, 0.08]
    s_in = [0.96, 0.85, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.18, 0.15]
    out = {"sentences": 10, "max_len": 3, "layers": 12, "heads": 4, "skipped": 1, "offsets": [-2, -1, 0, 1, 2],
           "attention_offset_counts": [8, 9, 10, 9, 8], "contribution_offset_counts": [8, 9, 10, 9, 8],
           "pearson_previous": _grid(*[0.95] * 12), "spearman_previous": _grid(*[0.975] * 12),
           "pearson_input": _grid(*r_in), "spearman_input": _grid(*s_in),
           "attention_centre_per_head": _grid(*[-1.5] * 4, *[0.8] * 4, *[1.5] * 4, spread=(-0.3, 0, 0.1, 0.2)),
           "contribution_centre_per_head": _grid(*[0.0] * 12, spread=(-0.1, 0, 0.05, 0.1)),
           "attention_histogram": [[PEAK0] * 4 for _ in L12], "contribution_histogram": [[FLAT0] * 4 for _ in L12],
           "attention_special": _grid(*[0.2] * 3, *[0.7] * 6, *[0.2] * 3),
           "contribution_special": _grid(*[0.15] * 12), "same_sentence_share": 0.5,
           "contribution_same_sentence": _grid(*[0.8] * 4, *[0.52] * 8, spread=(-0.01, 0, 0.005, 0.01))}
    for key in ("attention", "contribution"):
        out[f"{key}_centre"] = [sum(row) / len(row) for row in out[f"{key}_centre_per_head"]]
    out.update(grids)
    return out


def _found(**results):
    return {f.id: f for f in rep.findings(results)}


def test_findings_reproduced_on_paperlike_values():
    found = rep.findings({"bert-pairs": _result(), "bert-sentences": _result(), "nmt-sentences": None})
    assert [f.id for f in found] == [f"H{k}" for k in range(1, 10)]
    assert [f.verdict for f in found] == [REPRODUCED] * 8 + [NOT_COMPARABLE]  # H9: no German or Arabic BERT
    assert all("bootstrap over" in f.evidence or "Wilson" in f.evidence for f in found[:8])
    assert found[0].estimate == "share r > 0.7 = +1.00 [+1.00, +1.00] (counted: 48 of 48 heads; upper end Wilson's)"
    h2 = found[1].evidence
    assert "`bert-pairs` centre over layers 1-4" in h2 and "`bert-sentences` centre over layers 9-12" in h2
    assert "bert-mnli-pairs" in h2 and "not decided" in h2


def test_findings_contradicted():
    r = _result(pearson_previous=_grid(*[0.5] * 12), spearman_previous=_grid(*[0.6] * 12),
                pearson_input=_grid(*[0.2] * 4, *[0.5] * 4, *[0.8] * 4),
                spearman_input=_grid(*[0.9] * 12),
                attention_centre_per_head=_grid(*[1.0] * 4, *[0.5] * 4, *[-1.0] * 4),
                contribution_centre_per_head=_grid(*[3.0] * 12),
                contribution_histogram=[[FAR] * 4 for _ in L12], attention_histogram=[[FLAT0] * 4 for _ in L12],
                contribution_special=_grid(*[0.7] * 12),
                contribution_same_sentence=_grid(*[0.4] * 4, *[0.7] * 8))
    found = {f.id: f.verdict for f in rep.findings({"bert-pairs": r, "bert-sentences": r})}
    assert found == {**{f"H{k}": CONTRADICTED for k in range(1, 9)}, "H9": NOT_COMPARABLE}


def test_h1_thresholds_are_shares_of_heads():
    """"All but two of the 144 heads": at least 142/144 of the heads.  One
    head of 16 below cannot tell; half of them below excludes the claim."""
    one = _result(pearson_previous=[[0.6, 0.95, 0.95, 0.95]] + [[0.95] * 4] * 3, spearman_previous=_grid(*[0.97] * 4))
    h1 = fin.fig1_finding(one)
    assert h1.verdict == INCONCLUSIVE and "share r > 0.7 = +0.94" in h1.estimate
    assert "all but 0.22 of these 16" in h1.evidence
    half = _result(pearson_previous=[[0.6, 0.6, 0.95, 0.95]] * 4, spearman_previous=_grid(*[0.97] * 4))
    assert fin.fig1_finding(half).verdict == CONTRADICTED


def test_h2_is_decided_per_comparable_analysis():
    """H2 holds on every analysis of the pretrained model or not at all; a
    centre of -0.01 whose heads spread on both sides of 0 cannot tell; the
    fine-tuned and the translation model are shown, not decided."""
    good, flat = _result(), _result(attention_centre_per_head=_grid(*[-0.01] * 4, *[0.8] * 8,
                                                                   spread=(-0.3, 0, 0.1, 0.2)))
    wrong = _result(attention_centre_per_head=_grid(*[-1.5] * 4, *[-0.5] * 8))
    assert fin.centre_finding({"bert-pairs": good, "bert-sentences": good}).verdict == REPRODUCED
    h2 = fin.centre_finding({"bert-pairs": flat, "bert-sentences": good})
    assert h2.verdict == INCONCLUSIVE and "`bert-pairs` centre over layers 1-4 = -0.01" in h2.estimate
    assert fin.centre_finding({"bert-pairs": good, "bert-sentences": wrong}).verdict == CONTRADICTED
    shown = fin.centre_finding({"bert-pairs": good, "bert-sentences": good, "bert-mnli-pairs": wrong,
                                "nmt-sentences": wrong})
    assert shown.verdict == REPRODUCED and "fine-tuned on MNLI" in shown.evidence
    assert fin.centre_finding({"bert-pairs": good}).verdict == NOT_COMPARABLE  # bert-sentences not run yet


def test_h4_layer_three_of_twelve_is_not_comparable_at_four_layers():
    """Layer 3 of 12 falls on layer 1 of 4, where the input contribution is
    the previous-layer one: that clause is not comparable there."""
    r = _result(pearson_input=_grid(0.95, 0.4, 0.2, 0.1), spearman_input=_grid(0.95, 0.5, 0.3, 0.1))
    h4 = fin.depth_finding(r)
    assert h4.verdict == NOT_COMPARABLE and "layer 1 of 4" in h4.evidence and "e^0 is layer 1's input" in h4.evidence
    assert fin.depth_finding(_result()).verdict == REPRODUCED  # 12 layers: layer 3


def test_h7_needs_vertical_heads():
    h7 = fin.special_finding(_result(attention_special=_grid(*[0.2] * 12)))
    assert h7.verdict == NOT_COMPARABLE and "too few vertical heads" in h7.evidence


def test_findings_without_results_or_keys():
    assert [f.verdict for f in rep.findings({})] == [NOT_COMPARABLE] * 9
    r = _result()
    for key in ("attention_special", "contribution_special", "contribution_same_sentence", "same_sentence_share"):
        del r[key]  # a result written before analyze hta had these keys
    verdicts = {f.id: f.verdict for f in rep.findings({"bert-pairs": r, "bert-sentences": r})}
    assert verdicts["H7"] == verdicts["H8"] == NOT_COMPARABLE and verdicts["H1"] == REPRODUCED
    for key in ("pearson_input", "spearman_input", "contribution_centre_per_head", "contribution_histogram"):
        r[key] = None  # --no-input
    verdicts = {f.id: f.verdict for f in rep.findings({"bert-pairs": r, "bert-sentences": r})}
    assert [verdicts[k] for k in ("H1", "H2", "H3", "H4", "H5", "H6")] == [
        REPRODUCED, REPRODUCED, NOT_COMPARABLE, NOT_COMPARABLE, NOT_COMPARABLE, NOT_COMPARABLE]


def test_thirds_follow_the_papers_four_of_twelve():
    assert rep.thirds(12) == ([0, 1, 2, 3], [8, 9, 10, 11])
    assert rep.thirds(4) == ([0], [3]) and rep.thirds(6) == ([0, 1], [4, 5])


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def test_report_from_finished_steps(tmp_path, monkeypatch):
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = hta.build("tiny", tmp_path)
    for what in ("bert-pairs", "bert-sentences"):
        _write(hta.analysis_dir(plan, what) / "hta.json", _result())
    _write(hta.analysis_dir(plan, "nmt-sentences") / "hta.json",
           _result(layers=1, pearson_previous=[[0.5] * 4], spearman_previous=[[0.9] * 4]))
    png = hta.analysis_dir(plan, "bert-pairs") / "hta_previous.png"
    png.write_bytes(b"\x89PNG")
    (hta.examples_dir(plan, "bert-pairs") / "hta_example_1.png").parent.mkdir(parents=True)
    (hta.examples_dir(plan, "bert-pairs") / "hta_example_1.png").write_bytes(b"\x89PNG")
    text = rep.write_report(plan).read_text()
    assert text.startswith(hta.TITLE + " at `tiny` scale")
    assert "9 findings: 8 reproduced, 0 contradicted, 0 inconclusive, 1 not comparable." in text
    assert "](analysis/bert-pairs/hta_previous.png)" in text  # relative to RUNS/hta
    assert "](analysis/bert-pairs-examples/hta_example_1.png)" in text
    assert "](figures/bert-pairs.png)" in text and "](figures/bert-sentences.png)" in text
    assert "figures/bert-mnli-pairs.png" not in text  # nothing to draw
    assert "hta_example_0.png" not in text and "hta_input.png" not in text  # only the figures made
    assert "| 1 | 0.95 | 0.98 | 0.95 | 0.96 | -1.50 | +0.01 |" in text  # per layer, from 1
    assert "| bert-pairs | 10 | 1 | 12 x 4 | 100 % | 100 % | 100 % | 100 % |" in text
    assert "| nmt-sentences | 10 | 1 | 1 x 4 | 0 % | 0 % | 0 % | 0 % |" in text
    assert "| bert-mnli-pairs | - | - | - | - | - | - | - |" in text
    assert "RoBERTa 12 layers x 4 heads" in text and "bootstrap over the heads" in text


def test_report_figures_name_the_model_and_scale_and_count_layers_from_1(tmp_path, monkeypatch):
    from fairseq_local import outputs

    drawn = {}
    monkeypatch.setattr(outputs, "save_figure", lambda fig, path, **kw: drawn.__setitem__(Path(path).name, fig))
    plan = hta.build("small", tmp_path)
    assert rep.plot_layers(plan, "bert-pairs", _result()) == rep.figure_path(plan, "bert-pairs")
    fig = drawn["bert-pairs.png"]
    title = fig._suptitle.get_text()
    assert "pretrained RoBERTa, MNLI pairs" in title and "12 layers x 4 heads" in title and "small scale" in title
    for ax in fig.axes:
        assert list(ax.get_xticks()) == list(range(1, 13))
        points = [x for line in ax.lines if line.get_marker() == "o" for x in line.get_xdata()]
        assert points and 0.5 < min(points) < 1.5 and 11.5 < max(points) < 12.5  # layer k drawn at k
    assert rep.plot_layers(plan, "bert-pairs", None) is None


def test_report_with_nothing_finished(tmp_path, monkeypatch):
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    for scale in ("tiny", "paper"):
        text = rep.write_report(hta.build(scale, tmp_path / scale)).read_text()
        assert "9 findings: 0 reproduced, 0 contradicted, 0 inconclusive, 9 not comparable." in text
        assert "![" not in text


def test_paper_scale_analyses_a_given_bert_instead_of_pretraining_one(tmp_path, monkeypatch, capsys):
    """--bert HF_DIR: converted (convert-hf), its own WordPiece MNLI and
    fine-tuning; no BERT pretraining, corpus or GPT-2 GLUE step; the NMT
    steps are still Pande et al.'s; the report names the model."""
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = hta.build("paper", tmp_path, bert="/models/bert-base-uncased")
    ids = [s.id for s in plan.steps]
    assert ids[:5] == ["data-paper/wmt14_en-de", "pande/wmt14_en-de/a/train", "hta/bert-given/convert",
                       "hta/bert-given/glue", "hta/bert-given/glue-s1/MNLI"]
    assert not any("pretrain" in i or "bert-corpus" in i or i == "data-paper/glue" for i in ids)
    convert, glue, ft = (_step(plan, i).cmd for i in ids[2:5])
    folder = tmp_path / "hta" / "bert-given"
    assert convert == ("fairseq-local", "convert-hf", "/models/bert-base-uncased", str(folder))
    assert _flag(glue, "--bpe") == "wordpiece" and _flag(glue, "--src-dict") == str(folder / "dict.txt")
    assert _flag(ft, "--checkpoint") == str(folder / "model.pt") and "--arch" not in ft
    for what in ("bert-pairs", "bert-sentences"):
        cmd = _step(plan, f"hta/analysis/{what}").cmd
        assert _flag(cmd, "--path") == str(folder / "model.pt") and _flag(cmd, "--bpe") == "wordpiece"
    mnli = _step(plan, "hta/analysis/bert-mnli-pairs").cmd
    assert _flag(mnli, "--path") == str(tmp_path / "hta" / "glue-given-s1" / "MNLI" / "checkpoint_best.pt")
    assert _flag(mnli, "--data") == str(tmp_path / "hta" / "glue-given" / "MNLI-bin")
    deps = dependencies(plan.steps)
    assert {"hta/bert-given/convert", "hta/bert-given/glue"} <= deps["hta/bert-given/glue-s1/MNLI"]
    assert "hta/bert-given/glue-s1/MNLI" in deps["hta/analysis/bert-mnli-pairs"]
    assert "hta/bert-given/convert" in deps["hta/analysis/bert-pairs"]
    text = rep.write_report(plan).read_text()
    assert "`--bert /models/bert-base-uncased`, converted exactly" in text and "Pande et al.'s pretraining" not in text
    assert "the given BERT-base, MNLI dev-matched pairs" in text
    with pytest.raises(ValueError, match="the tiny scale analyses the reduced models"):
        hta.build("tiny", tmp_path, bert="/models/bert-base-uncased")


def test_bert_option_is_checked_before_the_plan(tmp_path, capsys):
    from fairseq_local_cli.main import main as cli

    from helpers.hf import save_model

    small = save_model(str(tmp_path / "small"), "BertModel")  # 2 x 4: fine for hta, not for the 12 x 12 layouts
    for argv, folder, message in (
            (["sparsebert", "--scale", "paper"], "nothing", "read by 'reproduce hta|aaa|pande --scale paper' only"),
            (["hta", "--scale", "tiny"], "nothing", "the reduced scales keep their reduced models"),
            (["hta", "--scale", "paper"], "nothing", "is not a local folder"),
            (["aaa", "--scale", "paper"], small, "has 2 layers x 4 heads: the aaa plan's layouts are BERT-base's")):
        try:
            code = cli(["reproduce", *argv, "--bert", str(tmp_path / folder), "--runs", str(tmp_path / "r"),
                        "--dry-run"])
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err
        assert code != 0 and len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "r").exists()
    assert cli(["reproduce", "hta", "--scale", "paper", "--bert", small, "--runs", str(tmp_path / "r"),
                "--dry-run"]) == 0
    assert "fairseq-local convert-hf " + small in capsys.readouterr().out
