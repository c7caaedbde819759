"""Issue #19, "nothing lost", for ``export``, ``gates``, ``attention dump``
and ``--mask-file``: no output over an input or a checkpoint, nothing over
another file without --force, every output checked before any is written,
and bad input files (stock checkpoints, dumps, mask files, truncated files,
hand-made mask files) reported in one line."""

import argparse
import copy
from pathlib import Path

import pytest
import torch

from fairseq_local.analysis.dump import save_dump
from fairseq_local.attention.learned import DamMask
from fairseq_local.attention.masks import MASK_FILE_FORMAT, FileMask, MaskSpecError, load_mask_file
from fairseq_local.models.roberta import build_roberta
from helpers.probes import bad_outputs, digest, one_line_error, run_command

TINY = dict(encoder_layers=2, encoder_attention_heads=4, encoder_embed_dim=32, encoder_ffn_embed_dim=64,
            max_positions=64)


@pytest.fixture
def ckpt(tmp_path) -> Path:
    """A fairseq-like checkpoint with dam-s and dam-u heads (shared by both
    layers) and a gated global head."""
    s, u = DamMask(True, 10), DamMask(False, 10)
    torch.manual_seed(0)
    for m in (s, u):
        torch.nn.init.normal_(m.alpha, std=2.0)
    state = {}
    for layer in range(2):
        state[f"encoder.layers.{layer}.self_attn.learned.dam.0.alpha"] = s.alpha.data
        state[f"encoder.layers.{layer}.self_attn.learned.dam.1.alpha"] = u.alpha.data
        state[f"encoder.layers.{layer}.self_attn.gates.log_alpha"] = torch.tensor([0.5])
    cfg = argparse.Namespace(arch="transformer_local", attn_layout="[dam-s,dam-u@a,band-1@a,global:gate]*2")
    path = tmp_path / "checkpoint_best.pt"
    torch.save({"cfg": {"model": cfg}, "model": state, "optimizer_history": []}, path)
    return path


@pytest.fixture
def stock(tmp_path) -> Path:
    """fairseq's own roberta_base (tiny), saved as fairseq-train saves it."""
    model = build_roberta("roberta_base", dict(TINY), vocab_size=40)
    args = copy.deepcopy(model.args)
    args.arch = args._name = "roberta_base"
    path = tmp_path / "stock.pt"
    torch.save({"cfg": {"model": args, "task": {"_name": "masked_lm"}}, "model": model.state_dict()}, path)
    return path


@pytest.fixture
def dump(tmp_path) -> Path:
    path = tmp_path / "attention.pt"
    save_dump([{"tokens": ["a", "</s>"], "word_ids": [0, -1], "words": ["a"], "attn": torch.zeros(1, 1, 2, 2)}],
              str(path))
    return path


