"""``fairseq-local prune-curve`` end to end (Voita et al. 2019, §6): a tiny
trained model, two L0 weights, the table, JSON and both figures; a re-run
skips every step; the decoder gates reach the checkpoint and ``gates``."""

import json

import pytest

from helpers import TINY, run, train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tiny_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("base")
    train(tiny_data, "transformer_local_baseline", save, "--max-update", "30")
    return save / "checkpoint_best.pt"


def _curve(tiny_data, base, out, *extra):
    # prune-curve sets its own constant rate
    tiny = [a for k, a in enumerate(TINY) if a not in ("--lr", "--warmup-updates")
            and TINY[k - 1] not in ("--lr", "--warmup-updates")]
    return run(["fairseq-local", "prune-curve", str(base), "--data", str(tiny_data), "--out", str(out),
                "--lambdas", "0.05,2", "--max-update", "30", "--lr", "0.1", "--beam", "2",
                "--max-sentences", "20", *extra, "--", *tiny])


def test_prune_curve(tiny_data, base, tmp_path):
    out = tmp_path / "prune"
    r = _curve(tiny_data, base, out)
    for name in ("prune_curve.md", "prune_curve.json", "prune_curve.png", "prune_roles.png"):
        assert (out / name).is_file(), r.stdout
    rows = json.loads((out / "prune_curve.json").read_text())["rows"]
    assert [row["lambda"] for row in rows] == [None, 0.05, 2.0]
    assert rows[0]["kept"] == rows[0]["heads"] == {"enc-self": 48, "dec-self": 2, "dec-cross": 2}
    strong = rows[2]
    assert sum(strong["kept"].values()) < 52  # λ = 2 closes heads, and no fewer than λ = 0.05
    assert sum(strong["kept"].values()) <= sum(rows[1]["kept"].values())
    assert sum(strong["roles"].values()) == strong["kept"]["enc-self"]
    for row in rows:
        assert 0 <= row["bleu"] <= 100
    table = (out / "prune_curve.md").read_text().splitlines()
    assert table[0].startswith("| λ | enc-self kept | dec-self kept | dec-cross kept | total kept | BLEU |")
    assert table[2].startswith("| none (base) | 48/48 | 2/2 | 2/2 | 52/52 |")
    gates = run(["fairseq-local", "gates", str(out / "lambda-2" / "checkpoint_last.pt")]).stdout
    kept = strong["kept"]
    assert f"open heads, dec-cross: {kept['dec-cross']} of 2" in gates
    assert f"open heads: {sum(kept.values())} of 52" in gates

    again = _curve(tiny_data, base, out)  # every step is done: nothing is trained again
    assert json.loads((out / "prune_curve.json").read_text())["rows"] == rows
    assert "skip: " in (out / "lambda-2" / "train.out").read_text(), again.stdout


def test_prune_curve_one_line_errors(tiny_data, base, tmp_path):
    r = run(["fairseq-local", "prune-curve", str(base), "--data", str(tiny_data), "--out", str(tmp_path / "p"),
             "--lambdas", "0.1,x"], check=False)
    assert r.returncode != 0 and r.stderr.strip() == \
        "error: --lambdas must be numbers separated by commas, not '0.1,x'"
    r = run(["fairseq-local", "prune-curve", str(tmp_path / "none.pt"), "--data", str(tiny_data),
             "--out", str(tmp_path / "p")], check=False)
    assert r.returncode != 0 and r.stderr.strip() == f"error: no checkpoint '{tmp_path / 'none.pt'}'"
    assert not (tmp_path / "p").exists()
