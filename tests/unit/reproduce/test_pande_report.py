"""The Pande report against fixture runs: hand-written BLEU, hypotheses,
GLUE metrics, per-example predictions and analysis files whose findings are
known; its tables, figures and the P1–P6 tests."""

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pytest

from fairseq_local_reproduce import pande
from fairseq_local_reproduce import pande_analysis as pa
from fairseq_local_reproduce import pande_report as rep
from fairseq_local_reproduce.report import Values
from fairseq_local_reproduce.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))


def _glue(path: Path, task: str, acc: float) -> None:
    name = "MNLI-m" if task == "MNLI" else task
    _write(path, {"sets": {name: {"accuracy": acc / 100, "majority": 0.5, "n": 100}}})


BLEU = {"a": (50.0, 51.0, 52.0), "b": (51.5,), "c": (50.5,), "d": (49.9,), "e": (51.2,), "f": (52.5,),
        "g": (50.2,), "h": (47.0,), "i": (51.0,), "j": (50.8,), "k": (51.1,), "l": (50.0,)}
ACC = {"roberta_local_base": {"QQP": (80, 81, 82), "SST-2": (85, 86, 87), "MNLI": (75, 76, 77), "QNLI": (78, 79, 80)},
       "roberta_band2": {"QQP": 79, "SST-2": 84, "MNLI": 73, "QNLI": 77},
       "roberta_band6": {"QQP": 80, "SST-2": 85, "MNLI": 74, "QNLI": 78},
       "roberta_band6_all_tied": {"QQP": 70, "SST-2": 75, "MNLI": 60, "QNLI": 62},
       "roberta_band6_132_tied": {"QQP": 75, "SST-2": 80, "MNLI": 66, "QNLI": 70},
       "roberta_band6_120_tied": {"QQP": 80, "SST-2": 85.5, "MNLI": 74, "QNLI": 78}}
# 3 layers of 4 heads: layers 1-2 local, a few syntactic heads
BIAS = {"local": [[4.0, 3.5, 3.6, 1.0], [3.2, 3.4, 1.0, None], [0.5, 1.2, 1.1, 0.9]],
        "syntactic": [[1.5, 0.8, 1.0, 1.0], [1.1, 1.0, 0.9, 1.1], [0.9, 1.1, 3.2, 1.0]], "sentences": 10}


def _sensitivity(n=30, seed=0):
    rng = np.random.default_rng(seed)
    out = {k: [list(rng.uniform(lo, lo + 0.5, n)) for _ in range(3)]
           for k, lo in (("local", 3.0), ("syntactic", 1.0), ("unrelated", 0.1))}
    out["syntactic"][0][0] = None  # a sentence without non-local syntax
    return {**out, "sentences": n}


@pytest.fixture
def runs(tmp_path, monkeypatch):
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = pande.build("tiny", tmp_path)
    for letter, values in BLEU.items():
        for seed, v in zip((1, 2, 3), values):
            _write(pande.nmt_run(plan, letter, seed) / "test.bleu.json", {"name": "BLEU", "score": v})
    for arch, tasks in ACC.items():
        for task, v in tasks.items():
            for seed, x in zip((1, 2, 3), v if isinstance(v, tuple) else (v,)):
                _glue(pande.ft_dir(plan, arch, seed) / "eval" / f"{task}.json", task, x)
    for what in pande.analysed("tiny"):
        _write(pande.analysis_dir(plan, what) / "bias.json", BIAS)
        _write(pande.analysis_dir(plan, what) / "sensitivity.json", _sensitivity())
    return plan


def test_values_over_seeds():
    a, b = Values((50.0, 51.0, 52.0)), Values((47.0,))
    assert a.mean == 51.0 and a.sd == 1.0 and a.cell() == "51.00 ± 1.00 (3)" and b.cell(1) == "47.0"
    assert Values(()).cell() == "-"


