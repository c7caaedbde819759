"""Attention dumps on models built in-process: tokens and words, CoNLL-U
multiword tokens and empty nodes, subwords, the weights the model used,
padding invariance of batching, length limits, and one-line errors."""

import pytest
import torch

from fairseq_local.analysis.dump import dump_records, load_dump, prepare, read_sentences, save_dump
from fairseq_local.analysis.model import AnalysisError, AnalysisModel
from fairseq_local_data.syntax import Sentence
from fairseq_local.models.roberta import build_roberta
from fairseq_local.models.transformer import build_encoder, dummy_dictionary

VOCAB = 40
DIMS = dict(encoder_embed_dim=16, encoder_ffn_embed_dim=32, encoder_layers=2, encoder_attention_heads=4,
            dropout=0.0, attention_dropout=0.0)


def pieces(word, first):
    """A stand-in subword tokeniser: a word of more than 2 letters splits into
    its first two letters and the rest (symbols w0..w29 of the dictionary)."""
    k = sum(map(ord, word))
    parts = [word] if len(word) <= 2 else [word[:2] + "@@", word[2:]]
    return [(f"w{(k + n) % 30}", p) for n, p in enumerate(parts)]


class Wrapper(torch.nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder


def nmt(layout="[global:gate,prev-1,band-2@@a,identity@@a]*2", mode="post", seed=0):
    torch.manual_seed(seed)
    enc = build_encoder("transformer_local", dict(DIMS, attn_layout=layout, mask_mode=mode), vocab_size=VOCAB)
    for name, p in enc.named_parameters():
        if "log_alpha" in name:
            p.data.fill_(0.3)  # a gate strictly between 0 and 1
    return AnalysisModel(Wrapper(enc), dummy_dictionary(VOCAB), pieces)


def roberta(layout="[band-1,global@x,global@x,prev-2];[global*4]", mode="pre"):
    torch.manual_seed(1)
    model = build_roberta("roberta_local_base", dict(DIMS, attn_layout=layout, mask_mode=mode, max_positions=24),
                          vocab_size=VOCAB)
    return AnalysisModel(model, dummy_dictionary(VOCAB), pieces)


SENTENCES = [Sentence(["the", "cat", "sat"], [1, 2, -1]), Sentence(["a", "dog", "ran", "far", "away"]),
             Sentence(["go"], [-1])]


def test_tokens_word_ids_and_special_tokens():
    m = nmt()
    tok = m.tokenise(["the", "cat", "a"])
    assert tok.tokens == ["th@@", "e", "ca@@", "t", "a", "</s>"]
    assert tok.word_ids == [0, 0, 1, 1, 2, -1]
    assert tok.ids[-1] == m.dictionary.eos() and len(tok.ids) == 6
    r = roberta()
    tok = r.tokenise(["the", "a"])
    assert tok.tokens == ["<s>", "th@@", "e", "a", "</s>"] and tok.word_ids == [-1, 0, 0, 1, -1]
    assert tok.ids[0] == r.dictionary.bos() and tok.ids[-1] == r.dictionary.eos()


CONLLU = """# sent_id = 1
# text = vamonos al mar
1-2\tvámonos\t_\t_\t_\t_\t_\t_\t_\t_
1\tvamos\tir\tVERB\t_\t_\t0\troot\t_\t_
2\tnos\tnosotros\tPRON\t_\t_\t1\tobj\t_\t_
3-4\tal\t_\t_\t_\t_\t_\t_\t_\t_
3\ta\ta\tADP\t_\t_\t5\tcase\t_\t_
4\tel\tel\tDET\t_\t_\t5\tdet\t_\t_
4.1\tido\tir\tVERB\t_\t_\t_\t_\t1:conj\t_
5\tmar\tmar\tNOUN\t_\t_\t1\tobl\t_\t_

"""


def test_conllu_multiword_tokens_and_empty_nodes_in_the_record(tmp_path):
    path = tmp_path / "s.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    m = nmt()
    items, skipped = prepare(m, read_sentences(conllu=str(path)))
    (rec,) = dump_records(m, items, progress=False)
    assert skipped == 0
    assert rec["words"] == ["vamos", "nos", "a", "el", "mar"]
    assert rec["heads"] == [-1, 0, 4, 4, 0]
    assert rec["tokens"] == ["va@@", "mos", "no@@", "s", "a", "el", "ma@@", "r", "</s>"]
    assert rec["word_ids"] == [0, 0, 1, 1, 2, 3, 4, 4, -1]
    assert rec["attn"].shape == (2, 4, 9, 9) and rec["attn"].dtype == torch.float32


def test_text_input_has_no_heads(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("the cat sat\n\na dog\n")
    (rec, rec2) = dump_records(nmt(), prepare(nmt(), read_sentences(text=str(path)))[0], progress=False)
    assert "heads" not in rec and rec["words"] == ["the", "cat", "sat"] and rec2["words"] == ["a", "dog"]


def head_outputs(m, src_tokens, src_lengths):
    """The input of every layer's out_proj: what the heads produced."""
    outs = []
    hooks = [a.out_proj.register_forward_pre_hook(lambda mod, args: outs.append(args[0])) for a in m.attention]
    m.forward(src_tokens, src_lengths)
    for h in hooks:
        h.remove()
    return outs


@pytest.mark.parametrize("build", [nmt, roberta, lambda: nmt(mode="pre")], ids=["nmt-post", "roberta-pre", "nmt-pre"])
def test_attn_is_what_the_model_used(build):
    """Each head's output equals its dumped weights times its values, so the
    dump holds exactly the weights the model used (gates included)."""
    m = build()
    items, _ = prepare(m, SENTENCES)
    records = dump_records(m, items, progress=False)
    for item, rec in zip(items, records):
        src, lengths = m.collate([item.input])
        with torch.no_grad():
            cap = m.forward(src, lengths)
            outs = head_outputs(m, src, lengths)
            for layer, (attn, x, out) in enumerate(zip(m.attention, cap.inputs, outs)):
                v = attn.v_proj(x).view(x.shape[0], attn.num_heads, attn.head_dim).transpose(0, 1)  # (H, T, dh)
                want = out[:, 0].view(-1, attn.num_heads, attn.head_dim).transpose(0, 1)
                torch.testing.assert_close(rec["attn"][layer] @ v, want, atol=1e-6, rtol=1e-5)
    prev1 = records[0]["attn"][0, 1]  # post mode: one key per row, none for the first token
    if m.attention[0].mask_mode == "post" and not m.roberta:
        assert torch.equal(prev1.ne(0), torch.eye(prev1.shape[0], dtype=torch.bool).roll(-1, 1).tril())


def test_gated_heads_are_scaled_by_their_gate():
    m = nmt()
    (rec,) = dump_records(m, prepare(m, SENTENCES[:1])[0], progress=False)
    z = float(m.attention[0].gates())
    assert 0.05 < z < 0.95
    torch.testing.assert_close(rec["attn"][0, 0].sum(-1), torch.full((7,), z))  # post, global: rows sum to z


def test_batching_and_padding_do_not_change_the_weights():
    m = nmt(mode="pre")
    items, _ = prepare(m, SENTENCES)
    together = dump_records(m, items, max_tokens=1000, progress=False)
    alone = dump_records(m, items, max_tokens=1, progress=False)
    assert [r["words"] for r in together] == [s.words for s in SENTENCES]
    for a, b in zip(together, alone):
        torch.testing.assert_close(a["attn"], b["attn"], atol=1e-6, rtol=1e-5)


def test_long_sentences_are_skipped_and_counted():
    m = roberta()  # 24 positions
    long = Sentence(["abc"] * 12)  # 24 tokens + <s> + </s>
    items, skipped = prepare(m, SENTENCES + [long])
    assert skipped == 1 and len(items) == 3
    items, skipped = prepare(m, SENTENCES, max_len=4)  # "go" is <s> go </s>
    assert skipped == 2 and [it.words for it in items] == [["go"]]


def test_dump_round_trip_and_wrong_formats(tmp_path):
    m = nmt()
    records = dump_records(m, prepare(m, SENTENCES)[0], progress=False)
    save_dump(records, str(tmp_path / "d.pt"))
    back = load_dump(str(tmp_path / "d.pt"))
    assert back[0]["tokens"] == records[0]["tokens"] and torch.equal(back[0]["attn"], records[0]["attn"])
    T = len(records[0]["tokens"])
    cases = {  # what follows the quoted file name in the one-line message
        "tensor.pt": (torch.zeros(3), " is not an attention dump (expected a list of records, got Tensor)"),
        "empty.pt": ([], " is an empty list, not an attention dump"),
        "tensors.pt": ([torch.zeros(3)], " is not an attention dump (item 0 is a Tensor, not a record)"),
        "nokeys.pt": ([records[0], {"tokens": ["a"]}],
                      ": record 1 has no word_ids, words, attn (not an attention dump)"),
        "shape.pt": ([dict(records[0], attn=torch.zeros(2, 4, 3, 3))],
                     f": record 0 has attention of shape (2, 4, 3, 3), expected (L, H, {T}, {T})"),
    }
    for name, (obj, message) in cases.items():
        torch.save(obj, tmp_path / name)
        with pytest.raises(AnalysisError) as e:
            load_dump(str(tmp_path / name))
        assert str(e.value) == f"'{tmp_path / name}'{message}"
    (tmp_path / "text.pt").write_text("not a dump")
    for name in ("text.pt", "missing.pt"):
        with pytest.raises(AnalysisError, match="dump"):
            load_dump(str(tmp_path / name))


def test_a_model_without_our_attention_is_refused():
    stock = build_roberta("roberta_base", dict(DIMS, max_positions=24), vocab_size=VOCAB)
    with pytest.raises(AnalysisError, match="no fairseq-local attention"):
        AnalysisModel(stock, dummy_dictionary(VOCAB), pieces)


@pytest.mark.parametrize("argv, message", [
    (["attention", "dump", "--path", "x.pt", "--conllu", "MISSING", "--out", "d.pt"], "MISSING"),
    (["analyze", "sensitivity", "--path", "x.pt", "--conllu", "BAD", "--out", "o"], "BAD"),
    (["analyze", "bias", "NOTADUMP", "--out", "o"], "NOTADUMP"),
    (["analyze", "hta", "--path", "x.pt", "--text", "BAD", "--conllu", "BAD", "--out", "o"], "not allowed"),
])
def test_bad_inputs_are_one_line_errors(tmp_path, capsys, monkeypatch, argv, message):
    from fairseq_local_cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "BAD").write_text("1\tword\n")  # one column too few
    (tmp_path / "NOTADUMP").write_bytes(b"\x00garbage")
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code in (1, 2) and err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err


def test_bias_of_a_conllu_sentence_with_multiword_tokens_empty_nodes_and_subwords(tmp_path):
    """Exact scores on the record of CONLLU (tokens va@@ mos | no@@ s | a | el |
    ma@@ r | </s>; heads vamos <- nos, mar; mar <- a, el): every token attends
    uniformly to the tokens of its word's syntactic head (the root's rows are 0)."""
    from fractions import Fraction

    from fairseq_local.analysis.bias import bias_scores

    path = tmp_path / "s.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    m = nmt()
    (rec,) = dump_records(m, prepare(m, read_sentences(conllu=str(path)))[0], progress=False)
    attn = torch.zeros(1, 1, 9, 9, dtype=torch.float64)
    for i, w in enumerate(rec["word_ids"]):
        if w >= 0 and rec["heads"][w] >= 0:
            targets = [j for j, v in enumerate(rec["word_ids"]) if v == rec["heads"][w]]
            attn[0, 0, i, targets] = 1 / len(targets)
    scores = bias_scores([dict(rec, attn=attn)])
    # syntactic: S_3 = {0}, S_4 = {7}, S_6 = {0, 1}, S_7 = {0, 1, 4}; S_2 and S_5 are inside L
    # a = (mass in S / |S|) / (1 / 9): 9/2, 9/2, 9/2 and 3, mean 33/8
    assert scores["syntactic"][0][0] == pytest.approx(float(Fraction(33, 8)), abs=1e-12)
    # locality: rows 2..7 (rows 0 and 1 are zero): 9/5, 9/10, 9/10, 9/5, 0, 0
    assert scores["local"][0][0] == pytest.approx(float(Fraction(9, 10)), abs=1e-12)


def test_analyze_table_rows(tmp_path, capsys):
    import json

    from fairseq_local_cli.main import main

    run = tmp_path / "f" / "analysis"
    run.mkdir(parents=True)
    (run / "bias.json").write_text(json.dumps({"local": [[4.0, 2.0], [None, 6.0]], "syntactic": [[1.0, 3.5], [0.5, 1.0]],
                                               "sentences": 3}))
    (run / "sensitivity.json").write_text(json.dumps({"local": [[0.2, 0.4], [0.3, None]], "syntactic": [[None, None]] * 2,
                                                      "unrelated": [[0.0, 0.0], [0.0, 0.0]], "sentences": 2}))
    other = tmp_path / "band"
    other.mkdir()
    (other / "hta.json").write_text(json.dumps({"pearson_previous": [[1.0, 0.5]], "pearson_input": None,
                                                "attention_centre": [-1.0, 0.5], "contribution_centre": [0.25]}))
    assert main(["analyze", "table", str(run), str(other), "--markdown", str(tmp_path / "t.md")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| f | 2x2 | 4.000 | 50% | 1.500 | 25% | 0.3000 | - | 0.0000 | - | - | - | - |"
    assert lines[3] == "| band | - | - | - | - | - | - | - | - | 0.750 | - | -0.25 | +0.25 |"
    assert (tmp_path / "t.md").read_text().splitlines() == lines
    with pytest.raises(SystemExit):
        main(["analyze", "table", str(tmp_path / "missing")])
    assert capsys.readouterr().err == f"error: no analysis folder '{tmp_path / 'missing'}'\n"


def test_records_keep_relations_and_dictionary_counts(tmp_path):
    """CoNLL-U relations are kept next to the heads; every token carries its
    dictionary count and frequency rank (for Voita et al.'s rare-word heads)."""
    from fairseq_local.analysis.dump import frequency

    path = tmp_path / "s.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    m = nmt()
    d = m.dictionary
    for i in range(d.nspecial, len(d)):
        d.count[i] = 1000 - 10 * i  # w0 the most frequent
    d.count[d.index("w5")] = d.count[d.index("w6")]  # a tie
    counts, ranks = frequency(d)
    assert ranks[d.index("w0")] == 0 and ranks[d.index("w1")] == 1
    assert ranks[d.index("w5")] == ranks[d.index("w6")] == 5 and ranks[d.index("w7")] == 7
    assert ranks[d.eos()] == len(d) - d.nspecial  # count 1: below every symbol
    items, _ = prepare(m, read_sentences(conllu=str(path)))
    (rec,) = dump_records(m, items, progress=False)
    assert rec["relations"] == ["root", "obj", "case", "det", "obl"]
    ids = items[0].input.ids
    assert rec["counts"] == [d.count[i] for i in ids] and rec["ranks"] == [ranks[i] for i in ids]
    assert rec["counts"][-1] == 1 and len(rec["counts"]) == len(rec["tokens"])
    text = tmp_path / "s.txt"
    text.write_text("the cat\n")
    (plain,) = dump_records(m, prepare(m, read_sentences(text=str(text)))[0], progress=False)
    assert "relations" not in plain and "heads" not in plain and len(plain["counts"]) == len(plain["tokens"]) == 5
    for i in range(d.nspecial, len(d)):  # no frequencies (a convert-hf dictionary: every count 1)
        d.count[i] = 1
    assert frequency(d) == (None, None)
    (flat,) = dump_records(m, prepare(m, read_sentences(text=str(text)))[0], progress=False)
    assert "counts" not in flat and "ranks" not in flat and len(flat["tokens"]) == 5
