"""``reproduce sparsebert``: the plan at every scale, and the report against
fixture runs (hand-written metrics, logs, mask files and DAM checkpoints)
whose tables and findings are known."""

import argparse
import json
from pathlib import Path

import pytest
import torch

from fairseq_local.attention import DamMask
from fairseq_local.attention.masks import write_mask_file
from fairseq_local.reproduce import pande, sparsebert as sb
from fairseq_local.reproduce import sparsebert_report as rep
from fairseq_local.reproduce.numbers_sparsebert import (GLUE_COLUMNS, SPARSEBERT_FIG3, SPARSEBERT_FIG6,
                                                        SPARSEBERT_SETUP)
from fairseq_local.reproduce.plan import dependencies, estimate, print_plan
from fairseq_local.reproduce.report import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED


def _steps(plan, prefix: str):
    return [s for s in plan.steps if s.id.startswith(prefix)]


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_every_experiment_is_planned(tmp_path, scale):
    plan = sb.build(scale, tmp_path)
    s = sb.SCALES[scale]
    ids = [st.id for st in plan.steps]
    assert len(ids) == len(set(ids))
    rows = {r: s.seeds for r in sb.TABLE1}
    rows.update({r: s.sweep_seeds for r in [*sb.dam_rows(s), *sb.FIXED, *sb.fig3_rows(s)]})
    for row, seeds in rows.items():
        for seed in seeds:
            assert f"sparsebert/glue/{row}/s{seed}/eval" in ids, row
            for task in s.tasks:
                assert f"sparsebert/glue/{row}/s{seed}/{task}" in ids, (row, task)
    exports = [st for st in plan.steps if st.cmd[:2] == ("fairseq-local", "export") and "--prune" in st.cmd]
    per_task = 1 if scale == "paper" else len(s.tasks)
    assert len(exports) == per_task * (2 * len(s.prune) + len(set(s.fig6_prune) - set(s.prune)))
    assert sum("--prune-random" in st.cmd for st in exports) == per_task * len(s.prune)
    # every two-stage run reads a mask that an earlier step exports, with the file layout
    out = {st.cmd[st.cmd.index("--out") + 1]: k for k, st in enumerate(plan.steps) if st.cmd[1] == "export"}
    for row in sb.fig3_rows(s):
        for st in _steps(plan, f"sparsebert/glue/{row}/s1/"):
            if st.id.endswith("/eval"):
                continue
            mask = st.cmd[st.cmd.index("--mask-file") + 1]
            assert out[mask] < plan.steps.index(st)
            shape = "[file*12]*12" if scale == "paper" else "[file*4]*4"  # BERT-base; the reduced model
            assert st.cmd[-4:] == ("--attn-layout", shape, "--mask-mode", "pre")


