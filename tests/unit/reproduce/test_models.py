"""The reduced scales' shared models (reproduce/models.py): one NMT baseline
for Pande, Voita and Pascual, trained to the plateau rule, read at its best
checkpoint; and the rule's reading of a training log."""

import inspect

import pytest

from fairseq_local_reproduce import hta, models, pande, voita

PLANS = (pande, voita, hta)


def _flag(cmd, name):
    return cmd[cmd.index(name) + 1]


@pytest.mark.parametrize("scale", ["tiny", "small"])
def test_the_three_nmt_papers_share_one_baseline(tmp_path, scale):
    """Every ``models-SCALE/`` step is the same step (id, command, estimate)
    in every plan that holds it, so the second paper skips it; Voita and
    Pascual analyse Pande's (a), seed 1, at its best checkpoint."""
    plans = [m.build(scale, tmp_path) for m in PLANS]
    shared = {}
    for plan in plans:
        for s in plan.steps:
            if s.id.startswith(f"models-{scale}/"):
                assert shared.setdefault(s.id, s) == s, s.id
    assert f"models-{scale}/nmt/a-s1/train" in shared
    base = pande.nmt_run(plans[0], "a", 1)
    assert base == models.shared_dir(tmp_path, scale) / "nmt" / "a-s1"
    for plan in plans:
        assert f"models-{scale}/nmt/a-s1/train" in [s.id for s in plan.steps], plan.paper
        readers = [s for s in plan.steps if any(c.startswith(str(base) + "/checkpoint") for c in s.cmd)
                   and not s.id.startswith(f"models-{scale}/")]
        assert readers, plan.paper
        for s in readers:
            assert str(base / "checkpoint_best.pt") in s.cmd and str(base / "checkpoint_last.pt") not in s.cmd, s.id
    assert voita.model_dir(plans[1]) == base


@pytest.mark.parametrize("scale", ["tiny", "small"])
def test_every_model_trains_the_same_budget_and_is_read_at_its_best(tmp_path, scale):
    """NMT: every configuration trains the scale's updates, no early stop,
    and is translated and analysed at checkpoint_best.pt; BERT: every layout
    pretrains the scale's updates (not to a plateau) and is fine-tuned from its last."""
    plan = pande.build(scale, tmp_path)
    s = pande.SCALES[scale]
    trains = [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/train.sh")]
    assert len(trains) == (len(s.letters) - 1) * len(s.seeds) + len(s.base_seeds)
    assert s.letters == pande.LETTERS if scale == "small" else s.letters == ("a",)
    for step in trains:
        assert step.cmd.count("--max-update") == 1 and _flag(step.cmd, "--max-update") == str(s.nmt_updates)
        assert "--patience" not in step.cmd
        assert _flag(step.cmd, "--decoder-layers") == str(pande.NMT_DECODER_LAYERS)
        run = _flag(step.cmd, "--save-dir")
        test = next(t for t in plan.steps if t.id == step.id.replace("/train", "/test"))
        assert _flag(test.cmd, "--checkpoint") == f"{run}/checkpoint_best.pt"
    pre = [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/pretrain-bert.sh")]
    assert len(pre) == len(s.bert_rows)
    for step in pre:
        assert _flag(step.cmd, "--updates") == str(s.bert_updates) and "--patience" not in step.cmd
        assert _flag(step.cmd, "--encoder-layers") == str(pande.BERT_LAYERS)
    fts = [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/finetune-glue.sh")]
    assert fts and all(_flag(st.cmd, "--checkpoint").endswith("/checkpoint_last.pt") for st in fts)
    assert not any("checkpoint_last.pt" in c and "/nmt/" in c for step in plan.steps for c in step.cmd)


# fairseq's own validation line (fairseq_cli/train.py's progress bar, --log-format simple), as in a pilot's log
LINE = ("2026-11-28 11:59:09 | INFO | valid | epoch {:03d} | valid on 'valid' subset | loss {} | nll_loss 6.365 | "
        "ppl 82.45 | wps 26492.1 | wpb 1496.3 | bsz 49.3 | num_updates {}")


def _log(run, losses, done=True):
    run.mkdir(exist_ok=True)
    lines = [LINE.format(k + 1, x, 113 * (k + 1)) for k, x in enumerate(losses)]
    lines += ["INFO | fairseq_cli.train | done training in 40.0 seconds"] if done else []
    (run / "train.log").write_text("\n".join(lines) + "\n")
    return run


def test_the_plateau_check(tmp_path):
    assert models.plateau_of(tmp_path) is None  # no log
    losses = [5.0 - 0.2 * k for k in range(10)] + [3.0, 2.99, 2.995, 2.98, 2.99, 2.985, 2.99, 2.98, 2.985, 2.99]
    assert models.plateau_of(_log(tmp_path / "u", losses, done=False)) is None  # killed before the end
    p = models.plateau_of(_log(tmp_path / "f", losses))  # 3.2 before the window, 2.98 in it: still falling
    assert p.updates == 113 * 20 and p.best == 2.98 and p.fall == pytest.approx((3.2 - 2.98) / 3.2) and not p.flat
    losses[9] = 2.99  # now the window's best (2.98) is 0.3 % below the best before it
    p = models.plateau_of(_log(tmp_path / "g", losses))
    assert p.flat and p.fall == pytest.approx(0.01 / 2.99)
    assert p.words() == "2,260 updates, best dev loss 2.98, -0.3 % over the last 10 epochs (plateau)"
    rising = losses[:10] + [x + 0.1 for x in losses[10:]]  # overfitting: the best lies before the window
    assert models.plateau_of(_log(tmp_path / "r", rising)).fall == 0.0
    short = models.plateau_of(_log(tmp_path / "s", [5.0, 4.0]))
    assert short.fall is None and not short.flat and "too few epochs" in short.words()
    line = models.stops_line({"(a) s1": tmp_path / "g", "(a) s2": tmp_path / "none", "(a) s3": tmp_path / "s"})
    assert line.startswith("(a) s1: 2,260 updates") and "(a) s2" not in line and "; (a) s3: 226 updates" in line


@pytest.mark.parametrize("scale", ["tiny", "small"])
def test_every_plan_and_all_within_their_budgets(tmp_path, scale):
    """Each plan's estimate (two steps at a time) and ``all``'s, the shared
    steps once, against plan.BUDGETS; the shared models are counted once."""
    from fairseq_local_reproduce import PAPERS, paper_module
    from fairseq_local_reproduce.plan import BUDGETS, estimate, schedule

    steps = {}
    for paper in PAPERS:
        plan = paper_module(paper).build(scale, tmp_path)
        assert round(estimate(plan, 2)) <= BUDGETS[scale][paper], paper  # in whole minutes, as printed
        for s in plan.steps:
            assert steps.setdefault(s.id, s) == s, s.id  # a shared id is one step
    assert round(schedule(list(steps.values()), 2)) <= BUDGETS[scale]["all"]
    assert sum(i.startswith(f"models-{scale}/") and i.endswith(("/train", "/pretrain")) for i in steps) == 4
