"""``fairseq-local convert-hf``: every supported transformers class, built
random and saved with ``save_pretrained`` here, agrees after conversion with
transformers' own forward in fp32 (hidden states, attention probabilities,
MLM and classification logits; right- and left-padded, single sentences and
pairs); the written folder loads through the hub interface with its own
tokenizer; other layouts are a new stage; bad input is one line with nothing
written, and the hub is never contacted."""

import json
import os

import pytest
import torch

from helpers.hf import BERT_CLASSES, ROBERTA_CLASSES, compare, hf_model, save_model
from fairseq_local.models.convert_hf import convert_hf_model
from fairseq_local_cli.convert_hf import main

TOL = 1e-5
EXPECTED = {  # the measures each class has
    "BertModel": {"hidden", "attention"}, "RobertaModel": {"hidden", "attention"},
    "BertForMaskedLM": {"hidden", "attention", "mlm"}, "RobertaForMaskedLM": {"hidden", "attention", "mlm"},
    "BertForPreTraining": {"hidden", "attention", "mlm", "classification"},
    "BertForSequenceClassification": {"hidden", "attention", "classification"},
    "RobertaForSequenceClassification": {"hidden", "attention", "classification"},
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {name: save_model(str(root / name), name, seed=i)
            for i, name in enumerate(BERT_CLASSES + ROBERTA_CLASSES)}


def run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr()


@pytest.mark.parametrize("cls", BERT_CLASSES + ROBERTA_CLASSES)
def test_converted_model_computes_the_hf_model(folders, cls):
    model, args, vocab, cfg, _ = convert_hf_model(folders[cls])
    assert args.arch == "roberta_local_base" and args.positions == ("absolute" if cls.startswith("Bert") else "fairseq")
    worst = compare(model, folders[cls], vocab.perm)
    assert set(worst) == EXPECTED[cls]
    assert max(worst.values()) < TOL, worst


def test_a_wrong_mapping_is_seen(folders):
    """The comparison fails when one thing BERT does differently is left out."""
    model, _, vocab, _, _ = convert_hf_model(folders["BertForMaskedLM"])
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm):
            m.eps = 1e-5  # fairseq's, not BERT's 1e-12
    assert max(compare(model, folders["BertForMaskedLM"], vocab.perm).values()) > 1e-4


@pytest.mark.parametrize("cls", ["BertForSequenceClassification", "RobertaForMaskedLM"])
def test_folder_loads_through_the_hub_with_its_tokenizer(folders, cls, tmp_path, capsys):
    from transformers import AutoTokenizer, BertTokenizer

    from fairseq_local.models import LocalRobertaModel

    out = tmp_path / "converted"
    code = main([folders[cls], str(out)])
    assert code == 0
    assert sorted(os.listdir(out)) == (["dict.txt", "model.pt", "tokenizer_config.json", "vocab.txt"] if cls.startswith("Bert")
                                       else ["dict.txt", "merges.txt", "model.pt", "vocab.json"])
    _, _, vocab, _, _ = convert_hf_model(folders[cls])
    from fairseq.models.roberta import RobertaModel

    from helpers import USER_DIR

    stock = RobertaModel.from_pretrained(str(out), "model.pt", user_dir=USER_DIR)  # fairseq's own: the saved BPE
    assert max(compare(stock.model, folders[cls], vocab.perm).values()) < TOL
    moved = tmp_path / "moved"
    os.rename(out, moved)  # the folder carries its tokenizer wherever it goes
    hub = LocalRobertaModel.from_pretrained(str(moved))
    assert max(compare(hub.model, folders[cls], vocab.perm).values()) < TOL
    to_hf = torch.tensor(vocab.perm)
    a, b = "the cat sat on the mat.", "a big dog ran"
    if cls.startswith("Bert"):  # [CLS] A [SEP] B [SEP], as BERT was trained
        want = BertTokenizer(str(moved / "vocab.txt"))(a, b)["input_ids"]
        assert to_hf[hub.encode(a, b, no_separator=True)].tolist() == want
        assert to_hf[stock.encode(a, b, no_separator=True)].tolist() == want
    else:
        want = AutoTokenizer.from_pretrained(folders[cls])(a)["input_ids"]
        assert to_hf[hub.encode(a)].tolist() == want
        assert hub.fill_mask("the cat <mask> on the mat.", topk=2)  # the masked-LM head over the dictionary


