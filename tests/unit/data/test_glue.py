"""The GLUE layout reader, the recipe's columns, the BPE of the GLUE text and
the stand-in GLUE folder."""

import os
import subprocess
import sys

import pytest

from fairseq_local_data import glue, glue_fake
from helpers import ENV, ROOT

# The official files and headers (GLUE download script; fairseq's
# preprocess_GLUE_tasks.sh reads these columns). None: no header line.
MNLI = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
        "sentence1_parse", "sentence2_parse", "sentence1", "sentence2"]
STSB = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2"]
OFFICIAL = {
    "CoLA": {"train.tsv": (None, 4), "dev.tsv": (None, 4), "test.tsv": (["index", "sentence"], 2)},
    "SST-2": {"train.tsv": (["sentence", "label"], 2), "dev.tsv": (["sentence", "label"], 2),
              "test.tsv": (["index", "sentence"], 2)},
    "MRPC": {s: (["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], 5) for s in ("train.tsv", "dev.tsv")}
    | {"test.tsv": (["index", "#1 ID", "#2 ID", "#1 String", "#2 String"], 5)},
    "STS-B": {s: (STSB + ["score"], 10) for s in ("train.tsv", "dev.tsv")} | {"test.tsv": (STSB, 9)},
    "QQP": {s: (["id", "qid1", "qid2", "question1", "question2", "is_duplicate"], 6) for s in ("train.tsv", "dev.tsv")}
    | {"test.tsv": (["id", "question1", "question2"], 3)},
    "MNLI": {"train.tsv": (MNLI + ["label1", "gold_label"], 12),
             "dev_matched.tsv": (MNLI + ["label1", "label2", "label3", "label4", "label5", "gold_label"], 16),
             "dev_mismatched.tsv": (MNLI + ["label1", "label2", "label3", "label4", "label5", "gold_label"], 16),
             "test_matched.tsv": (MNLI, 10), "test_mismatched.tsv": (MNLI, 10)},
    "QNLI": {s: (["index", "question", "sentence", "label"], 4) for s in ("train.tsv", "dev.tsv")}
    | {"test.tsv": (["index", "question", "sentence"], 3)},
    "RTE": {s: (["index", "sentence1", "sentence2", "label"], 4) for s in ("train.tsv", "dev.tsv")}
    | {"test.tsv": (["index", "sentence1", "sentence2"], 3)},
    "WNLI": {s: (["index", "sentence1", "sentence2", "label"], 4) for s in ("train.tsv", "dev.tsv")}
    | {"test.tsv": (["index", "sentence1", "sentence2"], 3)},
    "diagnostic": {"diagnostic.tsv": (["index", "sentence1", "sentence2"], 3)},
}
LABELS = {"CoLA": {"0", "1"}, "SST-2": {"0", "1"}, "MRPC": {"0", "1"}, "QQP": {"0", "1"}, "WNLI": {"0", "1"},
          "MNLI": {"entailment", "neutral", "contradiction"}, "QNLI": {"entailment", "not_entailment"},
          "RTE": {"entailment", "not_entailment"}}


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    out = tmp_path_factory.mktemp("glue")
    glue_fake.make_fake_glue(str(out), rows=50, eval_rows=20)
    return out


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def test_fake_folder_has_the_official_files_and_columns(fake):
    assert sorted(os.listdir(fake)) == sorted(OFFICIAL)
    for folder, files in OFFICIAL.items():
        assert sorted(os.listdir(fake / folder)) == sorted(files)
        for name, (header, ncols) in files.items():
            rows = [r.split("\t") for r in lines(fake / folder / name)]
            if header is not None:
                assert rows[0] == header, (folder, name)
                rows = rows[1:]
            assert len(rows) == (50 if name == "train.tsv" else 20), (folder, name)
            assert all(len(r) == ncols for r in rows), (folder, name)
            if folder == "CoLA" and name != "test.tsv":  # the author's mark: "*" if unacceptable
                assert all(r[2] == ("" if r[1] == "1" else "*") for r in rows)


def test_fake_labels_follow_from_the_text(fake):
    text = glue_fake._Text(1, __import__("random").Random(0))
    for name, allowed in LABELS.items():
        got = [y.strip() for y in glue.extract(str(fake), glue.TASKS[name])["train"]["label"]]
        assert set(got) == allowed, name
    sst = glue.extract(str(fake), glue.TASKS["SST-2"])["train"]
    assert all((y == "0") == (s.split()[0] == text.neg) for s, y in zip(sst["input0"], sst["label"]))
    cola = glue.extract(str(fake), glue.TASKS["CoLA"])["train"]
    assert all((y == "1") == s.endswith(" .") for s, y in zip(cola["input0"], cola["label"]))
    stsb = glue.extract(str(fake), glue.TASKS["STS-B"])["train"]
    for a, b, y in zip(stsb["input0"], stsb["input1"], stsb["label"]):
        if float(y) == 5.0:
            assert a == b
        assert 0.0 <= float(y) <= 5.0


@pytest.mark.slow  # starts a process
def test_fake_is_deterministic_and_has_its_commands(tmp_path, fake):
    glue_fake.make_fake_glue(str(tmp_path / "api"), ["RTE"], rows=50, eval_rows=20)
    # the demo's command, and the stand-in's own module
    for out, cmd in (("m", ["-m", "fairseq_local_data.glue", "fake"]), ("f", ["-m", "fairseq_local_data.glue_fake"])):
        r = subprocess.run([sys.executable, *cmd, "--out", str(tmp_path / out), "--tasks", "RTE", "--rows", "50"],
                           cwd=ROOT, env=ENV, capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout == "RTE train=50 dev=20 test=20\n", r.stderr
    for out in ("api", "m", "f"):
        for split in ("train", "dev", "test"):
            assert lines(tmp_path / out / "RTE" / f"{split}.tsv") == lines(fake / "RTE" / f"{split}.tsv"), (out, split)
    r = subprocess.run([sys.executable, "-m", "fairseq_local_data.glue", "fake", "--out", str(tmp_path / "x"),
                        "--rows", "0"], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr == "error: --rows and --eval-rows must be positive\n"


def test_extract_takes_the_recipes_columns(fake):
    mnli = glue.extract(str(fake), glue.TASKS["MNLI"])
    assert sorted(mnli) == ["test", "test1", "test2", "train", "valid", "valid1"]
    dev = [r.split("\t") for r in lines(fake / "MNLI" / "dev_mismatched.tsv")[1:]]
    assert mnli["valid1"]["input0"] == [r[8] for r in dev]
    assert mnli["valid1"]["input1"] == [r[9] for r in dev]
    assert mnli["valid1"]["label"] == [r[15] for r in dev]
    assert "label" not in mnli["test"] and mnli["test"]["index"] == [str(k) for k in range(20)]
    qqp_test = [r.split("\t") for r in lines(fake / "QQP" / "test.tsv")[1:]]
    assert glue.extract(str(fake), glue.TASKS["QQP"])["test"]["input0"] == [r[1] for r in qqp_test]
    cola = [r.split("\t") for r in lines(fake / "CoLA" / "train.tsv")]  # no header: all 50 rows
    got = glue.extract(str(fake), glue.TASKS["CoLA"])["train"]
    assert got["input0"] == [r[3] for r in cola] and got["label"] == [r[1] for r in cola]


def test_qqp_malformed_rows_are_dropped_and_mrpc_bom_is_read(tmp_path):
    (tmp_path / "QQP").mkdir()
    (tmp_path / "QQP" / "train.tsv").write_text(
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n0\t1\t2\ta b\tc d\t1\n1\t3\t4\tbroken\n2\t5\t6\te\tf\t0\n")
    rows = glue.read_rows(str(tmp_path), glue.TASKS["QQP"], "train")
    assert [r[0] for r in rows] == ["0", "2"]
    (tmp_path / "MRPC").mkdir()
    (tmp_path / "MRPC" / "dev.tsv").write_text("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n",
                                               encoding="utf-8")
    assert glue.read_rows(str(tmp_path), glue.TASKS["MRPC"], "dev") == [["1", "1", "2", "a", "b"]]


@pytest.mark.slow  # starts a process
def test_missing_task_folder_or_file_is_a_one_line_error(tmp_path, fake):
    with pytest.raises(glue.GlueError, match="has no task folder 'RTE'"):
        glue.check(str(tmp_path), ["RTE"])
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(glue.GlueError, match="missing RTE/dev.tsv"):
        glue.check(str(tmp_path), ["RTE"])
    r = subprocess.run([sys.executable, "-m", "fairseq_local_data.glue", "check", "--glue-dir", str(tmp_path),
                        "--tasks", "SST-2"], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "no task folder 'SST-2'" in r.stderr
    glue.check(str(fake), list(glue.TASKS))  # the stand-in is complete


def test_preprocess_commands_follow_fairseqs_recipe():
    cmds = glue.preprocess_commands("MNLI", "W", "D", "dict.txt")
    assert len(cmds) == 3  # input0, input1, label
    assert cmds[0] == ["--only-source", "--trainpref", "W/train.input0", "--validpref", "W/valid.input0,W/valid1.input0",
                       "--testpref", "W/test.input0,W/test1.input0", "--destdir", "D/input0", "--workers", "1",
                       "--srcdict", "dict.txt"]
    assert cmds[2] == ["--only-source", "--trainpref", "W/train.label", "--validpref", "W/valid.label,W/valid1.label",
                       "--destdir", "D/label", "--workers", "1"]  # own dictionary, no test labels
    assert len(glue.preprocess_commands("SST-2", "W", "D", "d")) == 2  # one input, labels
    assert len(glue.preprocess_commands("STS-B", "W", "D", "d")) == 2  # two inputs, labels as text


def test_stsb_labels_are_scaled_as_awk_prints_them(tmp_path):
    (tmp_path / "train.label").write_text("5.000\n3.800\n2.333\n0.000\n")
    (tmp_path / "valid.label").write_text("4.75\n1\n")
    glue.write_regression_labels(str(tmp_path), str(tmp_path / "bin"))
    # fairseq: awk '{print $1 / 5.0}' (awk prints with %.6g)
    assert lines(tmp_path / "bin" / "label" / "train.label") == ["1", "0.76", "0.4666", "0"]
    assert lines(tmp_path / "bin" / "label" / "valid.label") == ["0.95", "0.2"]


def test_encoders(tmp_path):
    assert glue.encoder("none")("  a   b c ") == "a b c"
    with pytest.raises(glue.GlueError, match="missing GPT-2 BPE file"):
        glue.encoder("gpt2", str(tmp_path / "missing"))
    with pytest.raises(glue.GlueError, match="unknown --bpe 'bert'"):
        glue.encoder("bert")
    import sentencepiece as spm

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(glue_fake.sentences(200)) + "\n")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=100,
                                   minloglevel=2)
    pieces = glue.encoder("sentencepiece", str(tmp_path / "sp.model"))("zol ri .")
    assert pieces.replace(" ", "").replace("\u2581", " ").strip() == "zol ri ."
    assert pieces == " ".join(spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model")).encode(
        "zol ri .", out_type=str))


GPT2_DIR = ROOT / "data-bin" / "gpt2-bpe"
# MRPC's first dev pair and an SST-2-like line with non-ASCII text and double spaces.
GLUE_TEXT = ["He said the foodservice pie business doesn 't fit the company 's long-term growth strategy .",
             "\"The foodservice pie business does not fit our long-term growth strategy.",
             "",
             "  a naïve , 2½-hour “epic” that never   quite lands  "]


@pytest.mark.skipif(not all((GPT2_DIR / f).is_file() for f in ("encoder.json", "vocab.bpe")),
                    reason="GPT-2's encoder.json/vocab.bpe not in data-bin/gpt2-bpe")
@pytest.mark.slow  # starts a process
def test_gpt2_bpe_is_fairseqs_gpt2bpe(tmp_path):
    """--bpe gpt2 gives the ids of fairseq's GPT2BPE (what RoBERTa's hub
    interface encodes with), through the API and through the encode command
    as prepare-glue.sh runs it (python -m, the folder given with --bpe-model)."""
    from fairseq.data.encoders.gpt2_bpe import GPT2BPE, GPT2BPEConfig

    ref = GPT2BPE(GPT2BPEConfig(gpt2_encoder_json=str(GPT2_DIR / "encoder.json"),
                                gpt2_vocab_bpe=str(GPT2_DIR / "vocab.bpe")))
    want = [ref.encode(x.strip()) for x in GLUE_TEXT]
    assert want[0].split()[:4] == ["1544", "531", "262", "2057"] and want[2] == ""  # "He said the food..."
    enc = glue.encoder("gpt2", str(GPT2_DIR))
    assert [enc(x) for x in GLUE_TEXT] == want
    assert ref.decode(want[3]) == GLUE_TEXT[3].strip()
    (tmp_path / "in").write_text("\n".join(GLUE_TEXT) + "\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "fairseq_local_data.glue", "encode", "--bpe", "gpt2", "--bpe-model",
                        str(GPT2_DIR), "--inputs", str(tmp_path / "in"), "--outputs", str(tmp_path / "out")],
                       cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert lines(tmp_path / "out") == want


def test_count_reads_the_mmap_index(tmp_path):
    import struct

    (tmp_path / "x.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQ", 1, 4, 37) + b"\x00" * 8)
    assert glue.count(str(tmp_path / "x")) == 37
    (tmp_path / "y.idx").write_bytes(b"nope")
    with pytest.raises(glue.GlueError):
        glue.count(str(tmp_path / "y"))
