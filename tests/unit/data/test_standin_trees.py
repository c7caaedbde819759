"""Gold trees of the BERT stand-ins (``standin-sentences.conllu``): valid UD
trees read by the project's CoNLL-U reader, words as in the extracted text,
held out from the corpus, and a corpus that writing them leaves unchanged."""

import bz2
import hashlib
import zipfile
from pathlib import Path

import pytest

from fairseq_local_data import standins
from fairseq_local_data.bert_corpus import document_sentences, read_gutenberg_zip, split_sentences
from fairseq_local_data.language import Tree
from fairseq_local_data.standins import (
    BOOKS_NAME, TREES_NAME, WIKI_NAME, StandinConfig, _Prose, generate, surface, tree_conllu, tree_sentences,
    wiki_xml,
)
from fairseq_local_data.syntax import read_conllu

SMALL = StandinConfig(articles=12, duplicates=2, redirects=3, books=3, chapters=2, paragraphs=2, trees=40)
RELATIONS = {"root", "aux", "nsubj", "obj", "det", "amod", "nmod:poss", "case", "nmod", "obl", "acl:relcl",
             "conj", "cc", "advmod", "discourse", "punct"}
# Content hashes of the corpus written before the trees existed (seed 3, 10 articles, 2 books of 2 x 2):
# the XML text, and each zip member's name and text.
PINNED = dict(seed=3, articles=10, books=2, chapters=2, paragraphs=2)
PINNED_WIKI = "38c978e793b91d1de6a8ac47e0f2a3a6009d1c3720ec7efea5a0d2100630c882"
PINNED_BOOKS = "6631e8978fa22286a2967237af157f98616a8dc119c88f0470920965eb13af8a"


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("standin_trees")
    generate(SMALL, path)
    return path


def blocks(path: Path) -> list[list[str]]:
    """The CoNLL-U file's sentences as lists of lines."""
    return [b.split("\n") for b in path.read_text(encoding="utf-8").strip("\n").split("\n\n")]


def detokenised(lines: list[str]) -> str:
    """The words of one block joined as UD says: a space after each, unless ``SpaceAfter=No``."""
    rows = [line.split("\t") for line in lines if not line.startswith("#")]
    return "".join(r[1] + ("" if "SpaceAfter=No" in r[9] else " ") for r in rows).rstrip(" ")


def test_conllu_parses_into_valid_trees(out):
    sentences = read_conllu(str(out / TREES_NAME))
    assert len(sentences) == SMALL.trees
    for s in sentences:
        n = len(s.words)
        assert 4 <= n <= 30 and s.heads is not None and s.relations is not None
        assert s.heads.count(-1) == 1 and s.relations[s.heads.index(-1)] == "root"
        assert all(-1 <= h < n and h != i for i, h in enumerate(s.heads))
        for i in range(n):  # every word reaches the root: no cycles
            seen, j = set(), i
            while j != -1:
                assert j not in seen
                seen.add(j)
                j = s.heads[j]
        assert set(s.relations) <= RELATIONS
        assert s.words[-1] == "." and s.relations[-1] == "punct" and s.heads[-1] == s.heads.index(-1)


def test_words_are_the_sentence_of_the_extracted_text(out):
    ids = []
    for lines in blocks(out / TREES_NAME):
        ids.append(lines[0].removeprefix("# sent_id = "))
        text = lines[1].removeprefix("# text = ")
        assert detokenised(lines[2:]) == text
        words = [line.split("\t")[1] for line in lines[2:]]
        assert words == text[:-1].split() + ["."]
        assert text[0].isupper() and text.endswith(".") and " ." not in text
        assert split_sentences(text) == [text]  # BlingFire keeps it one sentence, as in the corpus
        lemmas = [line.split("\t")[2] for line in lines[2:]]
        assert lemmas[0] == lemmas[0].lower()  # only the form is capitalised
    assert ids[:3] == ["wiki-1", "gutenberg-2", "wiki-3"] and len(set(ids)) == len(ids)


def test_text_is_formed_as_the_corpus_sentences():
    """The same stream gives the same text through the corpus's path and the trees'."""
    for cfg in (SMALL, standins._books_config(SMALL)):
        corpus, trees = _Prose(cfg), _Prose(cfg)
        for k in range(50):
            block = tree_conllu(trees.tree(), str(k))
            assert block.split("\n")[1] == f"# text = {corpus.sentence()}"


def test_sentences_are_held_out_and_distinct(out):
    texts = [lines[1].removeprefix("# text = ") for lines in blocks(out / TREES_NAME)]
    assert len(set(texts)) == len(texts)
    books = {s for b in read_gutenberg_zip(out / BOOKS_NAME) for s in document_sentences(b)}
    assert books and not books & set(texts)
    seen: set = set()
    wiki_xml(SMALL, seen)
    standins.books(SMALL, seen)
    assert not seen & {tuple(t.words[:-1]) for _, t in tree_sentences(SMALL)}
    first = tree_sentences(StandinConfig(**{**SMALL.__dict__, "trees": 3}))
    again = tree_sentences(StandinConfig(**{**SMALL.__dict__, "trees": 2}), {tuple(first[0][1].words[:-1])})
    assert [t.words for _, t in again][0] != first[0][1].words  # a sentence of the corpus is skipped