def test_analysis_findings(runs):
    dirs = {"NMT": pande.analysis_dir(runs, "nmt"), "BERT/QQP": pande.analysis_dir(runs, "bert-QQP")}
    f = {x.id: x for x in rep.analysis_findings(dirs)}
    assert f["P1"].verdict == REPRODUCED and "bootstrap over 30 sentences" in f["P1"].estimate
    assert "layer 1 " in f["P1"].evidence and "layer 0" not in f["P1"].evidence
    assert f["P2"].verdict == REPRODUCED  # γ_U/γ_L about 0.1 in every layer
    # 12 heads cannot tell 7 local from 5 syntactic above 1: the interval says how little they can
    assert f["P3"].verdict == INCONCLUSIVE and "+0.17 [-0.17, +0.50] (bootstrap over 12 heads)" in f["P3"].estimate
    # 5 of 12 heads above 3 (0.42), interval [0.17, 0.67] across a quarter: 0 to 2 of the 2 models needed
    assert f["P4"].verdict == INCONCLUSIVE and "at least 2 of 2 models" in f["P4"].evidence
    assert f["P4"].estimate.startswith("models above a quarter = +2.00 [+0.00, +2.00]")
    assert "NMT: 3 2 0" in f["P5"].evidence  # layer 1 first
    assert "fewer in later layers: NMT: share above 3, layers 1–1 − layers 3–3" in f["P5"].evidence
    assert f["P6"].verdict == INCONCLUSIVE  # 0.33 [0.00, 0.67]: zero is in the interval
    weak = {"local": [[1.5, 2.0], [1.2, 1.0]], "syntactic": [[1.1, 0.8], [0.5, 1.0]], "sentences": 3}
    _write(pande.analysis_dir(runs, "nmt") / "bias.json", weak)
    f = {x.id: x for x in rep.analysis_findings({"NMT": pande.analysis_dir(runs, "nmt")})}
    assert f["P4"].verdict == INCONCLUSIVE  # no head of 4 above 3: Wilson's [0, 0.49] cannot exclude a quarter
    assert f["P5"].verdict == f["P6"].verdict == NOT_COMPARABLE and "no head above 3" in f["P6"].evidence
    flat = {k: [[1.0] * 30] * 3 for k in ("local", "syntactic", "unrelated")}
    _write(pande.analysis_dir(runs, "nmt") / "sensitivity.json", {**flat, "sentences": 30})
    f = {x.id: x for x in rep.analysis_findings({"NMT": pande.analysis_dir(runs, "nmt")})}
    assert f["P1"].verdict == CONTRADICTED and f["P2"].verdict == CONTRADICTED


def test_p4_counts_models_with_their_intervals():
    from fairseq_local_reproduce.verdicts import Clause, Estimate

    def c(v):
        return Clause(v, "x", Estimate(0.3, 0.2, 0.4, "b"))

    assert pa.most_models([c(REPRODUCED)] * 4 + [c(CONTRADICTED)] * 2).verdict == REPRODUCED
    assert pa.most_models([c(REPRODUCED)] * 3 + [c(INCONCLUSIVE)] + [c(CONTRADICTED)] * 2).verdict == INCONCLUSIVE
    assert pa.most_models([c(REPRODUCED)] * 3 + [c(CONTRADICTED)] * 3).verdict == CONTRADICTED


