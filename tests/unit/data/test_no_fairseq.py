"""The data tools run without fairseq: every module of fairseq_local_data
imports, and every tool answers --help and runs a small real command, in a
Python where importing fairseq, fairseq_cli, the plugin package
fairseq_local or torch raises ImportError.  Each command's output is checked
against the same step run here, through the API."""

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import fairseq_local_data
from fairseq_local_data import bert_corpus, cleaning, glue, standins, synthetic
from helpers import ENV, ROOT

BLOCKED = ("fairseq", "fairseq_cli", "fairseq_local", "torch")
# A finder ahead of all others that refuses BLOCKED and their submodules.
BLOCK = f"""
import importlib.abc, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is blocked: the data tools run without it")
        return None

sys.meta_path.insert(0, Blocked())
"""
# Then run the module named by the first argument as ``python -m MODULE ARGS`` does.
RUN = BLOCK + """
import runpy
module, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""
MODULES = sorted(m.name for m in pkgutil.walk_packages(fairseq_local_data.__path__, "fairseq_local_data."))
TOOLS = sorted(m for m in MODULES if callable(getattr(importlib.import_module(m), "main", None)))
GPT2_DIR = ROOT / "data-bin" / "gpt2-bpe"


def blocked(module: str, *args, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` with BLOCKED unimportable."""
    r = subprocess.run([sys.executable, "-c", RUN, module, *map(str, args)], input=stdin, cwd=ROOT, env=ENV,
                       capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, f"{module} {args}:\n{r.stderr[-3000:]}"
    return r


def files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow  # starts a process
def test_the_blocker_refuses_fairseq_and_the_plugin():
    for module in ("fairseq_local_cli.main", "fairseq_cli.preprocess"):
        r = blocked(module, "--help", check=False)
        assert r.returncode == 1 and "is blocked: the data tools run without it" in r.stderr, r.stderr[-2000:]


@pytest.mark.slow  # starts a process
def test_every_module_imports_without_fairseq():
    package = Path(fairseq_local_data.__file__).parent
    assert MODULES == sorted(f"fairseq_local_data.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__")
    code = BLOCK + f"import importlib\nfor m in {MODULES!r}:\n    importlib.import_module(m)\n"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def test_the_tools_are_the_documented_ones():
    """A new tool needs a real command below."""
    assert [m.rsplit(".", 1)[1] for m in TOOLS] == [
        "bert_corpus", "bpe", "databin", "glue", "glue_fake", "progress", "standins", "synthetic", "wmt"]


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("module", TOOLS)
def test_help(module):
    r = blocked(module, "--help")
    assert r.stdout.startswith(f"usage: python -m {module} ") and r.stderr == "", r.stdout[:200]


@pytest.mark.slow  # starts a process
def test_synthetic_corpus(tmp_path):
    sizes = dict(train=30, valid=5, test=5, nouns=20, adjectives=5, verbs=5, preps=2, dets=2, seed=4)
    r = blocked("fairseq_local_data.synthetic", "--out-dir", tmp_path / "cli", "--trees",
                *[f"--{k}={v}" for k, v in sizes.items()])
    assert r.stdout == f"train=30 valid=5 test=5 pairs written to {tmp_path / 'cli'}\n"
    synthetic.generate_corpus(synthetic.SyntheticConfig(**sizes), str(tmp_path / "api"), trees=True)
    assert files(tmp_path / "cli") == files(tmp_path / "api") and len(files(tmp_path / "api")) == 9


@pytest.mark.slow  # starts a process
def test_standins_and_the_bert_corpus_split(tmp_path):
    small = dict(articles=3, duplicates=1, redirects=1, books=2, chapters=1, paragraphs=2)
    blocked("fairseq_local_data.standins", "--out", tmp_path / "s", *[f"--{k}={v}" for k, v in small.items()])
    standins.generate(standins.StandinConfig(**small), tmp_path / "api")
    assert files(tmp_path / "s") == files(tmp_path / "api")
    books = tmp_path / "s" / standins.BOOKS_NAME
    assert blocked("fairseq_local_data.bert_corpus", "check-gutenberg", books).stdout == "3 books\n"
    blocked("fairseq_local_data.bert_corpus", "split", "--gutenberg", books, "--out", tmp_path / "cli",
            "--valid-docs", "1", "--test-docs", "0")
    bert_corpus.build_splits(None, books, tmp_path / "split", 1, 0)
    assert files(tmp_path / "cli") == files(tmp_path / "split")
    assert (tmp_path / "cli" / "train.txt").read_text().count("\n\n") == 0  # 2 distinct books: 1 train, 1 valid


@pytest.mark.slow  # starts a process
def test_glue_stand_in_check_extract_and_encode(tmp_path):
    blocked("fairseq_local_data.glue", "fake", "--out", tmp_path / "glue", "--tasks", "RTE", "--rows", "8")
    blocked("fairseq_local_data.glue_fake", "--out", tmp_path / "again", "--tasks", "RTE", "--rows", "8")
    assert files(tmp_path / "glue") == files(tmp_path / "again")
    blocked("fairseq_local_data.glue", "check", "--glue-dir", tmp_path / "glue", "--tasks", "RTE")
    blocked("fairseq_local_data.glue", "extract", "--glue-dir", tmp_path / "glue", "--task", "RTE",
            "--out", tmp_path / "work")
    glue.write_extracted(str(tmp_path / "glue"), "RTE", str(tmp_path / "api"))
    assert files(tmp_path / "work") == files(tmp_path / "api")
    blocked("fairseq_local_data.glue", "encode", "--bpe", "none", "--inputs", tmp_path / "work" / "train.raw.input0",
            "--outputs", tmp_path / "work" / "train.input0")
    raw = (tmp_path / "work" / "train.raw.input0").read_text().splitlines()
    assert (tmp_path / "work" / "train.input0").read_text().splitlines() == [" ".join(x.split()) for x in raw]


@pytest.mark.slow  # starts a process
def test_wmt_tokenise_clean_and_split_compounds(tmp_path):
    (tmp_path / "c.en").write_text("Hello, world!\nA well-known fact.\nx\n")
    (tmp_path / "c.de").write_text("Hallo, Welt!\nEine bekannte Tatsache.\ny y y y\n")
    for lang in ("en", "de"):
        blocked("fairseq_local_data.wmt", "tok", "--lang", lang, tmp_path / f"c.{lang}", tmp_path / f"t.{lang}")
        cleaning.tokenize_file(tmp_path / f"c.{lang}", tmp_path / f"api.{lang}", lang)
        assert (tmp_path / f"t.{lang}").read_bytes() == (tmp_path / f"api.{lang}").read_bytes()
    assert (tmp_path / "t.en").read_text().splitlines()[1] == "A well @-@ known fact ."
    blocked("fairseq_local_data.wmt", "clean", "--corpus", "c", tmp_path / "t.en", tmp_path / "t.de",
            "--out-src", tmp_path / "k.en", "--out-tgt", tmp_path / "k.de", "--stats", tmp_path / "k.json")
    assert (tmp_path / "k.en").read_text() == "Hello , world !\nA well @-@ known fact .\n"  # x / y y y y: ratio 4
    blocked("fairseq_local_data.wmt", "split-compounds", tmp_path / "k.en", tmp_path / "s.en")
    assert (tmp_path / "s.en").read_text() == "Hello , world !\nA well ##AT##-##AT## known fact .\n"


@pytest.mark.slow  # starts a process
def test_bpe_sentencepiece_and_gpt2(tmp_path):
    (tmp_path / "train.txt").write_text("the cat sat on the mat .\nthe dog sat on the log .\n" * 40)
    blocked("fairseq_local_data.bpe", "spm-train", "--input", tmp_path / "train.txt", "--model-prefix",
            tmp_path / "spm", "--vocab-size", "30", "--threads", "1")
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    assert sp.get_piece_size() == 30
    r = blocked("fairseq_local_data.bpe", "encode", "--bpe", "sentencepiece", "--model", tmp_path / "spm.model",
                stdin="the cat sat\n\na dog\n")
    assert r.stdout.split("\n") == [" ".join(sp.encode("the cat sat", out_type=str)), "",
                                    " ".join(sp.encode("a dog", out_type=str)), ""]
    if (GPT2_DIR / "vocab.bpe").is_file():
        r = blocked("fairseq_local_data.bpe", "encode", "--bpe", "gpt2", "--model", GPT2_DIR,
                    stdin="Hello world\n\nthe cat sat\n")
        assert r.stdout == "15496 995\n\n1169 3797 3332\n"


@pytest.mark.slow  # starts a process
def test_databin_checks_a_binarised_folder(tmp_path):
    import struct

    (tmp_path / "dict.txt").write_text("a 3\nb 2\n")
    (tmp_path / "train.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQ", 1, 4, 1) + struct.pack("<iq", 2, 0))
    (tmp_path / "train.bin").write_bytes(struct.pack("<ii", 4, 5))
    assert blocked("fairseq_local_data.databin", tmp_path).stdout == "2 files checked\n"
    (tmp_path / "train.bin").write_bytes(b"")
    r = blocked("fairseq_local_data.databin", "--quiet", tmp_path, check=False)
    assert r.returncode == 1 and r.stderr.startswith(f"error: '{tmp_path / 'train.bin'}' is shorter than its index")