def test_other_layouts_are_a_new_stage(folders):
    """Weights copied, tied Q/K from the first member head, learned extras fresh."""
    folder = folders["BertForMaskedLM"]
    exact, _, vocab, _, _ = convert_hf_model(folder)
    band, args, _, _, _ = convert_hf_model(folder, attention={"attn_layout": "[band-2*4]*2"})
    assert args.attn_layout == "[band-2*4]*2"
    own, new = exact.state_dict(), band.state_dict()
    assert all(torch.equal(own[k], new[k]) for k in own
               if torch.is_tensor(own[k]) and ("self_attn" not in k or "v_proj" in k))
    assert max(compare(band, folder, vocab.perm).values()) > 1e-3  # a band of 2 is another function
    aaa, _, _, _, _ = convert_hf_model(folder, arch="roberta_aaa",
                                       attention={"attn_layout": "[aaa*4]*2"}, seed=3)
    fresh = [k for k in aaa.state_dict() if ".self_attn.learned." in k]
    assert fresh, "the AAA selector is a learned extra"


def test_rerun_replaces_its_own_folder_and_refuses_other_commands_files(folders, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([folders["BertModel"], str(out)]) == 0
    assert main([folders["BertForMaskedLM"], str(out)]) == 0  # an earlier output: replaced
    (out / "dict.txt").write_text("the 120\ncat 7\n")  # now fairseq-preprocess's
    other = tmp_path / "other"
    other.mkdir()
    (other / "dict.txt").write_text("the 120\ncat 7\n")
    before = sorted(os.listdir(other))
    code, err = run([folders["BertModel"], str(other)], capsys)
    assert code == 2 and len(err.err.splitlines()) == 1
    assert "dict.txt' exists and is not a converted model's dict.txt" in err.err
    assert sorted(os.listdir(other)) == before and (other / "dict.txt").read_text() == "the 120\ncat 7\n"


def _errors(folders, tmp_path, edit):
    folder = tmp_path / "in"
    os.system(f"cp -r {folders['BertForMaskedLM']} {folder}")
    edit(folder)
    return str(folder)


def _config(folder, **changes):
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))


def _drop_weight(folder):
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    del weights["bert.encoder.layer.1.output.dense.bias"]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("edit, message", [
    (lambda f: _config(f, model_type="gpt2", architectures=["GPT2LMHeadModel"]), "is a 'gpt2' model, not BERT"),
    (lambda f: _config(f, position_embedding_type="relative_key"), "position_embedding_type 'relative_key'"),
    (_drop_weight, "lack 'encoder.layer.1.output.dense.bias' (missing weight)"),
    (lambda f: _config(f, type_vocab_size=3), "type_vocab_size 3"),
    (lambda f: _config(f, architectures=["BertForQuestionAnswering"]), "holds BertForQuestionAnswering"),
    (lambda f: os.remove(f / "vocab.txt"), "has no tokenizer files"),
])
def test_bad_input_is_one_line_and_writes_nothing(folders, tmp_path, capsys, edit, message):
    folder = _errors(folders, tmp_path, edit)
    out = tmp_path / "out"
    code, err = run([folder, str(out)], capsys)
    assert code == 2 and message in err.err, err.err
    assert len(err.err.splitlines()) == 1 and err.err.startswith("error: ")
    assert "Traceback" not in err.err and not out.exists()


