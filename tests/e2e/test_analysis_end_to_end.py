"""The analysis suite end to end on trained checkpoints: scripts/analyze.sh on
an NMT run of configuration (f) (gold CoNLL-U of the synthetic corpus), exact
zeros of the sensitivity of a pre-mode band-1 model, and a stock fairseq
RoBERTa checkpoint refused, then analysed after convert-roberta."""

import json
from pathlib import Path

import pytest
import torch

from helpers import run, train

pytestmark = pytest.mark.slow

UPDATES = ["--max-update", "10", "--no-epoch-checkpoints"]
ARGS = ["--max-sentences", "12", "--hta-sentences", "12", "--hta-max-len", "14"]


@pytest.fixture(scope="module")
def runs(tiny_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("analysis-runs")
    train(tiny_data, "transformer_local_8lochead_all6", out / "f", *UPDATES)
    train(tiny_data, "transformer_local", out / "band1", "--attn-layout", "[band-1*8]*6", "--mask-mode", "pre",
          *UPDATES)
    return out


def test_analyze_sh_on_an_nmt_run(runs, tiny_data):
    r = run(["bash", "scripts/analyze.sh", str(runs / "f"), *ARGS])
    out = runs / "f" / "analysis"
    records = torch.load(out / "attention.pt")
    assert len(records) == 12 and all(rec["tokens"][-1] == "</s>" and "heads" in rec for rec in records)
    bias = json.loads((out / "bias.json").read_text())
    assert bias["sentences"] == 12 and len(bias["local"]) == 6 and len(bias["local"][0]) == 8
    # (f): prev-1, prev-2, next-1, next-2, band-1, band-2, identity, identity in every layer
    assert all(score > 1.5 for layer in bias["local"] for score in layer)
    assert all(score is not None and score < 1e-6 for layer in bias["syntactic"] for score in layer)
    gamma = json.loads((out / "sensitivity.json").read_text())
    assert gamma["sentences"] == 12 and all(len(v) == 12 for v in gamma["local"])
    hta = json.loads((out / "hta.json").read_text())
    assert hta["sentences"] + hta["skipped"] == 12 and hta["sentences"] > 0
    assert len(hta["offsets"]) == 2 * hta["max_len"] - 1 and hta["pearson_input"] is not None
    assert hta["attention_centre_per_head"][0][:2] == pytest.approx([-1, -2])  # prev-1, prev-2
    for png in ["bias_thresholds", "bias_heads", "sensitivity", "hta_previous", "hta_input", "hta_attention",
                "hta_contribution", "hta_centres"]:
        assert (out / f"{png}.png").stat().st_size > 1000, png
    assert (out / "bias.md").read_text().startswith("| layer") and "γ unrelated" in r.stdout
    roles = json.loads((out / "roles.json").read_text())
    assert roles["sentences"] == 12 and roles["positional_offset"][0][:4] == [-1, -2, 1, 2]  # prev-1, prev-2, next-1, next-2
    again = run(["bash", "scripts/analyze.sh", str(runs / "f"), *ARGS])
    assert again.stderr.count("up to date") == 5


def test_band1_pre_model_is_insensitive_outside_its_window(runs, tiny_data, tmp_path):
    """Pande et al. §3.1 on a pre-mode band-1 model: every beta outside
    |i - j| <= 1 is exactly 0, layer by layer, so gamma_unrelated = 0 exactly."""
    from fairseq_local.analysis.dump import analysed_batches, prepare, read_sentences
    from fairseq_local.analysis.jacobian import block_jacobian_norms
    from fairseq_local.analysis.model import AnalysisModel

    ckpt, conllu = runs / "band1" / "checkpoint_best.pt", tiny_data / "raw" / "test.src.conllu"
    run(["fairseq-local", "analyze", "sensitivity", "--path", str(ckpt), "--conllu", str(conllu),
         "--max-sentences", "10", "--out", str(tmp_path)])
    gamma = json.loads((tmp_path / "sensitivity.json").read_text())
    assert all(v == 0.0 for layer in gamma["unrelated"] for v in layer)
    assert all(v in (0.0, None) for layer in gamma["syntactic"] for v in layer)
    assert all(v > 0 for layer in gamma["local"] for v in layer)
    model = AnalysisModel.load(str(ckpt))
    items, _ = prepare(model, read_sentences(conllu=str(conllu))[:6])
    for _, src, _, cap in analysed_batches(model, items, progress=False):
        pad = src.eq(model.dictionary.pad())
        T = src.shape[1]
        outside = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs() > 1
        for attn, x in zip(model.attention, cap.inputs):
            beta = block_jacobian_norms(attn, x, pad)[0]
            assert torch.all(beta[:, outside] == 0) and beta[:, ~outside].max() > 0


@pytest.fixture(scope="module")
def stock_roberta(tiny_data, tmp_path_factory) -> Path:
    """fairseq's own roberta_base (tiny), pretrained for 2 updates on the
    synthetic source sentences (words as symbols)."""
    out = tmp_path_factory.mktemp("stock-roberta")
    raw = tiny_data / "raw"
    run(["fairseq-preprocess", "--only-source", "--trainpref", str(raw / "train.src"), "--validpref",
         str(raw / "valid.src"), "--destdir", str(out / "bin"), "--workers", "1"])
    run(["bash", "scripts/pretrain-bert.sh", "roberta_base", "--data", str(out / "bin"), "--save-dir",
         str(out / "run"), "--updates", "2", "--updates-512", "0", "--lengths", "32,64", "--max-positions", "64",
         "--batch-size", "8", "--update-freq", "1", "--warmup", "1", "--cpu", "--",
         "--encoder-layers", "2", "--encoder-attention-heads", "4", "--encoder-embed-dim", "32",
         "--encoder-ffn-embed-dim", "64", "--num-workers", "0"])
    return out / "run" / "checkpoint_last.pt"


def test_stock_roberta_is_refused_then_analysed_after_conversion(stock_roberta, tiny_data, tmp_path):
    conllu = str(tiny_data / "raw" / "test.src.conllu")
    for command in (["attention", "dump"], ["analyze", "sensitivity"], ["analyze", "hta"]):
        r = run(["fairseq-local", *command, "--path", str(stock_roberta), "--conllu", conllu, "--bpe", "none",
                 "--out", str(tmp_path / "refused")], check=False)
        assert r.returncode == 1 and r.stderr == (f"error: '{stock_roberta}' has no fairseq-local attention module in "
                                                  "its encoder (a stock fairseq model? convert RoBERTa with "
                                                  "fairseq-local convert-roberta)\n"), (command, r.stderr)
    run_dir = tmp_path / "converted"
    run_dir.mkdir()
    run(["fairseq-local", "convert-roberta", str(stock_roberta), str(run_dir / "checkpoint_best.pt"),
         "--arch", "roberta_local_base", "--attn-layout", "[band-1@@t*4];[global*4]"])
    run(["bash", "scripts/analyze.sh", str(run_dir), "--conllu", conllu, "--max-sentences", "8", "--hta-sentences", "8",
         "--hta-max-len", "12", "--", "--bpe", "none"])
    out = run_dir / "analysis"
    records = torch.load(out / "attention.pt")
    assert all(rec["tokens"][0] == "<s>" and rec["tokens"][-1] == "</s>" for rec in records)
    assert records[0]["word_ids"][0] == records[0]["word_ids"][-1] == -1
    assert records[0]["tokens"][1:-1] == records[0]["words"]  # --bpe none: a token per word
    band = records[0]["attn"][0]  # layer 0: band-1 (post mode): nothing outside |i - j| <= 1
    T = band.shape[-1]
    outside = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs() > 1
    assert torch.all(band[:, outside] == 0)
    bias = json.loads((out / "bias.json").read_text())
    assert all(score > 1.5 for score in bias["local"][0])
    hta = json.loads((out / "hta.json").read_text())
    assert hta["sentences"] > 0 and hta["pearson_previous"] is not None


def test_benchmark_runs_and_agrees():
    r = run(["python", "scripts/benchmark-hta.py", "--dim", "16", "--length", "4", "--sentences", "1",
             "--repeats", "1"])
    diff = float(r.stdout.split("largest difference ")[1].split()[0])
    assert diff < 1e-5 and "| batched forward mode (analyze hta) |" in r.stdout


EXTRAS_ONLY = ["matplotlib", "tokenizers", "sentencepiece", "blingfire", "conllu", "sacremoses", "subword_nmt",
               "stanza", "wikiextractor"]  # setup.py's extras, not install_requires


def test_attention_dump_without_the_extras(runs, tiny_data, tmp_path):
    """What a plain ``pip install .`` gives (install_requires only: every
    extra's module made unimportable) dumps attention (issue 35, point 5)."""
    import sys

    blocker = ("import sys, importlib.abc\n"
               f"BLOCKED = {EXTRAS_ONLY!r}\n"
               "class Block(importlib.abc.MetaPathFinder):\n"
               "    def find_spec(self, name, path, target=None):\n"
               "        if name.split('.')[0] in BLOCKED:\n"
               "            raise ModuleNotFoundError(f'No module named {name!r} (an extra)')\n"
               "sys.meta_path.insert(0, Block())\n"
               "from fairseq_local_cli.main import main\n"
               "sys.exit(main(sys.argv[1:]))\n")
    out = tmp_path / "dump.pt"
    run([sys.executable, "-c", blocker, "attention", "dump", "--path", str(runs / "band1" / "checkpoint_last.pt"),
         "--data", str(tiny_data), "--text", str(tiny_data / "raw" / "valid.src"), "--bpe", "none",
         "--max-sentences", "3", "--out", str(out)])
    assert torch.load(out)
