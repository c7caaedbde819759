"""Issue #19, "nothing lost", for ``convert-roberta``, ``sparsity`` and
``benchmark``: OUT.pt replaces only an earlier conversion (else --force),
unwritable outputs and sizes that no run could finish are one ``error:``
line before any work, and file masks and misplaced modifiers get messages
that name the real problem."""

from pathlib import Path

import pytest
import torch

from fairseq_local.models.convert import MARKER
from fairseq_local.attention.masks import MASK_FILE_FORMAT
from helpers.probes import bad_outputs, digest, one_line_error, run_command
from test_convert_roberta import save_stock, stock_model

ARCH = ["--arch", "roberta_local_base"]


@pytest.fixture(scope="module")
def stock_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("stock") / "stock.pt"
    save_stock(stock_model(), path)
    return path


# ---------------------------------------------------------------- convert-roberta


def test_convert_replaces_only_its_own_output_without_force(stock_path, tmp_path, capsys):
    out = tmp_path / "out.pt"
    assert run_command(capsys, ["convert-roberta", stock_path, out, *ARCH])[0] == 0
    assert torch.load(out, map_location="cpu", weights_only=False)[MARKER] == "stock.pt"
    # a re-run replaces its own output
    assert run_command(capsys, ["convert-roberta", stock_path, out, *ARCH])[0] == 0
    # another checkpoint, and a file that is not one: refused, unchanged; replaced with --force
    other = tmp_path / "other.pt"
    save_stock(stock_model(seed=3), other)
    (tmp_path / "notes.txt").write_text("keep me\n")
    for target in (other, tmp_path / "notes.txt"):
        before = digest([target, stock_path])
        status, stdout, err = run_command(capsys, ["convert-roberta", stock_path, target, *ARCH])
        assert status == 2 and stdout == ""
        one_line_error(err, str(target), "--force")
        assert digest([target, stock_path]) == before
        assert run_command(capsys, ["convert-roberta", stock_path, target, *ARCH, "--force"])[0] == 0
        assert MARKER in torch.load(target, map_location="cpu", weights_only=False)


def test_convert_never_writes_over_its_input(stock_path, capsys):
    before = digest([stock_path])
    status, _, err = run_command(capsys, ["convert-roberta", stock_path, stock_path, *ARCH, "--force"])
    assert status == 2
    one_line_error(err, "IN.pt")
    assert digest([stock_path]) == before


@pytest.mark.parametrize("case", ["proc", "folder", "under_file", "missing_parent"])
def test_convert_unwritable_output_is_one_line(stock_path, tmp_path, capsys, case):
    target = bad_outputs(tmp_path, "out.pt")[case]
    before = digest([tmp_path, stock_path])
    status, stdout, err = run_command(capsys, ["convert-roberta", stock_path, target, *ARCH])
    assert status == 2 and stdout == ""
    one_line_error(err)
    assert digest([tmp_path, stock_path]) == before


# ---------------------------------------------------------------- sparsity


@pytest.mark.parametrize("argv, needles", [
    (["--n", "100000"], ["--n must be at most 4096, not 100000"]),
    (["--seeds", "1000000"], ["--seeds must be at most 1000"]),
    (["file"], ["'file' alone", "file-0.3", "--mask-file FILE"]),
    (["file-0.1"], ["head 0.1 of a mask file", "--mask-file FILE"]),
    (["band-2@a:gate"], ["not a mask token", "layout head", "MASK[:gate][@NAME|@@NAME][*N]"]),
    (["band-99999999999999999999"], ["k must be at most 1,000,000"]),
    (["random-2-s" + "9" * 5000], ["SEED must be at most"]),
])
def test_sparsity_bad_input_is_one_line(capsys, argv, needles):
    status, out, err = run_command(capsys, ["sparsity", *argv])
    assert status == 2 and out == ""
    line = one_line_error(err, *needles)
    assert len(line) < 300


def test_sparsity_of_a_file_mask(tmp_path, capsys):
    matrix = torch.zeros(8, 8, dtype=torch.bool)
    matrix[:, 0] = True  # one key per query: 1 - 8/64
    path = tmp_path / "masks.pt"
    torch.save({"format": MASK_FILE_FORMAT, "masks": {"0.1": {"matrix": matrix, "ends": False}}}, path)
    status, out, _ = run_command(capsys, ["sparsity", "file-0.1", "--mask-file", path, "--n", "8"])
    assert status == 0 and "87.5" in out
    status, _, err = run_command(capsys, ["sparsity", "file-0.1", "--mask-file", path, "--n", "9"])
    assert status == 2
    one_line_error(err, "--n 9 is longer than mask file-0.1", "8 positions")
    status, _, err = run_command(capsys, ["sparsity", "file-1.1", "--mask-file", path, "--n", "8"])
    assert status == 2
    one_line_error(err, "has no head 1.1")


# ---------------------------------------------------------------- benchmark

KERNEL = ["kernels", "--cases", "mixed", "--lengths", "4", "--heads", "2", "--head-dim", "4", "--min-time", "0",
          "--impls", "auto", "--repeats", "1", "--warmup", "0", "--quiet"]


@pytest.mark.parametrize("argv, needles", [
    (["kernels", "--lengths", "100000000"], ["--lengths: must be at most 65536, not 100000000"]),
    (["kernels", "--heads", "99999"], ["--heads: must be at most 1024"]),
    (["kernels", "--lengths", "65536", "--heads", "1024", "--head-dim", "1024"],
     ["the inputs and weights alone take", "above --max-memory 8 GiB"]),
])
def test_benchmark_sizes_are_checked_before_any_work(capsys, argv, needles):
    status, out, err = run_command(capsys, ["benchmark", *argv])
    assert status == 2 and out == ""
    one_line_error(err, *needles)


@pytest.mark.parametrize("case", ["proc", "folder", "under_file", "missing_parent"])
def test_benchmark_unwritable_markdown_is_one_line(tmp_path, capsys, case):
    target = bad_outputs(tmp_path, "bench.md")[case]
    before = digest([tmp_path])
    status, out, err = run_command(capsys, ["benchmark", *KERNEL, "--markdown", target])
    assert status == 2 and out == ""
    line = one_line_error(err, "--markdown")
    assert digest([tmp_path]) == before
    if case == "missing_parent":  # said once, clearly
        assert line == f"error: --markdown: No such file or directory: folder '{target.parent}' (of '{target}')"


@pytest.mark.slow  # starts a process
def test_benchmark_markdown_never_appends_to_a_checkpoint_or_binary(stock_path, tmp_path, capsys):
    before = digest([stock_path])
    status, _, err = run_command(capsys, ["benchmark", *KERNEL, "--markdown", stock_path, "--force"])
    assert status == 2
    one_line_error(err, "fairseq checkpoint")
    assert digest([stock_path]) == before
    binary = tmp_path / "data.bin"
    binary.write_bytes(bytes(range(256)))
    status, _, err = run_command(capsys, ["benchmark", *KERNEL, "--markdown", binary])
    assert status == 2
    one_line_error(err, "--force")
    assert binary.read_bytes() == bytes(range(256))
    # a new file is only created once a table is ready
    new = tmp_path / "new.md"
    assert run_command(capsys, ["benchmark", *KERNEL, "--markdown", new])[0] == 0
    assert new.read_text().startswith("**kernels**: ")