def test_tiny_plan_fits_its_budget(tmp_path):
    plan = sb.build("tiny", tmp_path)
    fine_tunes = [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/finetune-glue.sh")]
    assert len(fine_tunes) == 9 + 10 + 6 and {st.cmd[st.cmd.index("--task") + 1] for st in fine_tunes} == {"CoLA"}
    assert len(_steps(plan, "sparsebert/convert/")) == 11 and len(_steps(plan, "sparsebert/masks/")) == 6
    assert len(plan.steps) == 4 + 1 + 11 + 25 + 25 + 6
    assert estimate(plan, 2) <= 45 and estimate(plan, 1) == pytest.approx(plan.minutes())
    assert estimate(sb.build("small", tmp_path), 2) <= 180
    needs = dependencies(plan.steps)  # the conversions wait for the pretraining alone; fine-tunes for theirs
    assert needs["sparsebert/convert/no-diag"] == {"sparsebert/bert/pretrain"}
    assert needs["sparsebert/glue/no-diag/s2/CoLA"] == {"data-tiny/glue-hard", "sparsebert/bert/pretrain",
                                                         "sparsebert/convert/no-diag"}
    assert all("--cpu" in st.cmd and "--recipe" in st.cmd for st in fine_tunes)
    # one full-attention model, converted; DAM learns its mask in fine-tuning with its lambda
    assert [st.cmd[2] for st in _steps(plan, "sparsebert/bert/")] == ["roberta_base"]
    dam = next(st for st in plan.steps if st.id == "sparsebert/glue/dam-s-1e-1/s1/CoLA")
    assert dam.cmd[-2:] == ("--dam-lambda", "1e-1") and dam.cmd[dam.cmd.index("--arch") + 1] == "roberta_dam_s"
    src = next(st for st in plan.steps if st.id == "sparsebert/masks/CoLA/random-60")
    assert src.cmd[2].endswith("glue/dam-s-1e-4/s1/CoLA/checkpoint_best.pt")
    assert src.cmd[3:] == ("--out", str(tmp_path / "sparsebert/glue/dam-s-1e-4/s1/CoLA/random-60-s1.pt"),
                           "--prune", "60", "--n", "128", "--prune-random", "1")


def test_data_steps_are_pandes(tmp_path):
    for scale in ("tiny", "small", "paper"):
        mine = {st.id: st.cmd for st in sb.build(scale, tmp_path).steps if st.id.startswith("data-")}
        theirs = {st.id: st.cmd for st in pande.build(scale, tmp_path).steps if st.id.startswith("data-")}
        shared = mine.keys() & theirs.keys()
        assert shared and all(mine[i] == theirs[i] for i in shared)
        assert set(mine) - shared == ({"data-paper/glue-sparsebert"} if scale == "paper" else set())


def test_paper_plan_is_the_papers_settings(tmp_path, capsys):
    plan = sb.build("paper", tmp_path)
    s = sb.SCALES["paper"]
    assert all("--cpu" not in st.cmd for st in plan.steps) and plan.minutes() is None
    assert set(s.tasks) == {"MNLI" if c.startswith("MNLI") else c for c in GLUE_COLUMNS if c != "average"}
    assert tuple(sorted(s.lambdas, reverse=True)) == SPARSEBERT_SETUP["lambdas"]
    assert s.prune == tuple(round(100 * f) for f in SPARSEBERT_FIG3["prune_fractions"])
    assert s.fig6_prune == tuple(round(100 * f) for f in SPARSEBERT_FIG6["two_stage_prune_fractions"])
    pre = _steps(plan, "sparsebert/bert/")
    assert len(pre) == 3 + 8 + 6 + 1
    for st in pre:  # Devlin et al.: 1M updates of 256 sequences, lr 1e-4, Adam (0.9, 0.999); n = 128
        text = " ".join(st.cmd)
        assert "--updates 1000000 --updates-512 0 --lengths 128,128 --max-positions 128 --batch-size 32 " \
               "--update-freq 8 --lr 1e-4 --warmup 10000 -- --adam-betas (0.9, 0.999)" in text
    p = next(st for st in pre if st.id == "sparsebert/bert/p/pretrain")
    assert p.cmd[2] == "roberta_dam_u" and p.cmd[-5:] == ("--dam-no-noise", "--mask-mode", "post", "--dam-lambda", "0")
    lams = [st.cmd[-1] for st in pre if "--dam-lambda" in st.cmd and st is not p]
    assert sorted(lams) == sorted(2 * ["1e-4", "1e-3", "1e-2", "1e-1"])
    ft = [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/finetune-glue.sh")]
    for st in ft:  # Appendix C as the recipe has it: no reduced length, lr or batch
        assert "--recipe" in st.cmd and st.cmd[st.cmd.index("--recipe") + 1] == "sparsebert"
        assert not {"--max-update", "--lr", "--batch-size"} & set(st.cmd)
    dam = next(st for st in ft if st.id == "sparsebert/glue/dam-u-1e-2/s1/RTE")  # mask fixed in fine-tuning
    assert dam.cmd[dam.cmd.index("--mask-file") + 1] == str(tmp_path / "sparsebert/bert/dam-u-1e-2/hard.pt")
    assert {st.id.split("/")[-1] for st in _steps(plan, "sparsebert/glue/prune-95/")} == {"QNLI", "MRPC", "eval"}
    assert sum(st.id.endswith("/eval") and "--cuda" in st.cmd for st in plan.steps) == len(
        [st for st in plan.steps if st.id.endswith("/eval")]) > 0
    print_plan(plan, commands=True)
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"reproduce sparsebert --scale paper: {len(plan.steps)} steps")


def test_fixed_rows_are_table3s_and_commands_parse(tmp_path):
    from fairseq_local.cli import convert_roberta, export
    from fairseq_local.cli.sparsity import TABLE3

    assert {n: t for n, t in sb.FIXED.values()} == {n: t for n, t, _ in TABLE3}
    assert all(row == name.lower() for row, (name, _) in sb.FIXED.items())
    plan = sb.build("tiny", tmp_path)
    parsers = {"convert-roberta": convert_roberta.build_parser(), "export": export.build_parser()}
    for st in plan.steps:
        if st.cmd[0] == "fairseq-local":
            args = parsers[st.cmd[1]].parse_args(list(st.cmd[2:]))
            if st.cmd[1] == "convert-roberta" and "--attn-layout" in st.cmd:
                assert args.attn_layout == f"[{sb.MODELS[st.id.split('/')[-1]][1]}*4]*4"
    from fairseq_local.attention.layout import parse_layout

    for token in [tok for _, tok in sb.MODELS.values() if tok] + ["file"]:
        layout = parse_layout(sb.layout(token, sb.model_shape()))
        assert len(layout) == 4 and all(len(layer.heads) == 4 for layer in layout), token
    assert sb.model_shape(["--encoder-layers", "4", "--encoder-attention-heads", "6"]) == (4, 6)
    assert sb.lam_name(1e-4) == "1e-4" and sb.lam_name(0.5) == "0.5"


# ---- the report -------------------------------------------------------------------------------------

MCC = {"base": (40, 42, 44), "random-drop": (36, 38, 40), "no-diag": (43, 45, 47),
       "dam-u-1e-4": 50, "dam-u-1e-1": 46, "dam-s-1e-4": 48, "dam-s-1e-1": 40, "star": 41, "logsparse": 30,
       "strided": 38, "fixed": 36, "longformer": 42, "bigbird": 33,
       "prune-30": 44, "random-30": 35, "prune-60": 40, "random-60": 30, "prune-90": 30, "random-90": 28}
RHO = {"base": 0.0, "random-drop": 0.01, "no-diag": 0.05, "dam-u-1e-4": 0.40, "dam-u-1e-1": 0.55,
       "dam-s-1e-4": 0.60, "dam-s-1e-1": 0.80, "star": 0.85, "logsparse": 0.70, "strided": 0.45, "fixed": 0.50,
       "longformer": 0.75, "bigbird": 0.78, "prune-30": 0.10, "random-30": 0.30, "prune-60": 0.35,
       "random-60": 0.60, "prune-90": 0.78, "random-90": 0.90}


def _valid(acc: float, rho: float) -> str:
    return (f"2026-01-01 00:00:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 0.9 | nll_loss 0.02 | "
            f"accuracy {acc} | rho {rho} | rho_l1 {rho} | wps 1 | num_updates 100 | best_accuracy {acc}")


def _dam_checkpoint(path: Path, structured: bool) -> None:
    """Two heads of one layer.  dam-u: alpha -2 on the diagonal, 3 on the
    neighbours, 1 on the first row and column, 0 elsewhere; the second head
    0.5 higher everywhere.  dam-s: -1 at offset 0, 1 at offset 1, -1 beyond."""
    state, n = {}, 16
    for k in range(2):
        m = DamMask(structured, n)
        if structured:
            m.alpha.data.copy_(torch.tensor([-1.0, 1.0] + [-1.0] * (n - 2)))
        else:
            i, j = torch.arange(n)[:, None].expand(n, n), torch.arange(n)[None, :].expand(n, n)
            a = torch.zeros(n, n)
            a[(i == 0) | (j == 0)] = 1.0
            a[(i - j).abs() == 1] = 3.0
            a[i == j] = -2.0
            m.alpha.data[m.index(i, j).flatten()] = a.flatten() + 0.5 * k
        state[f"encoder.sentence_encoder.layers.0.self_attn.dam.{k}.alpha"] = m.alpha.data.clone()
    kind = "s" if structured else "u"
    cfg = argparse.Namespace(arch=f"roberta_dam_{kind}", attn_layout=f"[dam-{kind}*2]*1")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"cfg": {"model": cfg}, "model": state}, path)


