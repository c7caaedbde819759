"""The hard stand-in GLUE tasks' gold trees (``glue fake --hard --trees``):
TASK/SPLIT.conllu beside each dev and test TSV, one tree per sentence of
the TSV, words exactly as the TSV holds them, read by the project's reader."""

import os

import pytest

from fairseq_local_data import glue, glue_fake
from fairseq_local_data.glue import GlueError
from fairseq_local_data.syntax import read_conllu

TASKS = ("CoLA", "SST-2", "MNLI", "QNLI", "QQP")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("task_trees")
    kw = dict(rows=12, eval_rows=6, hard=True, lexicon=(40, 16, 20), max_len=20)
    glue_fake.make_fake_glue(str(base / "trees"), TASKS, trees=True, **kw)
    glue_fake.make_fake_glue(str(base / "plain"), TASKS, **kw)
    return base / "trees", base / "plain"


def test_each_eval_split_has_its_sentences_with_trees(folders):
    trees, _ = folders
    for name in TASKS:
        t = glue.TASKS[name]
        data = glue.extract(str(trees), t)
        for split in t.dev + t.test:
            sentences = read_conllu(str(trees / name / f"{split}.conllu"))
            cols = data[glue.fairseq_split(t, split)]
            pairs = "input1" in cols
            assert len(sentences) == len(cols["input0"]) * (2 if pairs else 1), (name, split)
            expect = [s for k in range(len(cols["input0"]))
                      for s in ((cols["input0"][k], cols["input1"][k]) if pairs else (cols["input0"][k],))]
            assert [" ".join(s.words) for s in sentences] == expect, (name, split)
            for s in sentences:  # a tree: one root, every head inside the sentence
                assert s.heads.count(-1) == 1 and all(-1 <= h < len(s.words) for h in s.heads)
                assert s.relations[s.heads.index(-1)] == "root"
        assert not os.path.exists(trees / name / "train.conllu")


def test_trees_change_no_tsv_and_need_hard(folders, tmp_path):
    trees, plain = folders
    for name in TASKS:
        for f in os.listdir(plain / name):
            assert (trees / name / f).read_bytes() == (plain / name / f).read_bytes()
        assert not [f for f in os.listdir(plain / name) if f.endswith(".conllu")]
    with pytest.raises(GlueError, match="--trees goes with --hard"):
        glue_fake.make_fake_glue(str(tmp_path / "x"), ["SST-2"], rows=4, trees=True)


def test_command_line_writes_the_trees(tmp_path):
    out = tmp_path / "g"
    assert glue.main(["fake", "--hard", "--trees", "--tasks", "SST-2", "--rows", "6", "--eval-rows", "3",
                      "--lexicon", "40,16,20", "--max-len", "20", "--out", str(out)]) == 0
    first = (out / "SST-2" / "test.conllu").read_text(encoding="utf-8").split("\n")
    assert first[0] == "# sent_id = test-1-1" and first[1].startswith("# text = ")
    assert len(read_conllu(str(out / "SST-2" / "dev.conllu"))) == 3
