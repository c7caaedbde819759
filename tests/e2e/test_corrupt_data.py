"""Corrupt data reaches no fairseq traceback: train.sh and generate.sh check
a data folder first and name the broken file and what to re-run, in one line
(fairseq_local_data.databin)."""

import shutil

import pytest

from fairseq_local_data.databin import check_folder
from helpers import TINY, run
from helpers.probes import one_line_error

pytestmark = pytest.mark.slow  # runs the scripts as processes


def _truncate(path, keep):
    path.write_bytes(path.read_bytes()[:keep])


def _translation_checkpoint(tmp_path):
    """A file generate.sh takes for a translation checkpoint (it is refused on the data before fairseq runs)."""
    import torch

    path = tmp_path / "model.pt"
    torch.save({"cfg": {"model": {"_name": "transformer_local_baseline"}, "task": {"_name": "translation"}},
                "model": {}}, path)
    return path


CASES = {
    "truncated bin": ("train.src-tgt.src.bin", lambda p: _truncate(p, p.stat().st_size // 2), "shorter than its index says"),
    "empty bin": ("train.src-tgt.tgt.bin", lambda p: p.write_bytes(b""), "shorter than its index says"),
    "truncated idx": ("train.src-tgt.src.idx", lambda p: _truncate(p, p.stat().st_size - 5), "is truncated"),
    "junk idx": ("valid.src-tgt.tgt.idx", lambda p: p.write_bytes(b"junk" * 20), "not a fairseq mmap index"),
    "garbage dictionary line": ("dict.src.txt", lambda p: p.write_text(p.read_text() + "nocount\n"),
                                "not a fairseq dictionary (line"),
    "dictionary not UTF-8": ("dict.tgt.txt", lambda p: p.write_bytes(p.read_bytes() + b"\xff\xfe 3\n"), "not UTF-8"),
}


@pytest.mark.parametrize("case", CASES)
def test_broken_data_is_one_line_naming_the_file(tiny_data, tmp_path, case):
    name, damage, needle = CASES[case]
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    assert check_folder(str(data)) > 0  # the intact folder passes
    damage(data / name)
    broken = name.replace(".idx", ".bin") if "bin" in case else name
    for cmd in (["bash", "scripts/train.sh", "--data", data, "--arch", "a", "--save-dir", tmp_path / "run", "--",
                 *TINY, "--max-update", "2"],
                ["bash", "scripts/generate.sh", "--data", data, "--checkpoint", _translation_checkpoint(tmp_path),
                 "--out", tmp_path / "gen", "--subset", "valid"]):
        r = run([str(c) for c in cmd], check=False)
        assert r.returncode == 1
        one_line_error(r.stderr, f"'{data / broken}' ", needle, f"re-run the step that wrote '{data}'")
    assert not (tmp_path / "run").exists() and not (tmp_path / "gen").exists()