@pytest.fixture
def runs(tmp_path):
    plan = sb.build("tiny", tmp_path)
    for row, mcc in MCC.items():
        for seed, v in zip((1, 2, 3), mcc if isinstance(mcc, tuple) else (mcc,)):
            d = sb.ft_dir(plan, row, seed)
            (d / "eval").mkdir(parents=True)
            (d / "eval" / "CoLA.json").write_text(json.dumps({"sets": {"CoLA": {"mcc": v / 100, "accuracy": 0.7}}}))
            (d / "CoLA").mkdir()
            (d / "CoLA" / "train.log").write_text(_valid(50, 0.99) + "\n" + _valid(60, RHO[row]) + "\n")
    for row in ("dam-u-1e-4", "dam-u-1e-1", "dam-s-1e-1"):
        _dam_checkpoint(sb.ft_dir(plan, row, 1) / "CoLA" / "checkpoint_best.pt", row.startswith("dam-s"))
    for pct in (30, 60, 90):
        for how in ("prune", "random"):
            m = torch.ones(100, dtype=torch.bool)
            m[: pct - 10] = False
            write_mask_file(sb.mask_path(plan, sb.SCALES["tiny"], how, pct, "CoLA"),
                            {"0.0": {"matrix": m.view(10, 10), "ends": True}})
    return plan


