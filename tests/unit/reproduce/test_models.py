"""The reduced scales' shared models (reproduce/models.py): one NMT baseline
for Pande, Voita and Pascual, trained to the plateau rule, read at its best
checkpoint; and the rule's reading of a training log."""

import inspect

import pytest

from fairseq_local.reproduce import hta, models, pande, voita

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
def test_every_nmt_model_trains_to_the_plateau_and_is_read_at_its_best(tmp_path, scale):
    plan = pande.build(scale, tmp_path)
    trains = [s for s in plan.steps if s.cmd[:2] == ("bash", "scripts/train.sh")]
    s = pande.SCALES[scale]
    assert len(trains) == (len(s.letters) - 1) * len(s.seeds) + len(s.base_seeds)
    assert s.letters == pande.LETTERS if scale == "small" else set(s.letters) == set("afil")
    for step in trains:
        assert _flag(step.cmd, "--patience") == str(models.PATIENCE), step.id
        assert _flag(step.cmd, "--max-update") == str(s.nmt_updates), step.id
        assert step.cmd.count("--max-update") == 1
        assert _flag(step.cmd, "--decoder-layers") == str(pande.NMT_DECODER_LAYERS)
        run = _flag(step.cmd, "--save-dir")
        test = next(t for t in plan.steps if t.id == step.id.replace("/train", "/test"))
        assert _flag(test.cmd, "--checkpoint") == f"{run}/checkpoint_best.pt"
    assert not any("checkpoint_last.pt" in c and "/nmt/" in c for step in plan.steps for c in step.cmd)


def test_the_rule_reads_fairseqs_own_early_stop_line():
    """The line :func:`models.stop_of` looks for is the one fairseq prints."""
    from fairseq_cli import train

    src = inspect.getsource(train.should_stop_early)
    assert models._EARLY in src and "done training" in inspect.getsource(train.main)


def _log(tmp_path, *lines):
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_stop_of_tells_plateau_from_cap_and_unfinished(tmp_path):
    assert models.stop_of(tmp_path) is None  # no log
    v = "2026-11-28 | INFO | valid | epoch 0{} | valid on 'valid' subset | loss 3.1 | num_updates {}"
    _log(tmp_path, v.format(1, 113), v.format(2, 226))
    assert models.stop_of(tmp_path) is None  # killed before the end
    _log(tmp_path, v.format(1, 113), v.format(2, 226),
         f"INFO | fairseq_cli.train | {models._EARLY} for last 5 runs", "INFO | done training in 40.0 seconds")
    assert models.stop_of(tmp_path) == ("plateau", 226)
    _log(tmp_path, v.format(1, 113), "INFO | fairseq_cli.train | num_updates 600", "done training in 9.0 seconds")
    assert models.stop_of(tmp_path) == ("cap", 600)
    other = tmp_path / "none"
    assert models.stops_line({"(a) s1": tmp_path, "(a) s2": other}) == "(a) s1: cap of 600 updates reached"