def test_a_model_name_is_not_downloaded(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    code, err = run(["bert-base-uncased", "out"], capsys)
    assert code == 2 and "'bert-base-uncased' is not a local folder" in err.err and "never contacts the hub" in err.err
    assert os.listdir(tmp_path) == []


def test_transformers_reads_what_the_tests_wrote(folders):
    """The fixtures are the classes they claim to be (guards the comparison itself)."""
    for name, folder in folders.items():
        assert type(hf_model(folder)).__name__ == name


def _dump(argv):
    from fairseq_local_cli.main import main as cli

    assert cli(argv) == 0


@pytest.mark.parametrize("cls", ["BertForMaskedLM", "RobertaForMaskedLM"])
def test_attention_dump_reproduces_transformers_for_the_same_input(folders, cls, tmp_path, capsys):
    """Single sentences and pairs (BERT: [CLS] A [SEP] B [SEP], segments 0/1;
    RoBERTa: <s> A </s></s> B </s>), the folder's own tokenizer found by
    --bpe auto: the dump's tokens are transformers' tokenizer's, its
    attention transformers'."""
    from transformers import AutoTokenizer

    out = tmp_path / "converted"
    assert main([folders[cls], str(out)]) == 0
    (tmp_path / "s.txt").write_text("the cats walked on the mat .\nunable dog , big red house\n")
    (tmp_path / "p.tsv").write_text("the cats walked\tthe dog sat .\nred house\ta cat ran\n")
    tokenizer, hf = AutoTokenizer.from_pretrained(folders[cls]), hf_model(folders[cls])
    bert, seen = cls.startswith("Bert"), 0
    for flag, name in (("--text", "s.txt"), ("--pairs", "p.tsv")):
        _dump(["attention", "dump", "--path", str(out / "model.pt"), flag, str(tmp_path / name),
               "--out", str(tmp_path / "d.pt"), "--quiet"])
        records = torch.load(tmp_path / "d.pt", weights_only=False)
        lines = (tmp_path / name).read_text().splitlines()
        assert len(records) == len(lines)
        for rec, line in zip(records, lines):
            enc = tokenizer(*line.split("\t"), return_tensors="pt")
            names = {"[CLS]": "<s>", "[SEP]": "</s>"}
            hf_tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
            assert "counts" not in rec and "ranks" not in rec  # a Hugging Face vocabulary has no frequencies
            if bert:  # WordPiece strings are the dictionary's symbols; RoBERTa's dump shows decoded text
                assert rec["tokens"] == [names.get(t, t) for t in hf_tokens]
                pieces = [k for k, t in enumerate(rec["tokens"]) if t.startswith("##")]  # "cat ##s": one word
                assert all(rec["word_ids"][k] == rec["word_ids"][k - 1] >= 0 for k in pieces)
                seen += len(pieces)
            assert len(rec["tokens"]) == len(hf_tokens)
            with torch.no_grad():
                attn = torch.cat(hf(**enc, output_attentions=True).attentions)  # (L, H, T, T)
            assert rec["attn"].shape == attn.shape and (rec["attn"] - attn).abs().max() < TOL
            if flag == "--pairs" and bert:
                assert rec["separator"] == [enc["token_type_ids"][0].tolist().index(1) - 1]
    assert seen >= 4 or not bert  # "cats", "walked" in both files


@pytest.mark.slow
def test_every_analysis_runs_on_a_converted_bert(tmp_path, capsys):
    """Every analyze command reads the converted checkpoint or its dump;
    Pascual et al.'s HTA needs T <= d_h: a BERT with 32-dimensional heads."""
    folder = save_model(str(tmp_path / "hf"), "BertForMaskedLM", hidden_size=64, num_attention_heads=2)
    assert main([folder, str(tmp_path / "bert")]) == 0
    (tmp_path / "p.tsv").write_text("the cats walked\tthe dog sat .\nred house\ta cat ran\nthe mat\tis big\n")
    _dump(["analyze", "hta", "--path", str(tmp_path / "bert" / "model.pt"), "--pairs", str(tmp_path / "p.tsv"),
           "--out", str(tmp_path / "hta"), "--quiet"])
    result = json.loads((tmp_path / "hta" / "hta.json").read_text())
    assert (result["sentences"], result["skipped"], result["layers"], result["heads"]) == (3, 0, 2, 2)
    model = ["--path", str(tmp_path / "bert" / "model.pt"), "--pairs", str(tmp_path / "p.tsv"), "--quiet"]
    for what in ("sensitivity", "importance"):
        _dump(["analyze", what, *model, "--out", str(tmp_path / what)])
        assert (tmp_path / what / f"{what}.json").is_file()
    _dump(["attention", "dump", *model, "--out", str(tmp_path / "d.pt")])
    for what in ("bias", "roles"):
        _dump(["analyze", what, str(tmp_path / "d.pt"), "--out", str(tmp_path / what), "--quiet"])
        assert (tmp_path / what / f"{what}.json").is_file()
