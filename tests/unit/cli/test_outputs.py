"""``fairseq_local.outputs``: atomic writes keep a read-only file's mode and
write through symbolic links, and the probes of a file found at an output
path (is it a checkpoint, is it ours) never unpickle it."""

import os
import stat
from pathlib import Path

import pytest
import torch

from fairseq_local import outputs
from fairseq_local_cli.average import is_average
from fairseq_local.attention.masks import MASK_FILE_FORMAT

CALLS = []


def _record_call():
    """Run by unpickling :class:`Trap`: a probe that unpickles leaves a trace."""
    CALLS.append("unpickled")
    return "trap"


class Trap:
    """Unpickles by calling :func:`_record_call` (as a malicious file would run any code)."""

    def __reduce__(self):
        return (_record_call, ())


@pytest.fixture(autouse=True)
def no_calls():
    CALLS.clear()
    yield
    assert CALLS == [], "a probe unpickled a file"


# ---------------------------------------------------------------- atomic_path


def test_a_read_only_file_is_replaced_and_keeps_its_mode(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("old\n")
    path.chmod(0o444)
    with outputs.atomic_path(path) as tmp:
        # writable while the block writes it (root would not notice a 0444 file)
        assert os.stat(tmp).st_mode & stat.S_IWUSR
        tmp.write_text("new\n")
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        outputs.write_text(tmp_path / "new.txt", "x\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644


def test_a_symlink_is_written_through(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    target = real / "results.md"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.md"
    link.symlink_to(target)
    outputs.write_text(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.md", "real"]
    assert [p.name for p in real.iterdir()] == ["results.md"]  # no temporary file left
    # a dangling link creates its target
    dangling = tmp_path / "dangling.md"
    dangling.symlink_to(real / "later.md")
    outputs.write_text(dangling, "made\n")
    assert dangling.is_symlink() and (real / "later.md").read_text() == "made\n"


def test_a_failed_block_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "masks.pt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with outputs.atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["masks.pt"]


# ---------------------------------------------------------------- probes


def test_pickled_strings_reads_keys_without_unpickling(tmp_path):
    path = tmp_path / "x.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "cfg": {"arch": "a"}, "trap": Trap()}, path)
    strings = outputs.pickled_strings(path)
    assert {"model", "cfg", "arch", "trap"} <= strings
    assert outputs.is_checkpoint(path)
    assert outputs.pickled_strings(tmp_path / "missing.pt") is None
    (tmp_path / "notes.txt").write_text("model cfg\n")
    assert outputs.pickled_strings(tmp_path / "notes.txt") is None
    assert not outputs.is_checkpoint(tmp_path / "notes.txt")


@pytest.mark.parametrize("obj, checkpoint", [
    ({"model": {}, "cfg": {}, "trap": Trap()}, True),
    ({"model": {}, "args": None, "trap": Trap()}, True),
    ({"model": {}, "optimizer_history": [], "trap": Trap()}, True),
    ({"format": MASK_FILE_FORMAT, "masks": {}, "trap": Trap()}, False),
    ([{"tokens": ["a"], "trap": Trap()}], False),
])
def test_is_checkpoint_never_unpickles(tmp_path, obj, checkpoint):
    path = tmp_path / "x.pt"
    torch.save(obj, path)
    assert outputs.is_checkpoint(path) is checkpoint
    assert outputs.torch_format(MASK_FILE_FORMAT)(path) is (isinstance(obj, dict) and "format" in obj)
    assert not is_average(path)


def test_an_average_is_recognised_without_unpickling(tmp_path):
    path = tmp_path / "avg.pt"
    torch.save({"model": {}, "cfg": {}, "averaged_from": ["a.pt"], "trap": Trap()}, path)
    assert is_average(path)


def test_a_malicious_file_at_an_output_path_is_refused_unread(tmp_path):
    path = tmp_path / "out.pt"
    torch.save({"model": {}, "cfg": {}, "trap": Trap()}, path)
    for force in (False, True):
        with pytest.raises(outputs.OutputError, match="is a fairseq checkpoint"):
            outputs.check_outputs([outputs.Output(path, "mask file",
                                                  ours=outputs.torch_format(MASK_FILE_FORMAT))], force=force)
    # one that is not a checkpoint needs --force, and is still not unpickled
    torch.save({"trap": Trap()}, path)
    with pytest.raises(outputs.OutputError, match="pass --force"):
        outputs.check_outputs([outputs.Output(path, "mask file", ours=outputs.torch_format(MASK_FILE_FORMAT))])
    outputs.check_outputs([outputs.Output(path, "mask file")], force=True)


def test_a_legacy_torch_file_is_treated_as_a_checkpoint(tmp_path):
    legacy = tmp_path / "old.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "args": None}, legacy, _use_new_zipfile_serialization=False)
    assert outputs.pickled_strings(legacy) is None and outputs.is_legacy_torch(legacy)
    assert outputs.is_checkpoint(legacy)
    for what in ("mask file", "dump", "CSV table", "figure"):
        with pytest.raises(outputs.OutputError, match="is a fairseq checkpoint: it is never replaced"):
            outputs.check_outputs([outputs.Output(legacy, what)], force=True)
    outputs.check_outputs([outputs.Output(legacy, "averaged checkpoint", checkpoint=True)], force=True)
    # other binary files, text and PNG figures are not checkpoints (replaced with --force)
    for name, data in (("data.bin", bytes(range(256))), ("notes.txt", b"notes\n"),
                       ("fig.png", b"\x89PNG\r\n\x1a\n" + bytes(32)), ("empty", b""),
                       ("pickle.pkl", b"\x80\x02K\x03.")):
        path = tmp_path / name
        path.write_bytes(data)
        assert not outputs.is_legacy_torch(path) and not outputs.is_checkpoint(path), name
        outputs.check_outputs([outputs.Output(path, "CSV table")], force=True)


def test_figure_formats(tmp_path):
    assert outputs.figure_format(tmp_path / "m.png") == "png"
    assert outputs.figure_format(tmp_path / "m.PDF") == "pdf"
    assert outputs.figure_format(tmp_path / "m") == "png"
    with pytest.raises(outputs.OutputError, match=r"unknown figure format '\.xyz' \(use one of .*\.png"):
        outputs.figure_format(tmp_path / "m.xyz")
