"""Preemption while fairseq writes a checkpoint: its copies to
checkpoint_last.pt are atomic, and a run whose checkpoint_last.pt was left
truncated resumes from its newest readable checkpoint, the broken file kept."""

import shutil

import pytest
import torch

from fairseq_local.checkpoint_compat import enable_fairseq_checkpoint_loading
from fairseq_local_cli import check_resume
from fairseq_local.errors import InputError
from fairseq_local.checkpoint_compat import atomic_copy
from fairseq_local.recover import recover_last


def _ckpt(path, updates):
    torch.save({"cfg": {"model": {"_name": "transformer_local_baseline"}}, "model": {"w": torch.full((4,), updates)},
                "optimizer_history": [{"num_updates": updates}]}, path)
    return path


def _killed_copy(monkeypatch):
    """shutil.copyfile that writes half of the file, then is killed."""
    real = shutil.copyfile

    def copy(src, dst, *a, **k):
        real(src, dst)
        data = open(dst, "rb").read()
        open(dst, "wb").write(data[: len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copyfile", copy)


def test_a_killed_copy_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    old, new = _ckpt(tmp_path / "checkpoint_last.pt", 2), _ckpt(tmp_path / "checkpoint_3_4.pt", 4)
    before = old.read_bytes()
    _killed_copy(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        atomic_copy(str(new), str(old), overwrite=True)
    assert old.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint_3_4.pt", "checkpoint_last.pt"]  # no temporary file left


def test_fairseqs_checkpoint_copies_are_atomic(tmp_path, monkeypatch):
    from fairseq import checkpoint_utils

    enable_fairseq_checkpoint_loading()
    old, new = _ckpt(tmp_path / "checkpoint_last.pt", 2), _ckpt(tmp_path / "checkpoint_3_4.pt", 4)
    before = old.read_bytes()
    _killed_copy(monkeypatch)
    with pytest.raises(KeyboardInterrupt):  # as save_checkpoint copies its first name to the others
        checkpoint_utils.PathManager.copy(str(new), str(old), overwrite=True)
    assert old.read_bytes() == before
    monkeypatch.undo()
    assert checkpoint_utils.PathManager.copy(str(new), str(old), overwrite=True) and old.read_bytes() == new.read_bytes()


def test_a_truncated_last_checkpoint_is_replaced_by_the_newest_readable(tmp_path, capsys):
    _ckpt(tmp_path / "checkpoint_best.pt", 4)
    newest = _ckpt(tmp_path / "checkpoint_2_6.pt", 6)
    _ckpt(tmp_path / "checkpoint_1_3.pt", 3)
    (tmp_path / "checkpoint_3_9.pt").write_bytes(newest.read_bytes()[:100])  # a broken epoch checkpoint too
    last = _ckpt(tmp_path / "checkpoint_last.pt", 6)
    broken = last.read_bytes()[:1000]
    last.write_bytes(broken)
    used, updates, kept = recover_last(tmp_path)
    assert (used.name, updates, kept.name) == ("checkpoint_2_6.pt", 6, "checkpoint_last.pt.unreadable")
    assert last.read_bytes() == newest.read_bytes() and kept.read_bytes() == broken  # kept aside, not deleted
    # the scripts' resume check does it and says so in one line
    last.write_bytes(broken)
    with pytest.raises(SystemExit):  # the training arguments are not this test's subject
        check_resume.main([str(last), "--help"])
    err = capsys.readouterr().err
    assert (f"note: '{last}' cannot be read (a job killed while writing it?): kept as "
            "'checkpoint_last.pt.unreadable-2'; resuming from 'checkpoint_2_6.pt' (update 6)") in err
    assert last.read_bytes() == newest.read_bytes()


def test_without_a_readable_checkpoint_the_run_is_refused_untouched(tmp_path):
    last = _ckpt(tmp_path / "checkpoint_last.pt", 6)
    last.write_bytes(last.read_bytes()[:1000])
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InputError, match=r"cannot resume from .*checkpoint_last.pt': .*, and no other checkpoint in "
                                         r".* can be read \(move it away to start the run afresh\)"):
        check_resume.main([str(last)])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
