"""Every ``fairseq-local`` command that writes files, walked with outputs that
cannot or must not be written: under /proc, an existing folder (for a file),
a path under a regular file, a missing parent folder (for a file), and one of
the command's own inputs.  Each gives exit status 1 or 2, one ``error:`` line
and no change on disk.  A command added to the table without an entry here
fails :func:`test_every_command_is_walked`.  (The scripts are walked in
``test_scripts_safety.py``.)"""

import argparse
import copy
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple

import pytest
import torch

from fairseq_local.analysis.dump import save_dump
from fairseq_local_cli.common import COMMANDS
from fairseq_local.models.roberta import build_roberta
from fairseq_local.attention.learned import DamMask
from helpers.hf import save_model
from helpers.probes import bad_outputs, digest, one_line_error, run_command

# Commands that print and write no file; check-resume has no output to give: it replaces only an unreadable
# checkpoint_last.pt by the run's newest readable checkpoint (tests/unit/test_recover.py).
NO_OUTPUT = {"configs", "sparsity", "gates", "inspect", "check-resume"}


class Case(NamedTuple):
    argv: Callable[[Dict[str, Path], Path], List]
    folder: bool  # the output is a folder (created if missing) rather than a file
    input: str  # the key of one of its inputs, given as the output


CASES: Dict[str, Case] = {
    "export --out": Case(lambda i, o: ["export", i["dam"], "--out", o], False, "dam"),
    "export --png": Case(lambda i, o: ["export", i["dam"], "--out", i["tmp"] / "m.pt", "--png", o], False, "dam"),
    "attention dump": Case(lambda i, o: ["attention", "dump", "--path", i["dam"], "--text", i["text"], "--out", o],
                           False, "text"),
    "results --csv": Case(lambda i, o: ["results", i["runs"], "--csv", o], False, "best"),
    "results --markdown": Case(lambda i, o: ["results", i["runs"], "--markdown", o], False, "best"),
    "tables --csv": Case(lambda i, o: ["tables", "--runs-root", i["wmt"], "--csv", o], False, "wmt_best"),
    "tables --markdown": Case(lambda i, o: ["tables", "--runs-root", i["wmt"], "--markdown", o], False, "wmt_best"),
    "average": Case(lambda i, o: ["average", i["runs"] / "a", "--num", "2", "--output", o], False, "c2"),
    "convert-roberta": Case(lambda i, o: ["convert-roberta", i["stock"], o, "--arch", "roberta_band2"],
                            False, "stock"),
    "convert-hf": Case(lambda i, o: ["convert-hf", i["hf"], o], True, "hf"),
    "glue evaluate": Case(lambda i, o: ["glue", "evaluate", "--task", "RTE", "--checkpoint", i["dam"], "--data",
                                        i["tmp"], "--glue-dir", i["tmp"], "--out", o], True, "dam"),
    "glue table": None,  # reads a folder, prints; writes nothing (kept in the table to be explicit)
    "analyze bias": Case(lambda i, o: ["analyze", "bias", i["dump"], "--out", o, "--quiet"], True, "dump"),
    "analyze roles": Case(lambda i, o: ["analyze", "roles", i["dump"], "--out", o, "--quiet"], True, "dump"),
    "analyze sensitivity": Case(lambda i, o: ["analyze", "sensitivity", "--path", i["dam"], "--text", i["text"],
                                              "--out", o], True, "text"),
    "analyze hta": Case(lambda i, o: ["analyze", "hta", "--path", i["dam"], "--text", i["text"], "--out", o],
                        True, "text"),
    "analyze table": Case(lambda i, o: ["analyze", "table", i["analysis"], "--markdown", o], False, "bias"),
    "prune-curve": Case(lambda i, o: ["prune-curve", i["best"], "--data", i["tmp"], "--out", o, "--ref", i["text"],
                                      "--conllu", i["text"], "--dry-run"], True, "best"),
    "reproduce": Case(lambda i, o: ["reproduce", "pande", "--runs", o, "--dry-run"], True, "text"),
    "benchmark": Case(lambda i, o: ["benchmark", "kernels", "--lengths", "16", "--repeats", "1", "--markdown", o],
                      False, "dam"),
}


