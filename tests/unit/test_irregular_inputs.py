"""Inputs that are not files (a FIFO, /dev/zero) are refused in one line
before anything reads them, and CoNLL-U trees that are not trees (a cycle,
no root, two roots) are refused naming the sentence and line."""

import os
import signal

import pytest

from fairseq_local.analysis.dump import AnalysisError, load_dump
from fairseq_local.attention.masks.base import MaskSpecError
from fairseq_local.attention.masks.file import load_mask_file
from fairseq_local.checkpoint_compat import Checkpoint
from fairseq_local.errors import InputError
from fairseq_local.outputs import Output, OutputError, check_outputs
from fairseq_local_data.syntax import SyntaxFileError, read_conllu, read_text


@pytest.fixture(params=["fifo", "dev_zero"])
def not_a_file(request, tmp_path):
    if request.param == "dev_zero":
        return "/dev/zero"
    path = tmp_path / "pipe"
    os.mkfifo(path)  # reading it would block until some writer came
    return str(path)


def _hung(signum, frame):
    raise TimeoutError("a reader opened what is not a file and waited on it")


def test_no_reader_opens_what_is_not_a_file(not_a_file):
    signal.signal(signal.SIGALRM, _hung)
    signal.alarm(20)  # a reader that opened the FIFO would wait for a writer forever
    try:
        _readers_refuse(not_a_file)
    finally:
        signal.alarm(0)


def _readers_refuse(not_a_file):
    with pytest.raises(InputError, match="not a regular file: a checkpoint is read only from a file"):
        Checkpoint.read(not_a_file)
    with pytest.raises(MaskSpecError, match="not a regular file"):
        load_mask_file(not_a_file)
    with pytest.raises(AnalysisError, match="not a regular file"):
        load_dump(not_a_file)
    for read in (read_text, read_conllu):
        with pytest.raises(SyntaxFileError, match="not a regular file"):
            read(not_a_file)
    with pytest.raises(OutputError, match="is not a regular file"):
        check_outputs([Output(not_a_file, "table")])


def _conllu(tmp_path, heads):
    rows = "".join(f"{i}\tw{i}\t_\t_\t_\t_\t{h}\tdep\t_\t_\n" for i, h in enumerate(heads, 1))
    good = "1\ta\t_\t_\t_\t_\t0\troot\t_\t_\n2\tb\t_\t_\t_\t_\t1\tdep\t_\t_\n"
    path = tmp_path / "t.conllu"
    path.write_text(good + "\n" + rows + "\n")
    return str(path)


@pytest.mark.parametrize("heads,why", [([0, 3, 4, 2], "words 2, 3, 4 form a cycle of HEADs: not a tree"),
                                        ([2, 1], "0 words have HEAD 0 (none): a tree has exactly one root"),
                                        ([0, 1, 0], "2 words have HEAD 0 (1, 3): a tree has exactly one root")])
def test_trees_that_are_not_trees_are_refused(tmp_path, heads, why):
    path = _conllu(tmp_path, heads)
    with pytest.raises(SyntaxFileError) as e:
        read_conllu(path)
    assert str(e.value) == f"{path}: sentence 2 (line 4): {why}"