def test_readers(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("\n".join([_valid(60, 0.1), _valid(70, 0.2), _valid(70, 0.3), _valid(65, 0.4)]))
    assert sb.valid_rho(tmp_path) == 0.3  # the last of the best: checkpoint_best.pt
    log.write_text(_valid(60, 1e-05).replace("accuracy 60 | ", "") + "\nanything | valid | else")
    assert sb.valid_rho(tmp_path) == 1e-05 and sb.valid_rho(tmp_path / "none") is None
    sets = {"MNLI-m": {"accuracy": 0.8}, "MNLI-mm": {"accuracy": 0.7}}
    (tmp_path / "MNLI.json").write_text(json.dumps({"sets": sets}))
    assert sb.columns(["CoLA", "MNLI"]) == ["CoLA", "MNLI-m", "MNLI-mm"]
    assert sb.metric(tmp_path, "MNLI-m") == pytest.approx(80) and sb.metric(tmp_path, "MNLI-mm") == pytest.approx(70)
    p = torch.full((4, 4), 0.5)
    p[0, :] = p[:, 0] = 0.8
    p.fill_diagonal_(0.1)
    p[1, 2] = p[2, 1] = p[2, 3] = p[3, 2] = 0.9
    p[1, 3] = 0.3
    c = sb.class_means(p)
    assert c["diag"] == pytest.approx(0.1) and c["special"] == pytest.approx(0.8)
    assert c["neighbour"] == pytest.approx(0.9)
    assert c["other"] == pytest.approx(0.4) and c["other_sd"] == pytest.approx(2 ** -0.5 * 0.2)  # (0.3, 0.5)


def test_tables(runs, monkeypatch):
    from fairseq_local.reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    s = sb.SCALES["tiny"]
    scores, avgs, rho = sb.gather(runs, ["base", "no-diag"], {"base": (1, 2, 3), "no-diag": (1, 2, 3)}, ["CoLA"])
    assert scores["base"]["CoLA"].values == pytest.approx((40, 42, 44)) and rho["no-diag"]["all"] == pytest.approx(0.05)
    assert rep.hard_sparsity([sb.ft_dir(runs, "dam-s-1e-1", 1) / "CoLA" / "checkpoint_best.pt"]) == pytest.approx(
        1 - 86 / 256)  # ends 60 + the interior's offset-1 entries 26, at n = 16
    assert rep.mask_share(sb.mask_path(runs, s, "random", 60, "CoLA")) == pytest.approx(0.5)
    text = rep.write_report(runs).read_text()
    assert text.startswith(sb.TITLE + " at `tiny` scale")
    assert "| BERT-base (ours) | 0.0 | 0.0 | - | 42.0 ± 2.0 (3) | 62.1 | 42.0 ± 2.0 (3) | 62.1 |" in text
    assert "| BERT-base (no diag-attention) | 0.8 | 5.0 | - | 45.0 ± 2.0 (3) | 63.1 | 45.0 ± 2.0 (3) | 63.1 |" in text
    # dam-u at n = 16: head 1 keeps the 30 special and 28 other neighbour entries, head 2 all but the diagonal
    assert "| DAM_u (lambda=1e-4) | 41.8 | 40.0 | 78.9 | 50.0 | 57.3 | 50.0 | 57.3 |" in text
    assert "| DAM_s (lambda=1e-4) | - | 60.0 | 91.2 | 48.0 | 59.4 | 48.0 | 59.4 |" in text
    assert "| Star | 96.1 | 85.0 | 96.1 | 41.0 | 59.6 | 41.0 | 59.6 |" in text
    assert "| 30 | CoLA | 44.0 | 10.0 | 20.0 | 35.0 | 30.0 | 20.0 |" in text
    assert "| two-stage (P pruned) | prune-90 | CoLA | 78.0 | 30.0 |" in text
    assert "16 findings: 10 reproduced, 3 not reproduced, 3 not comparable." in text
    assert "![Fig. 3](report_fig3.png)" in text and (runs.out / "report_fig3.png").is_file()


@pytest.fixture
def findings(runs, monkeypatch):
    from fairseq_local.reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    text = rep.write_report(runs).read_text()
    return {line.split("**")[1]: line for line in text.splitlines() if line.startswith("- **S")}


def _verdict(line: str) -> str:
    return next(v for v in (NOT_REPRODUCED, NOT_COMPARABLE, REPRODUCED) if f"**{v}**" in line)


def test_findings_on_fixture_values(findings):
    v = {k: _verdict(line) for k, line in findings.items()}
    assert v == {"S1": REPRODUCED, "S2": REPRODUCED, "S3": REPRODUCED, "S4": NOT_COMPARABLE, "S5": REPRODUCED,
                 "S6": REPRODUCED, "S7": NOT_COMPARABLE, "S8": NOT_REPRODUCED, "S9": NOT_COMPARABLE,
                 "S10": NOT_REPRODUCED, "S11": REPRODUCED, "S12": REPRODUCED, "S13": NOT_REPRODUCED,
                 "S14": REPRODUCED, "S15": REPRODUCED, "S16": REPRODUCED}
    # seed sd 2 over Table 1's rows: margin 2 * 2 * sqrt(2/3) = 3.27 between two rows of 3 seeds
    assert ("average no-diag − base +3.00, random − base -4.00; margin ±3.27 (2 standard errors, seed sd 2.00)"
            in findings["S5"])
    # single runs: margin 2 * 2 * sqrt(2) = 5.66; +2.00 at 90 % is within it
    assert "P-pruned − random: CoLA 30% +9.00; CoLA 60% +10.00; CoLA 90% +2.00; CoLA margin ±5.66" in findings["S8"]
    assert "CoLA 90% − 30% -14.00 (below); RTE: no runs or spread" in findings["S9"]
    assert "DAM measurably above in 6 of 9 pairs" in findings["S10"] and "measurably below: none" in findings["S10"]
    assert "dev ρ 80.0% vs 78.0%; average DAM_s − BigBird +7.00" in findings["S11"]
    assert "dev ρ by λ 1e-4, 1e-1: DAM_u 40.0% / 55.0%; DAM_s 60.0% / 80.0%" in findings["S12"]
    assert ("DAM_u: diagonal off 100%, neighbours on 100%; DAM_s: diagonal off 100%, neighbours on 100%"
            in findings["S14"])
    assert ("DAM 46.00 (4 runs), neighbour+special 38.67 (3 runs), neighbour only 34.67 (3 runs); margin ±3.06"
            in findings["S15"])
    # diag (σ(-2) + σ(-1.5))/2; special: 28 entries at α 1 and the 2 neighbours (α 3) of the first row and column
    assert "mean P: diag 0.151, neighbour 0.962, special 0.787, other 0.561 over 2 heads" in findings["S1"]


def test_one_stage_against_two_stages():
    from fairseq_local.reproduce.report import Values

    scores = {"dam-u-1e-4": {"CoLA": Values((50.0,))}, "dam-s-1e-1": {"CoLA": Values((40.0,))},
              "prune-60": {"CoLA": Values((40.0,))}, "prune-90": {"CoLA": Values((30.0,))}}
    rho = {"dam-u-1e-4": {"CoLA": 0.40}, "dam-s-1e-1": {"CoLA": 0.80}, "prune-60": {"CoLA": 0.35},
           "prune-90": {"CoLA": 0.78}}
    f = rep.fig6_findings(scores, rho, ["dam-u-1e-4", "dam-s-1e-1"], ["prune-60", "prune-90"], ["CoLA"],
                          {"CoLA": 2.0})[0]
    assert f.verdict == REPRODUCED
    assert f.evidence.startswith("QNLI and MRPC not run, so on the tasks run: "
                                 "CoLA: dam-u-1e-4 (ρ 40%) − prune-60 (ρ 35%) +10.00; "
                                 "CoLA: dam-s-1e-1 (ρ 80%) − prune-90 (ρ 78%) +10.00; CoLA margin ±5.66")
    rho["prune-60"]["CoLA"] = 0.20  # nothing within 10 points of dam-u; dam-s still compared
    scores["prune-90"]["CoLA"] = Values((38.0,))
    f = rep.fig6_findings(scores, rho, ["dam-u-1e-4", "dam-s-1e-1"], ["prune-60", "prune-90"], ["CoLA"],
                          {"CoLA": 2.0})[0]
    assert f.verdict == NOT_REPRODUCED and "dam-u" not in f.evidence
    assert rep.fig6_findings(scores, rho, ["dam-u-1e-4"], ["prune-60"], ["CoLA"], {"CoLA": 2.0})[0].verdict \
        == NOT_COMPARABLE