def test_tables_and_report(runs):
    bleus = {x: Values(v) for x, v in BLEU.items()}
    seeds = {x: (1, 2, 3) if x == "a" else (1,) for x in BLEU}
    nmt = rep.nmt_table(bleus, {"a": 6_291_456}, seeds)
    assert "| (a) Baseline | 1 | 1, 2, 3 | 6,291,456 | 6,291,456 | 51.00 ± 1.00 (3) | +0.00 | 30.01 |" in nmt
    assert "| (h) 2LocHeads 6TiedLoc All6 | 2 | 1 | - | 3,932,160 | 47.00 | -4.00 | 30.12 | +0.11 | 28.57 | -0.52 |" in nmt
    line = ("| valid | epoch {:03d} | valid on 'valid' subset | loss {} | nll_loss 2.0 | ppl 4.0 | "
            "num_updates {}\n")
    losses = [4.0 - 0.1 * k for k in range(11)] + [3.0] * 10  # flat over the last 10 epochs
    (pande.nmt_run(runs, "a", 1) / "train.log").write_text(
        "".join(line.format(k + 1, x, 100 * (k + 1)) for k, x in enumerate(losses)) + "done training in 9.0 seconds\n")
    (pande.nmt_run(runs, "f", 1) / "train.log").write_text(line.format(1, 5.0, 600) + "done training in 9 seconds\n")
    path = rep.write_report(runs)
    text = path.read_text()
    stops = next(x for x in text.splitlines() if "How each training ended:" in x)
    assert "How each training ended: (a) s1: 2,100 updates, best dev loss 3, -0.0 % over the last 10 epochs (plateau)" in stops
    assert "(f) s1" not in stops  # tiny runs (a) only: the others' clauses say so
    assert "Configurations run at this scale: (a);" in text
    assert "Rows run at this scale: BERT-base, All Band2 Untied, All Band6 Untied;" in text
    assert "| All Band6 AllTied | - | - |" in text  # a row tiny does not run: empty, though the folder has results
    assert "(b) drops at most 0.14 below (a): not comparable ((b) is not run at this scale)" in text
    assert "| All Band2 Untied | 1 | - | 96.1 | 79.0 | 90.05 |" in text  # band-2 at n = 128: 1 - 634/128^2
    assert "| BERT-base | 1, 2, 3 | - | 0.0 | 81.0 ± 1.0 (3) | 90.90 |" in text
    assert "Seeds per row: (a) and BERT-base 1, 2, 3; every other row 1." in text
    assert "17 findings:" in text and "Seeds: 1, 2, 3." in text and "commit abc1234" in text
    # no hypotheses nor predictions in the fixture: one seed per row cannot be compared
    assert "- **P7** " in text and "**not comparable** {-}" in text
    assert "BERT-base/QQP: BERT-base fine-tuned on QQP, seed 1, QQP test sentences" in text
    assert "gold trees of the stand-in tasks' generator" in text
    for png in ("tables1-3_bleu", "table4_glue", "fig1_sensitivity", "fig2_bias_thresholds", "fig3_bias_heads"):
        assert (runs.out / "figures" / f"{png}.png").is_file() and f"(figures/{png}.png)" in text


def test_report_decides_bleu_on_the_sentences_when_hypotheses_are_kept(runs, monkeypatch):
    monkeypatch.setitem(pande.SCALES, "tiny", dataclasses.replace(pande.SCALES["tiny"], letters=pande.LETTERS))
    rng = random.Random(0)
    refs = [" ".join(f"w{rng.randrange(50)}" for _ in range(9)) for _ in range(60)]
    for letter in pande.LETTERS:
        run = pande.nmt_run(runs, letter, 1)
        _write(run / "test.ref", "\n".join(refs) + "\n")
        hyps = [" ".join(w if rng.random() > (0.4 if letter == "a" else 0.1) else "x" for w in r.split()) for r in refs]
        _write(run / "test.hyp", "\n".join(hyps) + "\n")
    text = rep.write_report(runs).read_text()
    line = next(x for x in text.splitlines() if x.startswith("- **P7** "))
    # (a) has three seeds: one run of (b) is set against them with the prediction interval, which
    # counts the seed noise a bootstrap over one seed's sentences would leave out
    assert "(t prediction interval, 1 run against 3 seeds)" in line and "bootstrap over" not in line