def content_hashes(folder: Path) -> tuple[str, str]:
    wiki = hashlib.sha256(bz2.decompress((folder / WIKI_NAME).read_bytes())).hexdigest()
    h = hashlib.sha256()
    with zipfile.ZipFile(folder / BOOKS_NAME) as z:
        for info in z.infolist():
            h.update(info.filename.encode() + b"\0" + z.read(info) + b"\0")
    return wiki, h.hexdigest()


def test_corpus_is_unchanged_by_the_trees(out, tmp_path):
    generate(StandinConfig(**{**SMALL.__dict__, "trees": 0}), tmp_path)
    for name in (WIKI_NAME, BOOKS_NAME):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()
    assert not (tmp_path / TREES_NAME).exists()
    generate(StandinConfig(**PINNED), tmp_path / "pinned")
    assert content_hashes(tmp_path / "pinned") == (PINNED_WIKI, PINNED_BOOKS)
    assert (tmp_path / "pinned" / TREES_NAME).is_file()


def test_same_seed_same_trees_and_zero_removes_them(out, tmp_path):
    generate(SMALL, tmp_path)
    assert (tmp_path / TREES_NAME).read_bytes() == (out / TREES_NAME).read_bytes()
    generate(StandinConfig(**{**SMALL.__dict__, "seed": 2}), tmp_path / "other")
    assert (tmp_path / "other" / TREES_NAME).read_bytes() != (out / TREES_NAME).read_bytes()
    assert standins.main(["--out", str(tmp_path), "--trees", "0", "--articles", "2", "--books", "1",
                          "--chapters", "1", "--paragraphs", "1", "--duplicates", "0", "--redirects", "0"]) == 0
    assert not (tmp_path / TREES_NAME).exists()


def test_bad_tree_options_are_one_line(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit) as e:
        standins.main(["--out", str(tmp_path), "--trees", "-1"])
    assert e.value.code == 2 and capsys.readouterr().err == "error: --trees must be non-negative\n"
    tree = Tree()
    tree.add("zol", "PRON")
    tree.add("lemu", "VERB", 0, "nsubj")
    tree.add(".", "PUNCT", 1, "punct")
    monkeypatch.setattr(_Prose, "tree", lambda self, max_len=30: tree)  # the generator repeats itself
    with pytest.raises(standins.TreeError, match="could not draw 2 distinct"):
        tree_sentences(StandinConfig(trees=2))
    with pytest.raises(SystemExit) as e:
        standins.main(["--out", str(tmp_path), "--trees", "2", "--articles", "1", "--books", "1", "--chapters", "1",
                       "--paragraphs", "1", "--duplicates", "0", "--redirects", "0"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: could not draw 2 distinct") and err.count("\n") == 1


def test_surface_capitalises_and_ends_with_a_period():
    assert surface(["zol", "lemu", "go"]) == "Zol lemu go."


@pytest.mark.slow  # the corpus script, fairseq-train and fairseq-local in fresh processes (about 40 s)
def test_attention_dump_of_a_roberta_pretrained_on_the_standins(tmp_path):
    import torch

    from helpers import run

    generate(StandinConfig(articles=30, duplicates=1, redirects=1, books=2, chapters=2, paragraphs=3, trees=60),
             tmp_path / "standins")
    run(["bash", "scripts/prepare-bert-corpus.sh", "--wiki", str(tmp_path / "standins" / WIKI_NAME),
         "--gutenberg", str(tmp_path / "standins" / BOOKS_NAME), "--out", str(tmp_path / "corpus"),
         "--bpe", "sentencepiece", "--vocab-size", "300", "--valid-docs", "2", "--test-docs", "1", "--workers", "1"])
    run(["bash", "scripts/pretrain-bert.sh", "roberta_band6", "--data", str(tmp_path / "corpus"), "--save-dir",
         str(tmp_path / "run"), "--updates", "2", "--updates-512", "0", "--lengths", "32,64", "--max-positions", "128",
         "--batch-size", "8", "--update-freq", "1", "--warmup", "1", "--cpu", "--", "--encoder-embed-dim", "48",
         "--encoder-ffn-embed-dim", "96", "--num-workers", "0"])
    conllu = tmp_path / "standins" / TREES_NAME
    r = run(["fairseq-local", "attention", "dump", "--path", str(tmp_path / "run" / "checkpoint_last.pt"),
             "--conllu", str(conllu), "--out", str(tmp_path / "dump.pt"), "--quiet"])
    assert "warning" not in r.stderr  # the corpus's SentencePiece pieces cover the trees' words
    records = torch.load(tmp_path / "dump.pt", map_location="cpu", weights_only=True)
    gold = read_conllu(str(conllu))
    assert len(records) == len(gold) == 60
    for rec, s in zip(records, gold):
        assert rec["words"] == s.words and rec["heads"] == s.heads and rec["relations"] == s.relations
        assert rec["attn"].shape[-1] == len(rec["tokens"]) and rec["tokens"][0] == "<s>"
