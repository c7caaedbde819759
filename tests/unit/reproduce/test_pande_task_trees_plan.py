"""Pande et al. §3 in the plan: BERT-base *fine-tuned on each GLUE task* is
analysed on that task's test sentences with their trees (the generator's at
the reduced scales, a named parser's at paper scale), and the reduced
scales run on the device asked for."""

from pathlib import Path

import pytest

from fairseq_local_reproduce import pande
from fairseq_local_reproduce.pande_parse import PARSER, PARSER_VERSION
from fairseq_local_reproduce.plan import ROOT, dependencies


def _opt(cmd, flag):
    return cmd[cmd.index(flag) + 1]


def _step(plan, sid):
    return next(s for s in plan.steps if s.id == sid)


@pytest.mark.parametrize("scale", ["tiny", "small"])
def test_bert_analysed_is_the_finetuned_model_on_its_tasks_sentences(tmp_path, scale):
    plan = pande.build(scale, tmp_path)
    d = pande.data_dirs(tmp_path, scale)
    glue_fake = _step(plan, f"data-{scale}/glue-hard-raw")
    assert "--trees" in glue_fake.cmd  # the data step writes the tasks' gold trees
    needs = dependencies(plan.steps)
    for task in pande.TASKS:
        for kind in ("dump", "sensitivity"):
            step = _step(plan, f"pande/analysis/bert-{task}/{kind}")
            ckpt = Path(_opt(step.cmd, "--path"))
            assert ckpt == pande.ft_dir(plan, pande.BERT_ROWS[0], 1) / task / "checkpoint_best.pt"
            assert Path(_opt(step.cmd, "--data")) == d["glue"] / f"{task}-bin"
            conllu = Path(_opt(step.cmd, "--conllu"))
            assert conllu.parent == d["glue_raw"] / task and conllu.suffix == ".conllu"
            assert conllu.stem == ("test_matched" if task == "MNLI" else "test")  # §3: the tasks' test sets
            assert f"pande/bert/{pande.BERT_ROWS[0]}/glue-s1/{task}" in needs[step.id]
            assert glue_fake.id in needs[step.id]
    # no BERT checkpoint is analysed on the NMT corpus's sentences, nor the pretrained-only model
    for step in plan.steps:
        if step.id.startswith("pande/analysis/") and "--path" in step.cmd:
            path = _opt(step.cmd, "--path")
            if "/bert/" in path:
                assert "nmt-hard" not in _opt(step.cmd, "--conllu") and "/glue-s1/" in path


def test_paper_scale_parses_the_test_sentences_with_a_named_parser(tmp_path):
    plan = pande.build("paper", tmp_path)
    needs = dependencies(plan.steps)
    assert PARSER == "stanza" and PARSER_VERSION.count(".") == 2
    for name in (*pande.TASKS, "newstest2014"):
        parse = _step(plan, f"pande/parse/{name}")
        assert parse.cmd[:3] == ("python", "-m", "fairseq_local_reproduce.pande_parse")
        assert (ROOT / "fairseq_local_reproduce" / "pande_parse.py").is_file()
        assert f"{PARSER} {PARSER_VERSION}" in parse.what and _opt(parse.cmd, "--sentences") == "1000"
        what = "nmt" if name == "newstest2014" else f"bert-{name}"
        sens = _step(plan, f"pande/analysis/{what}/sensitivity")
        assert _opt(sens.cmd, "--conllu") == _opt(parse.cmd, "--out") and parse.id in needs[sens.id]
        assert _opt(sens.cmd, "--max-sentences") == "100"  # §3.1: 100 sentences (Fig. 1)
        assert _opt(_step(plan, f"pande/analysis/{what}/dump").cmd, "--max-sentences") == "1000"  # §3.2: 1,000
    task = _step(plan, "pande/parse/MNLI")
    assert _opt(task.cmd, "--task") == "MNLI" and _opt(task.cmd, "--split") == "test_matched"
    assert _opt(_step(plan, "pande/analysis/bert-QNLI/dump").cmd, "--path").endswith("/glue-s1/QNLI/checkpoint_best.pt")


def test_device_reaches_the_plan_and_drops_cpu(tmp_path):
    cpu = pande.build("tiny", tmp_path)
    gpu = pande.build("tiny", tmp_path, device="cuda")
    assert cpu.device == "cpu" and gpu.device == "cuda"
    assert pande.build("paper", tmp_path, device="cuda").device == "cuda"
    assert pande.build("paper", tmp_path, device="cuda").device == "cuda"
    train = [s for s in cpu.steps if s.id.endswith("/pretrain") or "/glue-s" in s.id and s.cmd[1].endswith("finetune-glue.sh")]
    assert train and all("--cpu" in s.cmd for s in train)
    assert not any("--cpu" in s.cmd for s in gpu.steps)
    assert all("--cuda" in s.cmd for s in gpu.steps if s.id.startswith("pande/analysis/") and "--path" in s.cmd)
    assert all("--cuda" in s.cmd for s in gpu.steps if s.id.endswith(("/eval", "/predictions")))
    assert [s.id for s in gpu.steps] == [s.id for s in cpu.steps]
