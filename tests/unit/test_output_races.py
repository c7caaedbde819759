"""Races closed at the rename: a file that appeared at an output path, or
changed there, after the command checked it is left as it is, unless --force."""

import pytest

from fairseq_local import outputs
from fairseq_local.outputs import Output, OutputError, check_outputs, save_torch, write_text


def _ours(path):
    return path.read_text().startswith("ours")


def test_a_file_that_appeared_since_the_check_is_not_replaced(tmp_path):
    path = tmp_path / "avg.pt"
    check_outputs([Output(str(path), "averaged checkpoint", checkpoint=True)])
    path.write_text("another job's mask file")  # written by another command meanwhile
    with pytest.raises(OutputError, match=r"changed since this command checked it \(another job writing the same "
                                          r"file\?\): left as it is; pass --force"):
        save_torch({"x": 1}, path)
    assert path.read_text() == "another job's mask file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["avg.pt"]  # no temporary file left


def test_a_previous_output_replaced_since_the_check_is_not_replaced(tmp_path):
    path = tmp_path / "table.md"
    path.write_text("ours, old")
    check_outputs([Output(str(path), "table", _ours)])
    other = tmp_path / "other"
    other.write_text("ours, from the other job")
    other.replace(path)
    with pytest.raises(OutputError, match="changed since this command checked it"):
        write_text(path, "ours, new")
    assert path.read_text() == "ours, from the other job"


def test_unchanged_outputs_and_force_are_written(tmp_path):
    fresh, old, forced = tmp_path / "a.md", tmp_path / "b.md", tmp_path / "c.md"
    old.write_text("ours, old")
    check_outputs([Output(str(fresh), "table", _ours), Output(str(old), "table", _ours)])
    write_text(fresh, "ours, 1")
    write_text(old, "ours, 2")
    write_text(fresh, "ours, 3")  # the command's own second write of a path
    assert (fresh.read_text(), old.read_text()) == ("ours, 3", "ours, 2")
    check_outputs([Output(str(forced), "table", _ours)], force=True)
    forced.write_text("someone else's")
    write_text(forced, "ours, forced")
    assert forced.read_text() == "ours, forced" and str(forced) not in outputs._CHECKED
