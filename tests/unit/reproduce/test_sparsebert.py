"""``reproduce sparsebert``: the plan at every scale, and the masks matched on
the evaluated sentences (:mod:`~fairseq_local_reproduce.sparsebert_masks`).
The report is tested in ``test_sparsebert_report.py``."""

from pathlib import Path

import numpy as np
import pytest
import torch

from fairseq_local.attention.learned import DamMask
from fairseq_local_reproduce import pande, sparsebert as sb
from fairseq_local_reproduce import sparsebert_masks as sm
from fairseq_local_reproduce.numbers_sparsebert import (GLUE_COLUMNS, SPARSEBERT_FIG3, SPARSEBERT_FIG6,
                                                        SPARSEBERT_SETUP)
from fairseq_local_reproduce.plan import BUDGETS, dependencies, estimate, print_plan


def _steps(plan, prefix: str):
    return [s for s in plan.steps if s.id.startswith(prefix)]


def _file_layout(scale: str) -> str:
    return sb.layout("file", (12, 12) if scale == "paper" else sb.model_shape())


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
    masks = [st for st in plan.steps if st.cmd[:4] == (*sb.MASKS, "prune")]
    per_task = len(s.prune) * 2 * len(s.tasks) + len(set(s.fig6_prune) - set(s.prune)) * len(s.fig6_tasks)
    assert len(masks) == per_task and sum("--random" in st.cmd for st in masks) == len(s.prune) * len(s.tasks)
    out = {st.cmd[st.cmd.index("--out") + 1]: k for k, st in enumerate(plan.steps) if "--out" in st.cmd}
    few = {r for r, seeds in rows.items() if len(seeds) < 3} | ({"prune-85", "prune-95"} if scale == "paper"
                                                                 else set())
    assert {st.id.split("/")[2] for st in plan.steps if st.id.endswith("/predictions")} == few
    assert all(st.cmd[:3] == ("python", "-m", "fairseq_local_reproduce.pande_predict")
               for st in plan.steps if st.id.endswith("/predictions"))
    for row in sb.fig3_rows(s):  # every two-stage run reads a mask an earlier step writes, with the file layout
        for st in _steps(plan, f"sparsebert/glue/{row}/s1/"):
            if st.id.split("/")[-1] in s.tasks:
                assert out[st.cmd[st.cmd.index("--mask-file") + 1]] < plan.steps.index(st)
                assert st.cmd[-4:] == ("--attn-layout", _file_layout(scale), "--mask-mode", "pre")


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_p_is_learned_as_section_3_1_and_pruned(tmp_path, scale):
    """§3.1: sigmoid P (no Gumbel noise), P ⊙ A after the softmax, no L1
    penalty; Fig. 3 prunes that P (before: a DAM_s run with noise and λ 1e-4)."""
    plan = sb.build(scale, tmp_path)
    s = sb.SCALES[scale]
    p_runs = _steps(plan, "sparsebert/bert/p/") if scale == "paper" else _steps(plan, "sparsebert/glue/p/")
    assert len(p_runs) == (1 if scale == "paper" else len(s.tasks))
    for st in p_runs:
        text = " ".join(map(str, st.cmd))
        assert "--dam-no-noise --mask-mode post --dam-lambda 0" in text and "roberta_dam_u" in st.cmd
        if scale != "paper":
            assert st.cmd[-2:] == ("--dam-lr-scale", str(sb.p_lr_scale(s)))
    for st in plan.steps:
        if st.cmd[:4] == (*sb.MASKS, "prune"):
            task = st.id.split("/")[2]
            assert st.cmd[st.cmd.index("--checkpoint") + 1] == str(sb.p_checkpoint(plan, task))
            assert st.cmd[st.cmd.index("--data") + 1].endswith(f"/{task}-bin")
    if scale != "paper":  # α's summed lr is the paper's pre-training's: 1e-4 x 1M / 2
        assert float(s.ft_lr) * s.ft_updates / 2 * sb.p_lr_scale(s) == pytest.approx(sb.P_LR_SUM)


