"""Issue #19, "nothing lost", for ``fairseq-local average``: never an output
over one of the run's checkpoints, an earlier average replaced without
--force and any other file only with it, bad checkpoints (truncated, another
model, a folder) and unwritable outputs reported in one line with nothing
written, and non-tensor state-dict entries kept from the newest checkpoint."""

from pathlib import Path
from typing import Dict, Optional

import pytest
import torch

from fairseq_local_cli.average import MARKER
from helpers.probes import bad_outputs, digest, one_line_error, run_command


def save_checkpoint(path: Path, updates: int, value: float, extra: Optional[Dict] = None,
                    keys=("encoder.w", "decoder.w")) -> None:
    """A small fairseq-like checkpoint: float parameters filled with
    ``value``, an integer buffer, and ``extra`` entries of the state dict."""
    model = {k: torch.full((2, 3), value) for k in keys}
    model["encoder.version"] = torch.tensor([3])
    model.update(extra or {})
    torch.save({"cfg": {"model": {"arch": "transformer_local"}}, "model": model,
                "optimizer_history": [{"num_updates": updates}], "extra_state": {}}, path)


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A run with interval checkpoints at 10, 20 and 30 updates, best and last."""
    run = tmp_path / "run"
    run.mkdir()
    for updates, value in ((10, 1.0), (20, 2.0), (30, 4.0)):
        save_checkpoint(run / f"checkpoint_1_{updates}.pt", updates, value)
    save_checkpoint(run / "checkpoint_best.pt", 20, 2.0)
    save_checkpoint(run / "checkpoint_last.pt", 30, 4.0)
    return run


def load(path: Path) -> Dict:
    return torch.load(path, map_location="cpu", weights_only=False)


def test_averages_the_newest_and_marks_the_output(run_dir, tmp_path, capsys):
    status, _, _ = run_command(capsys, ["average", run_dir, "--num", "2", "--output", tmp_path / "avg.pt"])
    assert status == 0
    state = load(tmp_path / "avg.pt")
    assert state[MARKER] == ["checkpoint_1_30.pt", "checkpoint_1_20.pt"]
    assert torch.equal(state["model"]["encoder.w"], torch.full((2, 3), 3.0))
    assert state["optimizer_history"][-1]["num_updates"] == 30


def test_output_over_a_checkpoint_of_the_run_is_refused(run_dir, capsys):
    before = digest([run_dir])
    status, out, err = run_command(capsys, ["average", run_dir, "--num", "2", "--output",
                                            run_dir / "checkpoint_1_20.pt"])
    assert status == 1 and out == ""
    one_line_error(err, "checkpoint_1_20.pt", "is an input of this command")
    assert digest([run_dir]) == before
    # one of the run's checkpoints that would not be averaged is refused too
    status, _, err = run_command(capsys, ["average", run_dir, "--num", "1", "--output",
                                          run_dir / "checkpoint_1_10.pt", "--force"])
    assert status == 1
    one_line_error(err, "is an input of this command")
    assert digest([run_dir]) == before


def test_a_rerun_replaces_its_own_output_and_other_files_need_force(run_dir, tmp_path, capsys):
    out = run_dir / "checkpoint_mean.pt"  # inside the run, named like a checkpoint
    assert run_command(capsys, ["average", run_dir, "--num", "2", "--output", out])[0] == 0
    # a re-run replaces it without --force, and does not average it
    assert run_command(capsys, ["average", run_dir, "--num", "3", "--output", out])[0] == 0
    assert load(out)[MARKER] == ["checkpoint_1_30.pt", "checkpoint_1_20.pt", "checkpoint_1_10.pt"]
    # another checkpoint, and a file that is not one, only with --force
    save_checkpoint(tmp_path / "other.pt", 99, 9.0)
    (tmp_path / "notes.txt").write_text("keep me\n")
    for target in (tmp_path / "other.pt", tmp_path / "notes.txt"):
        before = digest([target])
        status, _, err = run_command(capsys, ["average", run_dir, "--num", "2", "--output", target])
        assert status == 1
        one_line_error(err, str(target), "--force")
        assert digest([target]) == before
        assert run_command(capsys, ["average", run_dir, "--num", "2", "--output", target, "--force"])[0] == 0
        assert MARKER in load(target)


@pytest.mark.parametrize("bad, message", [
    ("truncated", "checkpoint_1_40.pt' is not a fairseq checkpoint (truncated, or not a torch file"),
    ("other_model", "not the same model"),
    ("other_shape", "not the same model"),
    ("folder", "is a folder, not a checkpoint"),
    ("not_a_checkpoint", "not a fairseq checkpoint"),
])
def test_bad_checkpoints_in_the_run_are_one_line(run_dir, tmp_path, capsys, bad, message):
    path = run_dir / "checkpoint_1_40.pt"
    if bad == "truncated":
        data = (run_dir / "checkpoint_1_30.pt").read_bytes()
        path.write_bytes(data[:len(data) // 2])
    elif bad == "other_model":
        save_checkpoint(path, 40, 8.0, keys=("encoder.w", "encoder.other"))
    elif bad == "other_shape":
        save_checkpoint(path, 40, 8.0, extra={"decoder.w": torch.zeros(3, 3)})
    elif bad == "folder":
        path.mkdir()
    else:
        torch.save([1, 2, 3], path)
    before = digest([run_dir])
    status, out, err = run_command(capsys, ["average", run_dir, "--num", "2", "--output", tmp_path / "avg.pt"])
    assert status == 1
    one_line_error(err, message)
    assert not (tmp_path / "avg.pt").exists() and digest([run_dir]) == before


def signed(layout: str, prefix: str = "encoder.") -> Dict:
    """The ``_extra_state`` entry in which an encoder saves its signature."""
    return {f"{prefix}_extra_state": {"signature": {"arch": "transformer_local", "attn_layout": layout,
                                                    "mask_mode": "bool"}}}


@pytest.mark.parametrize("prefix", ["encoder.", "encoder.sentence_encoder."])
def test_checkpoints_of_different_fixed_mask_archs_are_refused(tmp_path, capsys, prefix):
    """Fixed-mask archs share parameter names and shapes: the saved
    signatures tell them apart."""
    run = tmp_path / "run"
    run.mkdir()
    save_checkpoint(run / "checkpoint1.pt", 10, 1.0, extra=signed("[global*8]*6", prefix))
    save_checkpoint(run / "checkpoint2.pt", 20, 3.0, extra=signed("[band-1*8]*6", prefix))
    before = digest([tmp_path])
    status, out, err = run_command(capsys, ["average", run, "--num", "2", "--output", tmp_path / "avg.pt"])
    assert status == 1 and out == ""
    one_line_error(err, "checkpoint1.pt", "checkpoint2.pt", "different models",
                   "--attn-layout [global*8]*6 vs [band-1*8]*6", "not the same model")
    assert digest([tmp_path]) == before
    # the same signature averages
    save_checkpoint(run / "checkpoint1.pt", 10, 1.0, extra=signed("[band-1*8]*6", prefix))
    assert run_command(capsys, ["average", run, "--num", "2", "--output", tmp_path / "avg.pt"])[0] == 0
    assert load(tmp_path / "avg.pt")["model"][f"{prefix}_extra_state"] == signed("[band-1*8]*6", prefix)[
        f"{prefix}_extra_state"]


def test_too_few_checkpoints_is_one_line(run_dir, tmp_path, capsys):
    status, _, err = run_command(capsys, ["average", run_dir, "--num", "9", "--output", tmp_path / "avg.pt"])
    assert status == 1
    one_line_error(err, "cannot average 9 checkpoints")


def test_non_tensor_entries_are_kept_from_the_newest(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    save_checkpoint(run / "checkpoint1.pt", 10, 1.0, extra={"encoder._extra_state": {"layout": "old"}})
    save_checkpoint(run / "checkpoint2.pt", 20, 3.0, extra={"encoder._extra_state": {"layout": "new"}})
    save_checkpoint(run / "checkpoint3.pt", 5, 0.0)  # older, without the entry: not averaged with --num 2
    assert run_command(capsys, ["average", run, "--num", "2", "--output", tmp_path / "avg.pt"])[0] == 0
    model = load(tmp_path / "avg.pt")["model"]
    assert model["encoder._extra_state"] == {"layout": "new"}
    assert torch.equal(model["decoder.w"], torch.full((2, 3), 2.0))
    assert torch.equal(model["encoder.version"], torch.tensor([3]))
    # a checkpoint without the entry averages with one that has it: tensors alone are compared
    assert run_command(capsys, ["average", run, "--num", "3", "--output", tmp_path / "avg.pt"])[0] == 0
    assert load(tmp_path / "avg.pt")["model"]["encoder._extra_state"] == {"layout": "new"}


@pytest.mark.parametrize("case", ["proc", "folder", "under_file", "missing_parent"])
def test_unwritable_output_is_one_line_and_writes_nothing(run_dir, tmp_path, capsys, case):
    target = bad_outputs(tmp_path, "avg.pt")[case]
    before = digest([tmp_path])
    status, out, err = run_command(capsys, ["average", run_dir, "--num", "2", "--output", target])
    assert status == 1 and out == ""
    one_line_error(err)
    assert digest([tmp_path]) == before


def test_an_unmarked_checkpoint_avg_n_of_the_run_is_replaced(run_dir, capsys):
    """RUN/checkpoint_avgN.pt is where scripts/evaluate-wmt14.sh keeps the
    average, also one written before averages were marked."""
    save_checkpoint(run_dir / "checkpoint_avg2.pt", 30, 0.0)
    assert run_command(capsys, ["average", run_dir, "--num", "2", "--output", run_dir / "checkpoint_avg2.pt"])[0] == 0
    assert MARKER in load(run_dir / "checkpoint_avg2.pt")
