"""fairseq's own CLIs with the plugin: train -> generate -> interactive ->
from_pretrained, resume equivalence, two-worker training and CLI errors."""

import json
import re

import pytest
import torch

from helpers import TINY, USER_DIR, checkpoint_params as _params, run, train, two_workers
from fairseq_local.models.transformer import encoder_attention_weight_count
from fairseq_local.attention.layout import format_layout
from fairseq_local_cli.results import collect

pytestmark = pytest.mark.slow  # end-to-end: every test runs fairseq or a pipeline

ARCHS = [
    "transformer_local_baseline",
    "transformer_local_8lochead_all6",
    "transformer_local_1lochead_7tiedloc_all6",
    "transformer_local_fully_tied",
]


@pytest.mark.parametrize("arch", ARCHS)
def test_train_generate_interactive_from_pretrained(tiny_data, tmp_path, arch):
    save = tmp_path / "run"
    mode = "pre" if arch.endswith("all6") else "post"
    train(tiny_data, arch, save, "--max-update", "4", "--mask-mode", mode)
    assert (save / "checkpoint_last.pt").exists() and (save / "train.log").exists()
    assert list((save / "tb").rglob("events.out.tfevents.*"))

    run(["bash", "scripts/generate.sh", "--data", str(tiny_data), "--checkpoint",
         str(save / "checkpoint_last.pt"), "--out", str(save), "--beam", "2",
         "--ref", str(tiny_data / "raw" / "test.tgt")])
    bleu = json.loads((save / "test.bleu.json").read_text())
    assert bleu["name"] == "BLEU" and "signature" in bleu
    assert len((save / "test.hyp").read_text().splitlines()) == 30

    src = (tiny_data / "bpe" / "test.src").read_text().splitlines()[:3]
    r = run(
        ["fairseq-interactive", str(tiny_data), "--user-dir", USER_DIR, "--path",
         str(save / "checkpoint_last.pt"), "--source-lang", "src", "--target-lang", "tgt",
         "--beam", "2", "--remove-bpe"],
        input="\n".join(src) + "\n",
    )
    assert sum(line.startswith("H-") for line in r.stdout.splitlines()) == 3

    from fairseq.models.transformer import TransformerModel

    hub = TransformerModel.from_pretrained(
        str(save), checkpoint_file="checkpoint_last.pt", data_name_or_path=str(tiny_data),
        user_dir=USER_DIR, bpe="subword_nmt", bpe_codes=str(tiny_data / "bpe" / "codes"),
    )
    assert isinstance(hub.translate(src[0].replace("@@ ", ""), beam=2), str)
    assert hub.cfg.model.attn_layout == format_layout(hub.models[0].encoder.layout)

    # The results table reads the run's own outputs.
    (row,) = collect(tmp_path, ["run"])
    assert row["arch"] == arch
    assert row["attn weights"] == f"{encoder_attention_weight_count(hub.models[0]):,}"
    assert row["test BLEU"] == f"{bleu['score']:.2f}"
    assert row["best valid loss"] != "-" and row["train words/s"] != "-"


def test_resume_equals_uninterrupted(tiny_data, tmp_path):
    arch = "transformer_local_half_tied"
    n = 5
    train(tiny_data, arch, tmp_path / "resumed", "--max-update", str(n))
    half = _params(tmp_path / "resumed" / "checkpoint_last.pt")
    resumed = train(tiny_data, arch, tmp_path / "resumed", "--max-update", str(2 * n))
    train(tiny_data, arch, tmp_path / "straight", "--max-update", str(2 * n))
    a = _params(tmp_path / "resumed" / "checkpoint_last.pt")
    b = _params(tmp_path / "straight" / "checkpoint_last.pt")
    assert re.search(rf"Loaded checkpoint .*@ {n} updates", resumed.stdout + resumed.stderr)
    assert f"num_updates {2 * n}" in (tmp_path / "resumed" / "train.log").read_text()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # The second half did train: parameters moved on from the first half's.
    assert any(not torch.equal(a[k], half[k]) for k in a)


def test_two_cpu_workers_end_with_identical_parameters(tiny_data, tmp_path):
    outputs = two_workers(tmp_path, [
        str(tiny_data), "--user-dir", USER_DIR, "--arch", "transformer_local_1lochead_7tiedloc_first3",
        "--optimizer", "adam", "--lr-scheduler", "inverse_sqrt", "--criterion", "label_smoothed_cross_entropy",
        "--label-smoothing", "0.1", "--share-all-embeddings", "--cpu", "--no-save", "--max-update", "4", *TINY])
    a, b = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2))
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # Both ranks joined one group of two and trained the 4 updates.
    assert all("distributed init (rank" in o for o in outputs), outputs[0][-2000:]
    assert "num_updates 4" in outputs[0] or "num_updates=4" in outputs[0]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--attn-layout", "[band-1,glob*7]*6"], "error: layout item 1 '[band-1,glob*7]*6': head 'glob*7': unknown mask kind 'glob' (known: global[-G], identity, prev-K, next-K, band-K, local-W, "),
        (["--attn-layout", "[global*8]*5"], "error: attention layout has 5 layers but the encoder has 6 (--encoder-layers)"),
        (["--encoder-attention-heads", "4"], "error: attention layout layer 1 has 8 heads but the encoder has 4 (--encoder-attention-heads)"),
    ],
)
def test_bad_layout_is_a_one_line_error(tiny_data, extra, message):
    r = run(["fairseq-train", str(tiny_data), "--user-dir", USER_DIR, "--arch",
             "transformer_local_8lochead_all6", "--cpu", *extra], check=False)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == message or (message.endswith(", ") and last.startswith(message)), last
