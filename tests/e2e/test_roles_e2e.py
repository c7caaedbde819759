"""``fairseq-local analyze roles`` end to end on a trained configuration (f)
(Pande et al.; every layer prev-1, prev-2, next-1, next-2, band-1, band-2,
identity, identity) against the gold trees of the synthetic corpus: every
fixed single-key head is a positional head (Voita et al. 2019 §5.1) at its
offset, the dump carries relations and dictionary counts, and a bad dump is a
one-line error."""

import json
from pathlib import Path

import pytest
import torch

from helpers import run, train

pytestmark = pytest.mark.slow

# (f)'s heads with one key per row, and the offset of that key
FIXED = {0: -1, 1: -2, 2: 1, 3: 2, 6: 0, 7: 0}
SENTENCES = 20


@pytest.fixture(scope="module")
def analysed(tiny_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("roles")
    train(tiny_data, "transformer_local_8lochead_all6", out / "f", "--max-update", "10", "--no-epoch-checkpoints")
    run(["fairseq-local", "attention", "dump", "--path", str(out / "f" / "checkpoint_best.pt"), "--conllu",
         str(tiny_data / "raw" / "test.src.conllu"), "--max-sentences", str(SENTENCES), "--quiet",
         "--out", str(out / "dump.pt")])
    r = run(["fairseq-local", "analyze", "roles", str(out / "dump.pt"), "--out", str(out / "roles"), "--quiet",
             "--rare-top", "0"])
    assert r.stdout.startswith("roles: ") and "| layer | head | role |" in r.stdout
    return out


def test_fixed_heads_of_f_are_positional(analysed):
    roles = json.loads((analysed / "roles" / "roles.json").read_text())
    assert roles["sentences"] == SENTENCES and roles["rare_sentences"] == SENTENCES
    assert len(roles["roles"]) == 6 and all(len(layer) == 8 for layer in roles["roles"])
    for layer in range(6):
        for head, offset in FIXED.items():
            assert roles["roles"][layer][head] == "positional", (layer, head)
            assert roles["positional_offset"][layer][head] == offset
            assert roles["positional_share"][layer][head] == 1.0
            assert 0 < roles["confidence"][layer][head] <= 1  # post mode: the softmax mass on the one key
    for key in ("nsubj:head->dep", "nsubj:dep->head", "obj:head->dep", "amod:dep->head"):
        s = roles["syntactic"][key]
        assert s["instances"] > 0 and 0 < s["baseline"] <= 1 and isinstance(s["baseline_offset"], int), key
    assert all(0 <= v <= 1 for layer in roles["rare_share"] for v in layer if v is not None)
    for name in ("roles.png", "roles_syntactic.png"):
        assert (analysed / "roles" / name).stat().st_size > 1000
    assert (analysed / "roles" / "roles.md").read_text().startswith("| layer | head | role |")


def test_the_dump_keeps_relations_and_counts(analysed, tiny_data):
    records = torch.load(analysed / "dump.pt")
    rec = records[0]
    assert len(rec["relations"]) == len(rec["words"]) == len(rec["heads"]) and "root" in rec["relations"]
    assert len(rec["counts"]) == len(rec["ranks"]) == len(rec["tokens"])
    counts = {}
    for line in (tiny_data / "dict.src.txt").read_text(encoding="utf-8").splitlines():
        symbol, count = line.rsplit(" ", 1)
        counts[symbol] = int(count)
    known = [(counts[t], c) for t, c in zip(rec["tokens"][:-1], rec["counts"]) if t in counts]  # </s>: special
    assert known and all(want == got for want, got in known)


def test_a_bad_dump_is_a_one_line_error(analysed, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"\x00garbage")
    r = run(["fairseq-local", "analyze", "roles", str(bad), "--out", str(tmp_path / "out")], check=False)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "is not an attention dump" in r.stderr and not (tmp_path / "out" / "roles.json").exists()