def test_paper_report_names_the_parser(tmp_path):
    plan = pande.build("paper", tmp_path)
    assert "stanza 1.15.0 (named by the plan; not run yet)" in rep.trees_note(plan)
    _write(tmp_path / "data-paper" / "parsed" / "QQP.conllu.json", {"parser": "stanza", "version": "1.15.0"})
    assert "parsed by stanza 1.15.0, Universal Dependencies" in rep.trees_note(plan)


def test_figures_name_model_and_scale_and_number_layers_from_1(runs, monkeypatch):
    from fairseq_local_reproduce import pande_figures

    figs = []
    monkeypatch.setattr(pande_figures, "save", lambda fig, path: figs.append(fig) or Path(path))
    pande_figures.draw_all(runs.out / "figures", "tiny", {"a": [1.0, 2.0, 3.0], "b": [2.0]}, "NMT 6x8",
                           {"BERT-base": {"QQP": [80.0, 81.0]}}, ["QQP"], "BERT 4x4",
                           {"BERT-base fine-tuned on QQP": _sensitivity()}, {"BERT-base fine-tuned on QQP": BIAS})
    titles = [" ".join([f._suptitle.get_text() if f._suptitle else ""] + [ax.get_title() for ax in f.axes])
              for f in figs]
    assert len(figs) == 5 and all("tiny scale" in t for t in titles)
    assert "NMT 6x8" in titles[0] and "BERT 4x4" in titles[1] and "fine-tuned on QQP" in titles[2]
    bleu_ax = figs[0].axes[0]
    assert any(len(c.lines) or c.__class__.__name__ == "ErrorbarContainer" for c in bleu_ax.containers)
    sens_ax = figs[2].axes[0]
    assert [t.get_text() for t in sens_ax.get_xticklabels()] == ["1", "2", "3"]
    grid = figs[4].axes[0]
    assert [t.get_text() for t in grid.get_yticklabels()] == ["1", "2", "3"]


def test_mask_sparsity():
    assert rep.mask_sparsity("roberta_band2", 128) == pytest.approx(1 - (5 * 128 - 6) / 128 ** 2)
    assert rep.mask_sparsity("roberta_local_base") == 0.0


def test_paper_scale_with_a_given_bert_base(tmp_path, monkeypatch):
    """--bert HF_DIR: the BERT-base row is the converted model on its
    WordPiece GLUE (no pretraining step), Figs. 1-3 analyse it with its
    WordPiece, the other rows keep their pretraining, and the report says the
    comparison is no longer a controlled one."""
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = pande.build("paper", tmp_path, bert="/models/bert-base-uncased")
    ids = [s.id for s in plan.steps]
    base = pande.BERT_ROWS[0]
    assert f"pande/bert/{base}/pretrain" not in ids and f"pande/bert/{pande.BERT_ROWS[1]}/pretrain" in ids
    step = {s.id: s.cmd for s in plan.steps}
    ft = step[f"pande/bert/{base}/glue-s1/MNLI"]
    assert ft[ft.index("--checkpoint") + 1] == str(tmp_path / "pande" / "bert-given" / "model.pt")
    assert ft[ft.index("--data") + 1] == str(tmp_path / "pande" / "glue-given" / "MNLI-bin")
    other = step[f"pande/bert/{pande.BERT_ROWS[1]}/glue-s1/MNLI"]
    assert other[other.index("--data") + 1] == str(tmp_path / "data-paper" / "glue-bin" / "MNLI-bin")
    analyses = [c for i, c in step.items() if "/analysis/" in i and "--conllu" in c and "bert" in i]
    assert len(analyses) == 8 and all(c[c.index("--bpe") + 1] == "wordpiece" for c in analyses)  # dump, sensitivity
    text = rep.write_report(plan).read_text()
    assert "given with `--bert /models/bert-base-uncased`" in text and "not the paper's controlled comparison" in text
    with pytest.raises(ValueError, match="the tiny scale keeps its reduced one"):
        pande.build("tiny", tmp_path, bert="/models/bert-base-uncased")