def test_tiny_plan_fits_its_budget(tmp_path):
    plan = sb.build("tiny", tmp_path)
    fine_tunes = [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/finetune-glue.sh")]
    assert len(fine_tunes) == 3 * (3 + 4 + 6 + 6) + 1 and {st.cmd[st.cmd.index("--task") + 1] for st in fine_tunes} \
        == {"CoLA"}  # every row with three seeds, and the P run
    assert len(_steps(plan, "sparsebert/convert/")) == 8 and len(_steps(plan, "sparsebert/masks/")) == 3 + 6
    assert round(estimate(plan, 2)) <= BUDGETS["tiny"]["sparsebert"] and estimate(plan, 1) == pytest.approx(plan.minutes())
    assert round(estimate(sb.build("small", tmp_path), 2)) <= BUDGETS["small"]["sparsebert"]
    needs = dependencies(plan.steps)
    assert needs["sparsebert/convert/no-diag"] == {"sparsebert/bert/pretrain"}
    assert needs["sparsebert/glue/random-drop/s2/CoLA"] == {
        "data-tiny/glue-hard", "sparsebert/bert/pretrain", "sparsebert/convert/base",
        "sparsebert/masks/CoLA/random-drop"}
    assert all("--cpu" in st.cmd and "--recipe" in st.cmd for st in fine_tunes)
    assert [st.cmd[2] for st in _steps(plan, "sparsebert/bert/")] == ["roberta_base"]
    dam = next(st for st in plan.steps if st.id == "sparsebert/glue/dam-s-1e-1/s3/CoLA")
    assert dam.cmd[-2:] == ("--dam-lambda", "1e-1") and dam.cmd[dam.cmd.index("--arch") + 1] == "roberta_dam_s"
    rnd = next(st for st in plan.steps if st.id == "sparsebert/masks/CoLA/random-60")
    assert rnd.cmd[3:] == ("prune", "--checkpoint", str(tmp_path / "sparsebert/glue/p/s1/CoLA/checkpoint_last.pt"),
                           "--prune", "60", "--data", str(tmp_path / "data-tiny/glue-hard/CoLA-bin"), "--out",
                           str(tmp_path / "sparsebert/masks/CoLA/random-60-s1.pt"), "--random", "1")


@pytest.mark.parametrize("scale", ["tiny", "small"])
def test_rows_with_random_parts_are_drawn_on_the_sentences(tmp_path, scale):
    """Reduced scales: random-drop, Longformer and BigBird are mask files
    drawn on each task's dev sentences, not the n = 128 tokens (before:
    converted with random-drop-s1 / longformer-2-2 / bigbird-1-2-2)."""
    plan = sb.build(scale, tmp_path)
    for row, (kind, *params) in sb.FILE_ROWS.items():
        assert f"sparsebert/convert/{row}" not in [st.id for st in plan.steps]
        for task in sb.SCALES[scale].tasks:
            make = next(st for st in plan.steps if st.id == f"sparsebert/masks/{task}/{row}")
            assert make.cmd[:4 + len(params)] == (*sb.MASKS, kind, *map(str, params))
            ft = next(st for st in plan.steps if st.id == f"sparsebert/glue/{row}/s1/{task}")
            assert ft.cmd[ft.cmd.index("--mask-file") + 1] == str(sb.row_mask(plan, row, task))
            assert ft.cmd[ft.cmd.index("--checkpoint") + 1] == str(sb.converted(plan, "base"))


def test_device_cuda(tmp_path):
    for scale in ("tiny", "small"):
        cpu, cuda = sb.build(scale, tmp_path), sb.build(scale, tmp_path, device="cuda")
        assert cuda.device == "cuda" and [s.id for s in cpu.steps] == [s.id for s in cuda.steps]
        assert not any("--cpu" in s.cmd for s in cuda.steps) and any("--cpu" in s.cmd for s in cpu.steps)
        assert all("--cuda" in s.cmd for s in cuda.steps if s.id.endswith("/eval"))
    assert sb.build("paper", tmp_path, device="cuda").device == "cuda"


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
        assert "--updates 1000000 --updates-512 0 --lengths 128,128 --max-positions 128 --batch-size 32 " \
               "--update-freq 8 --lr 1e-4 --warmup 10000 -- --adam-betas (0.9, 0.999)" in " ".join(st.cmd)
    lams = [st.cmd[-1] for st in pre if "--dam-lambda" in st.cmd and st.id != "sparsebert/bert/p/pretrain"]
    assert sorted(lams) == sorted(2 * ["1e-4", "1e-3", "1e-2", "1e-1"])
    ft = [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/finetune-glue.sh")]
    for st in ft:  # Appendix C as the recipe has it: no reduced length, lr or batch
        assert st.cmd[st.cmd.index("--recipe") + 1] == "sparsebert"
        assert not {"--max-update", "--lr", "--batch-size"} & set(st.cmd)
    dam = next(st for st in ft if st.id == "sparsebert/glue/dam-u-1e-2/s1/RTE")  # mask fixed in fine-tuning
    assert dam.cmd[dam.cmd.index("--mask-file") + 1] == str(tmp_path / "sparsebert/bert/dam-u-1e-2/hard.pt")
    mrpc = next(st for st in ft if st.id == "sparsebert/glue/prune-95/s1/MRPC")  # Fig. 3/6 masks per task
    assert mrpc.cmd[mrpc.cmd.index("--mask-file") + 1] == str(tmp_path / "sparsebert/masks/MRPC/prune-95.pt")
    assert {st.id.split("/")[-1] for st in _steps(plan, "sparsebert/glue/prune-95/")} == {"QNLI", "MRPC", "eval",
                                                                                         "predictions"}
    assert all("--cuda" in st.cmd for st in plan.steps if st.id.endswith("/eval"))
    print_plan(plan, commands=True)
    assert capsys.readouterr().out.splitlines()[0].startswith(f"reproduce sparsebert --scale paper: {len(plan.steps)}")


def test_fixed_rows_are_table3s_and_commands_parse(tmp_path):
    from fairseq_local.attention.layout import parse_layout
    from fairseq_local_cli import convert_roberta
    from fairseq_local_cli.sparsity import TABLE3

    assert {n: t for n, t in sb.FIXED.values()} == {n: t for n, t, _ in TABLE3}
    plan = sb.build("tiny", tmp_path)
    for st in plan.steps:
        if st.cmd[:2] == ("fairseq-local", "convert-roberta"):
            convert_roberta.build_parser().parse_args(list(st.cmd[2:]))
        elif st.cmd[:3] == sb.MASKS:
            sm.build_parser().parse_args(list(st.cmd[3:]))
    shape = sb.model_shape()
    for token in [tok for _, tok in sb.MODELS.values() if tok] + ["file"]:
        layout = parse_layout(sb.layout(token, shape))
        assert len(layout) == shape[0] and all(len(layer.heads) == shape[1] for layer in layout), token
    assert sb.model_shape(["--encoder-layers", "4", "--encoder-attention-heads", "6"]) == (4, 6)
    assert sb.lam_name(1e-4) == "1e-4" and sb.lam_name(0.5) == "0.5"


# ---- masks at the realised sparsity ---------------------------------------------------------------

LENGTHS = [10, 12, 12, 15, 20, 20, 25, 29]


def write_index(prefix: Path, sizes) -> None:
    """A binarised (mmap) dataset of sentences of ``sizes`` tokens, as fairseq writes it."""
    from fairseq.data.indexed_dataset import MMapIndexedDatasetBuilder

    prefix.parent.mkdir(parents=True, exist_ok=True)
    b = MMapIndexedDatasetBuilder(f"{prefix}.bin", dtype=np.int32)
    for n in sizes:
        b.add_item(torch.full((n,), 5, dtype=torch.int32))
    b.finalize(f"{prefix}.idx")


def test_sentence_lengths_as_sentence_prediction_reads_them(tmp_path):
    write_index(tmp_path / "input0" / "valid", [9, 11])
    assert sm.sentence_lengths(tmp_path) == [10, 12]  # <s> + input0 (with its </s>)
    write_index(tmp_path / "input1" / "valid", [4, 6])
    assert sm.sentence_lengths(tmp_path) == [15, 19]  # and </s> + input1


def test_random_drop_matches_the_diagonal_on_the_sentences():
    """§3.3: as many entries as the diagonal, n per sentence.  The n = 128
    pattern (random-drop-s1) drops about n²/128 of a short sentence's."""
    from fairseq_local.attention.masks import parse_mask

    w = sm.weights(LENGTHS)
    assert float(w.sum()) == pytest.approx(1.0)
    diag = sum(1 / n for n in LENGTHS) / len(LENGTHS)
    assert sm.realised(~torch.eye(sm.N, dtype=torch.bool), w) == pytest.approx(diag)
    kept = sm.random_drop(w, LENGTHS, seed=1)
    assert sm.realised(kept, w) == pytest.approx(diag, abs=float(w.max()))  # to one entry's weight
    assert np.mean(sm.sentence_rho(kept, LENGTHS)) == pytest.approx(sm.realised(kept, w))
    pos = torch.arange(sm.N)
    old = parse_mask("random-drop-s1").dense(pos, pos).expand(sm.N, sm.N)
    assert sm.realised(old, w) < diag / 3  # the defect: about n/128 of the diagonal's share
    assert not torch.equal(kept, sm.random_drop(w, LENGTHS, seed=2))


def test_p_pruning_and_its_random_baseline_realise_the_same_sparsity():
    """§3.4 at the realised sparsity: pruning P pct % of the 128² entries
    removes what lies beyond short sentences first (the old export)."""
    from fairseq_local.attention.export import prune_by_p as prune_at_128

    torch.manual_seed(0)
    m = DamMask(False, sm.N, init_std=1.0)
    w = sm.weights(LENGTHS)
    for pct in (30, 60, 90):
        kept = sm.prune_by_p(m.matrix(sm.N, "prob"), w, pct)
        assert sm.realised(kept, w) == pytest.approx(pct / 100, abs=0.01)
        rnd = sm.drop_in_order(sm.random_order(w, 1, "prune-0.0"), w, sm.realised(kept, w))
        assert sm.realised(rnd, w) == pytest.approx(sm.realised(kept, w), abs=0.01)
        p = m.matrix(sm.N, "prob")
        assert bool((p[~kept].max() <= p[kept & (w > 0)].min()))  # the smallest P entries of the sentences
    trained = DamMask(False, sm.N)  # trained on short sentences only: α 0 beyond them, P 0.5
    trained.alpha.data[trained.index(*torch.triu_indices(30, 30))] = torch.randn(30 * 31 // 2) - 1.0
    assert sm.realised(prune_at_128(trained, sm.N, 30), w) > 0.5  # 30 % of 128² hits the sentences' low P first


def test_longformer_and_bigbird_draw_their_globals_among_the_sentences():
    """§4.2: two random input locations global; BigBird 2 random keys per
    row.  Drawn among 128 (longformer-2-2) they are positions 36 and 37."""
    lf, bb = sm.longformer(LENGTHS, 2, 2, seed=1), sm.bigbird(LENGTHS, 1, 2, 2, seed=1)
    for m in (lf, bb):
        glob = [i for i in range(sm.N) if bool(m[i].all())]
        assert len(glob) == 2 and max(glob) < min(LENGTHS)
    extra = bb & ~sm.longformer(LENGTHS, 1, 2, seed=1)  # BigBird = its Longformer part or the random keys
    for i in (0, 5, 40, 127):  # R random keys inside the shortest sentence that has row i
        assert int(extra[i].sum()) <= 2 and all(j < max(min(LENGTHS), i + 1) for j in extra[i].nonzero().flatten())
    from fairseq_local.attention.masks import parse_mask

    pos = torch.arange(sm.N)
    old = parse_mask("longformer-2-2").dense(pos, pos).expand(sm.N, sm.N)
    assert [i for i in range(sm.N) if bool(old[i].all())] == [35, 36]  # the defect: beyond every sentence here


def test_the_command_writes_a_mask_file(tmp_path):
    from fairseq_local.attention.masks import load_mask_file

    write_index(tmp_path / "CoLA-bin" / "input0" / "valid", [n - 1 for n in LENGTHS])
    assert sm.main(["longformer", "2", "2", "--data", str(tmp_path / "CoLA-bin"), "--out", str(tmp_path / "m.pt"),
                    "--shape", "2,3"]) == 0
    masks = load_mask_file(str(tmp_path / "m.pt"))
    assert sorted(masks) == [f"{l}.{h}" for l in range(2) for h in range(3)]
    with pytest.raises(SystemExit):
        sm.main(["bigbird", "1", "--data", str(tmp_path / "CoLA-bin"), "--out", str(tmp_path / "x.pt")])