def test_every_command_is_walked():
    walked = {name.split()[0] for name in CASES}
    assert set(COMMANDS) == NO_OUTPUT | walked, set(COMMANDS) ^ (NO_OUTPUT | walked)


def _checkpoint(path: Path, cfg, model: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"cfg": {"model": cfg, "task": {"_name": "translation"}}, "model": model,
                "optimizer_history": [{"num_updates": 10}]}, path)
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Dict[str, Path]:
    tmp = tmp_path_factory.mktemp("walk")
    s = DamMask(True, 10)
    torch.nn.init.normal_(s.alpha, std=2.0)
    cfg = argparse.Namespace(arch="transformer_local", attn_layout="[dam-s,global]*2")
    model = {f"encoder.layers.{l}.self_attn.learned.dam.0.alpha": s.alpha.data for l in range(2)}
    i = {"tmp": tmp, "dam": _checkpoint(tmp / "dam.pt", cfg, model)}
    i["runs"] = tmp / "runs"
    i["best"] = _checkpoint(i["runs"] / "a" / "checkpoint_best.pt", cfg, model)
    i["c1"] = _checkpoint(i["runs"] / "a" / "checkpoint_1_10.pt", cfg, model)
    i["c2"] = _checkpoint(i["runs"] / "a" / "checkpoint_2_20.pt", cfg, model)
    (i["runs"] / "a" / "test.bleu.json").write_text('{"score": 27.5}')
    i["wmt"] = tmp / "wmt"
    i["wmt_best"] = _checkpoint(i["wmt"] / "wmt14_en-de" / "a" / "checkpoint_best.pt", cfg, model)
    stock = build_roberta("roberta_base", dict(encoder_layers=2, encoder_attention_heads=4, encoder_embed_dim=32,
                                                encoder_ffn_embed_dim=64, max_positions=64), vocab_size=40)
    args = copy.deepcopy(stock.args)
    args.arch = args._name = "roberta_base"
    i["stock"] = tmp / "stock.pt"
    torch.save({"cfg": {"model": args, "task": {"_name": "masked_lm"}}, "model": stock.state_dict()}, i["stock"])
    i["hf"] = Path(save_model(str(tmp / "hf"), "BertModel"))
    i["dump"] = tmp / "attention.pt"
    save_dump([{"tokens": ["a", "b", "</s>"], "word_ids": [0, 1, -1], "words": ["a", "b"],
                "attn": torch.full((1, 2, 3, 3), 1 / 3)}], str(i["dump"]))
    i["text"] = tmp / "sentences.txt"
    i["text"].write_text("a b\n")
    i["analysis"] = tmp / "analysis"
    i["analysis"].mkdir()
    i["bias"] = i["analysis"] / "bias.json"
    i["bias"].write_text('{"local": [[4.0, 2.0]], "syntactic": [[1.0, 5.0]]}')
    return i


WALK = [(name, bad) for name, case in CASES.items() if case is not None
        for bad in ("proc", "folder", "under_file", "missing_parent", "input")
        if not (case.folder and bad in ("folder", "missing_parent"))]


@pytest.mark.parametrize("name, bad", WALK)
def test_unwritable_or_input_output_is_one_line_and_changes_nothing(inputs, tmp_path, name, bad, capsys):
    case = CASES[name]
    out = inputs[case.input] if bad == "input" else bad_outputs(tmp_path, "out.x")[bad]
    before = digest([inputs["tmp"], tmp_path])
    status, stdout, err = run_command(capsys, case.argv(inputs, out))
    assert status in (1, 2), (name, bad, status, err)
    line = one_line_error(err)
    assert str(out) in line or str(Path(out).parent) in line, line  # names the output it refuses
    assert digest([inputs["tmp"], tmp_path]) == before, (name, bad)
    assert not list(tmp_path.rglob(".*.tmp*")) and not list(inputs["tmp"].rglob(".*.tmp*"))