def truncated(path: Path, tmp_path: Path) -> Path:
    """The first half of ``path``'s bytes."""
    out = tmp_path / f"truncated-{path.name}"
    data = path.read_bytes()
    out.write_bytes(data[:len(data) // 2])
    return out


# ---------------------------------------------------------------- export outputs


def test_export_refuses_to_write_over_its_checkpoint(ckpt, capsys):
    before = digest([ckpt])
    for extra in ([], ["--force"]):
        status, out, err = run_command(capsys, ["export", ckpt, "--out", ckpt, *extra])
        assert status == 1 and out == ""
        one_line_error(err, f"the mask file '{ckpt}' is an input of this command")
        status, _, err = run_command(capsys, ["export", ckpt, "--out", "mask.pt", "--png", ckpt, *extra])
        assert status == 1
        one_line_error(err, f"the figure '{ckpt}' is an input of this command")
    assert digest([ckpt]) == before


def test_export_never_replaces_another_checkpoint(ckpt, stock, capsys):
    before = digest([ckpt, stock])
    for extra in ([], ["--force"]):
        status, _, err = run_command(capsys, ["export", ckpt, "--out", stock, *extra])
        assert status == 1
        one_line_error(err, f"'{stock}' is a fairseq checkpoint: it is never replaced by a mask file")
    assert digest([ckpt, stock]) == before


def test_export_replaces_its_own_output_and_other_files_only_with_force(ckpt, tmp_path, capsys):
    out, png = tmp_path / "masks.pt", tmp_path / "masks.png"
    for _ in range(2):  # the second run replaces its own outputs without --force
        status, stdout, _ = run_command(capsys, ["export", ckpt, "--out", out, "--png", png])
        assert status == 0 and f"to {out}" in stdout
        assert torch.load(out, weights_only=True)["format"] == MASK_FILE_FORMAT
        assert png.read_bytes()[:4] == b"\x89PNG"
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    before = digest([notes, out, png])
    for args in (["--out", notes, "--png", png], ["--out", out, "--png", notes]):
        status, _, err = run_command(capsys, ["export", ckpt, *args])
        assert status == 1
        one_line_error(err, f"'{notes}' exists and is not a", "pass --force")
    assert digest([notes, out, png]) == before
    status, _, _ = run_command(capsys, ["export", ckpt, "--out", notes, "--force"])
    assert status == 0 and torch.load(notes, weights_only=True)["format"] == MASK_FILE_FORMAT


@pytest.mark.parametrize("which", ["--out", "--png"])
def test_export_unwritable_outputs_write_nothing(ckpt, tmp_path, capsys, which):
    work = tmp_path / "work"
    work.mkdir()
    for case, bad in bad_outputs(work, "x.png" if which == "--png" else "x.pt").items():
        before = digest([tmp_path])
        good = {"--out": work / "masks.pt", "--png": work / "masks.png"}
        good[which] = bad
        status, out, err = run_command(capsys, ["export", ckpt, "--out", good["--out"], "--png", good["--png"]])
        assert status == 1 and out == "", case
        one_line_error(err, "cannot write the")
        assert digest([tmp_path]) == before, case  # neither output written, no temporary file left


def test_export_unknown_figure_format_is_one_line_before_anything_is_written(ckpt, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    before = digest([tmp_path])
    status, out, err = run_command(capsys, ["export", ckpt, "--out", work / "m.pt", "--png", work / "m.xyz"])
    assert status == 1 and out == ""
    one_line_error(err, "m.xyz", "unknown figure format '.xyz'", ".png")
    assert digest([tmp_path]) == before
    # another format matplotlib writes is fine
    assert run_command(capsys, ["export", ckpt, "--out", work / "m.pt", "--png", work / "m.svg"])[0] == 0
    assert b"<svg" in (work / "m.svg").read_bytes()


def test_export_failing_figure_leaves_both_old_outputs(ckpt, tmp_path, capsys, monkeypatch):
    """The mask file and the figure are renamed into place only when both are
    written: a figure that fails (a full disk) leaves the old pair."""
    from matplotlib.figure import Figure

    out, png = tmp_path / "masks.pt", tmp_path / "masks.png"
    assert run_command(capsys, ["export", ckpt, "--out", out, "--png", png])[0] == 0
    before = digest([tmp_path])

    def full_disk(self, fname, **kwargs):
        Path(fname).write_bytes(b"\x89PNG half")
        raise OSError(28, "No space left on device", str(fname))

    monkeypatch.setattr(Figure, "savefig", full_disk)
    status, _, err = run_command(capsys, ["export", ckpt, "--out", out, "--png", png, "--prune", "50"])
    assert status == 1
    one_line_error(err, "No space left on device")
    assert digest([tmp_path]) == before  # old mask file and figure, no temporary file left


# ---------------------------------------------------------------- export / gates inputs


@pytest.mark.parametrize("command, needs", [("export", "dam-u/dam-s heads"), ("gates", "gated heads")])
def test_stock_checkpoints_are_named_as_such(stock, tmp_path, capsys, command, needs):
    args = ["--out", tmp_path / "m.pt"] if command == "export" else []
    status, _, err = run_command(capsys, [command, stock, *args])
    assert status == 2
    one_line_error(err, f"'{stock}' is a stock RoBERTa checkpoint without local attention heads (arch roberta_base",
                   f"so it has no {needs}", "convert it with fairseq-local convert-roberta")
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize("command", ["export", "gates"])
def test_dumps_mask_files_and_truncated_checkpoints_are_one_line(ckpt, dump, tmp_path, capsys, command):
    mask_file = tmp_path / "masks.pt"
    assert run_command(capsys, ["export", ckpt, "--out", mask_file])[0] == 0
    args = ["--out", tmp_path / "new.pt"] if command == "export" else []
    cases = {dump: "is an attention dump (fairseq-local attention dump), not a fairseq checkpoint",
             mask_file: "is a mask file written by fairseq-local export, not a fairseq checkpoint",
             truncated(ckpt, tmp_path): "is not a fairseq checkpoint (truncated, or not a torch file"}
    for path, message in cases.items():
        status, _, err = run_command(capsys, [command, path, *args])
        assert status == 2
        one_line_error(err, f"'{path}' {message}")
    assert not (tmp_path / "new.pt").exists()


def test_gates_still_reads_gated_checkpoints(ckpt, capsys):
    status, out, _ = run_command(capsys, ["gates", ckpt])
    assert status == 0 and "open heads: 2 of 2" in out


# ---------------------------------------------------------------- --mask-file


def mask_error(path) -> str:
    load_mask_file.cache_clear()
    with pytest.raises(MaskSpecError) as e:
        FileMask(0, 0, str(path)).entry()
    message = str(e.value)
    assert "\n" not in message, message
    return message


def test_a_checkpoint_or_a_broken_file_as_mask_file_is_one_line(ckpt, dump, tmp_path):
    assert mask_error(ckpt) == (f"'{ckpt}' is not a mask file written by fairseq-local export "
                                f"(it is a fairseq checkpoint)")
    assert mask_error(dump).endswith("(it is an attention dump (fairseq-local attention dump))")
    assert "(truncated, or not a torch file)" in mask_error(truncated(ckpt, tmp_path))
    text = tmp_path / "text.pt"
    text.write_text("not torch\n")
    assert "(truncated, or not a torch file)" in mask_error(text)
    assert "is a folder" in mask_error(tmp_path)


@pytest.mark.parametrize("entry, problem", [
    ({"matrix": torch.ones(3, 4, dtype=torch.bool), "ends": False}, "matrix of shape (3, 4) is not square"),
    ({"matrix": torch.ones(2, 2, 2), "ends": False}, "matrix of shape (2, 2, 2) is not square"),
    ({"matrix": torch.full((3, 3), 0.5), "ends": False}, "matrix has values other than 0/1 (e.g. 0.5)"),
    ({"matrix": torch.tensor([[1, 2], [0, 1]]), "ends": True}, "matrix has values other than 0/1 (e.g. 2)"),
    ({"ends": False}, "no 'matrix' tensor"),
    ({"matrix": torch.ones(2, 2), "ends": "yes"}, "'ends' must be True or False, not 'yes'"),
])
def test_hand_made_mask_files_name_the_entry_and_the_problem(tmp_path, entry, problem):
    path = tmp_path / "hand.pt"
    torch.save({"format": MASK_FILE_FORMAT, "masks": {"0.0": entry}}, path)
    assert mask_error(path) == f"mask file '{path}', entry '0.0': {problem}"


def test_hand_made_0_1_masks_load(tmp_path):
    path = tmp_path / "hand.pt"
    torch.save({"format": MASK_FILE_FORMAT, "masks": {"0.0": {"matrix": torch.eye(4)}}}, path)
    load_mask_file.cache_clear()
    mask = FileMask(0, 0, str(path))
    allowed = mask.allows(torch.arange(4)[:, None], torch.arange(4)[None, :], 4)
    assert torch.equal(allowed, torch.eye(4, dtype=torch.bool))


# ---------------------------------------------------------------- attention dump


@pytest.fixture
def text(tmp_path) -> Path:
    path = tmp_path / "sentences.txt"
    path.write_text("the cat sat\n")
    return path


def test_attention_dump_refuses_to_write_over_its_inputs_and_checkpoints(ckpt, stock, text, capsys):
    before = digest([ckpt, stock, text])
    for extra in ([], ["--force"]):
        for out, message in [(ckpt, f"the dump '{ckpt}' is an input of this command"),
                             (text, f"the dump '{text}' is an input of this command"),
                             (stock, f"'{stock}' is a fairseq checkpoint: it is never replaced by a dump")]:
            status, _, err = run_command(capsys, ["attention", "dump", "--path", ckpt, "--text", text,
                                                  "--out", out, *extra])
            assert status == 1
            one_line_error(err, message)
    assert digest([ckpt, stock, text]) == before


def test_attention_dump_unwritable_outputs_and_other_files(ckpt, text, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    for case, bad in bad_outputs(work, "dump.pt").items():
        before = digest([tmp_path])
        status, _, err = run_command(capsys, ["attention", "dump", "--path", ckpt, "--text", text, "--out", bad])
        assert status == 1, case
        one_line_error(err, "cannot write the dump")
        assert digest([tmp_path]) == before, case
    before = digest([work / "afile"])
    status, _, err = run_command(capsys, ["attention", "dump", "--path", ckpt, "--text", text,
                                          "--out", work / "afile"])
    assert status == 1 and digest([work / "afile"]) == before
    one_line_error(err, "exists and is not a dump written by this command", "--force")


def test_attention_dump_recognises_its_previous_dump(ckpt, dump, text, capsys):
    """A previous dump is replaced without --force: the command goes on to
    load the model (here it fails there, leaving the dump as it was)."""
    before = digest([dump])
    status, _, err = run_command(capsys, ["attention", "dump", "--path", truncated(ckpt, ckpt.parent),
                                          "--text", text, "--out", dump])
    assert status == 1 and digest([dump]) == before
    one_line_error(err, "is not a fairseq checkpoint (truncated, or not a torch file")


def test_attention_dump_on_a_dump_or_mask_file_is_one_line(ckpt, dump, text, tmp_path, capsys):
    mask_file = tmp_path / "masks.pt"
    assert run_command(capsys, ["export", ckpt, "--out", mask_file])[0] == 0
    for path, what in [(dump, "an attention dump (fairseq-local attention dump)"),
                       (mask_file, "a mask file written by fairseq-local export")]:
        status, _, err = run_command(capsys, ["attention", "dump", "--path", path, "--text", text,
                                              "--out", tmp_path / "new.pt"])
        assert status == 1
        one_line_error(err, f"'{path}' is {what}, not a fairseq checkpoint")
    assert not (tmp_path / "new.pt").exists()
