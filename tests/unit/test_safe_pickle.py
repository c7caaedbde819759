"""No code runs from a checkpoint: the plugin's reader and fairseq's loader
read weights only, with exactly the types fairseq's checkpoints hold; a file
that needs another type is refused in one line naming it, and runs nothing."""

import argparse
import os

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from fairseq_local.checkpoint_compat import Checkpoint, enable_fairseq_checkpoint_loading
from fairseq_local.errors import InputError
from fairseq_local.safe_pickle import TRUST_ENV


class _Payload:
    """Unpickled, it creates ``marker``: what a crafted checkpoint could do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _state(**extra):
    return {"cfg": {"model": {"_name": "transformer_local_baseline"}, "task": {"_name": "translation"}},
            "model": {"w": torch.ones(2)}, **extra}


@pytest.fixture
def payload(tmp_path):
    path, marker = tmp_path / "payload.pt", tmp_path / "ran"
    torch.save(_state(extra_state={"x": _Payload(marker)}), path)
    return path, marker


def test_the_types_fairseq_checkpoints_hold_are_read(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    path = tmp_path / "ok.pt"
    cfg = OmegaConf.create({"model": {"_name": "x", "n": 1, "f": 0.5, "l": [1, 2], "s": None}})
    torch.save(_state(args=argparse.Namespace(arch="transformer_local_baseline", lr=[0.1]), omegaconf=cfg,
                      best=np.float64(1.5), steps=np.int64(3), flags=np.zeros(3, dtype=np.float32), ok=np.bool_(True)),
               path)
    state = Checkpoint.read(str(path)).state
    assert state["args"].lr == [0.1] and state["omegaconf"].model.l[1] == 2 and state["best"] == 1.5
    assert state["flags"].dtype == np.float32 and torch.equal(state["model"]["w"], torch.ones(2))


def test_a_payload_is_refused_by_the_plugins_reader(payload, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    path, marker = payload
    with pytest.raises(InputError, match=r"holds a posix\.system object, which no fairseq or fairseq-local "
                                         r"checkpoint holds: not loaded, since unpickling it could run code"):
        Checkpoint.read(str(path))
    assert not marker.exists()


def test_a_payload_is_refused_by_fairseqs_loader(payload, monkeypatch):
    from fairseq import checkpoint_utils

    monkeypatch.delenv(TRUST_ENV, raising=False)
    enable_fairseq_checkpoint_loading()
    path, marker = payload
    with pytest.raises(InputError, match=r"posix\.system"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert not marker.exists()


def test_the_commands_refuse_it_in_one_line(payload, monkeypatch, capsys):
    from fairseq_local_cli.main import main

    monkeypatch.delenv(TRUST_ENV, raising=False)
    path, marker = payload
    text = path.parent / "in.txt"
    text.write_text("a b c\n")
    run = path.parent / "runs" / "a"  # a run whose checkpoints are all crafted
    run.mkdir(parents=True)
    for name in ("checkpoint1.pt", "checkpoint2.pt", "checkpoint_best.pt", "checkpoint_last.pt"):
        (run / name).write_bytes(path.read_bytes())
    for argv in (["inspect", str(path)], ["inspect", str(path), "--field", "arch"], ["gates", str(path)],
                 ["average", str(run), "--num", "2", "--output", str(path.parent / "avg.pt")],
                 ["results", str(run.parent)], ["export", str(path), "--out", str(path.parent / "m.pt")],
                 ["attention", "dump", "--path", str(path), "--text", str(text), "--out", str(path.parent / "d.pt")],
                 ["analyze", "sensitivity", "--path", str(path), "--text", str(text), "--out", str(path.parent / "s")]):
        try:
            status = main(argv)
        except SystemExit as e:  # inspect's own parser exits with 2
            status = e.code
        assert status in (1, 2), argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and " holds a posix.system object" in err[0] and err[0].startswith("error: "), argv
    assert not marker.exists()


def test_trusting_is_an_explicit_choice_with_a_warning(payload, monkeypatch, capsys):
    from fairseq_local_cli.main import main

    monkeypatch.delenv(TRUST_ENV, raising=False)
    path, marker = payload
    main(["--trust-checkpoint", "inspect", str(path), "--field", "arch"])
    assert os.environ[TRUST_ENV] == "1" and marker.exists()  # the user asked for it
    assert "checkpoints are unpickled in full, which runs any code a file holds" in capsys.readouterr().err
