"""Dependency trees of the test sentences Pande et al. analyse at ``paper``
scale (§3), made by a named parser.

§3.1: "we show the distribution of γlocal, γsyntactic and γunrelated for 100
randomly sampled sentences each from the test sets of the 4 GLUE tasks";
§3.2: "for 1,000 sentences each from the test sets".  S_i holds "the indices
of all tokens which are in a syntactic relation with the token at location i";
the paper names no parser.  Here the sentences are parsed by Stanza
(:data:`PARSER`, :data:`PARSER_VERSION`: Qi et al. 2020, its default English
pipeline, Universal Dependencies), and the version that ran is written beside
the CoNLL-U (``OUT.json``) for the report to state.

Sentences: from a GLUE folder, each of the task's input columns of the split
is a sentence (a pair gives two); ``--sentences N`` of them are drawn at
random (``--seed``), and a text the parser splits into several sentences is
left out for the next draw (one input, one tree).  From ``--text FILE`` (one
sentence a line, e.g. newstest2014's tokenised English side with
``--pretokenized``: its words are kept as they are) likewise.

Command line: ``python -m fairseq_local_reproduce.pande_parse (--glue-dir DIR
--task T --split S | --text FILE [--pretokenized]) --sentences N --seed K
--out FILE.conllu [--model-dir DIR]``; needs ``pip install
stanza==1.15.0`` and the English models (``stanza.download("en")``).
"""

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

PARSER = "stanza"
PARSER_VERSION = "1.15.0"  # the version the plan names; the one that ran is recorded in OUT.json
PIPELINE = "tokenize,mwt,pos,lemma,depparse"
BATCH = 64  # texts parsed at a time

# one parsed sentence: CoNLL-U lines (tokens and words), without comments
Parsed = List[str]
Parser = Callable[[List[str]], List[List[Parsed]]]  # texts -> per text its sentences


def glue_sentences(glue_dir: str, task: str, split: str) -> List[str]:
    """Every input sentence of ``task``'s ``split`` (both sides of a pair)."""
    from fairseq_local_data.glue import extract, fairseq_split, task as glue_task

    t = glue_task(task)
    data = extract(glue_dir, t)[fairseq_split(t, split) if split != "train" else "train"]
    return [s for key in sorted(k for k in data if k.startswith("input")) for s in data[key] if s.strip()]


def text_sentences(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def stanza_parser(pretokenized: bool, model_dir: Optional[str] = None, cuda: bool = True) -> Tuple[Parser, str]:
    """(parse, version) with Stanza's English pipeline."""
    try:
        import stanza
    except ImportError:
        raise SystemExit(f"error: the parser is not installed: pip install {PARSER}=={PARSER_VERSION}, "
                         "then python -c 'import stanza; stanza.download(\"en\")'") from None
    opts = {"dir": model_dir} if model_dir else {}
    nlp = stanza.Pipeline("en", processors=PIPELINE, tokenize_pretokenized=pretokenized, use_gpu=cuda,
                          verbose=False, **opts)

    def parse(texts: List[str]) -> List[List[Parsed]]:
        docs = nlp([stanza.Document([], text=t) for t in texts]) if not pretokenized else \
            [nlp([t.split()]) for t in texts]
        return [[_conllu_rows(s) for s in doc.sentences] for doc in docs]

    return parse, str(stanza.__version__)


def _conllu_rows(sentence) -> Parsed:
    """A Stanza sentence's CoNLL-U lines: multiword token ranges, then their words."""
    rows = []
    for token in sentence.tokens:
        ids = token.id if isinstance(token.id, tuple) else (token.id,)
        if len(ids) > 1:
            rows.append(f"{ids[0]}-{ids[-1]}\t{token.text}\t_\t_\t_\t_\t_\t_\t_\t_")
        for w in token.words:
            rows.append("\t".join(str(x) if x not in (None, "") else "_" for x in (
                w.id, w.text, w.lemma, w.upos, w.xpos, w.feats, w.head, w.deprel, None, None)))
    return rows


def sample(texts: Sequence[str], n: int, parse: Parser, seed: int = 1) -> Tuple[List[Tuple[str, Parsed]], int]:
    """``n`` texts drawn at random (``seed``), each parsed as one sentence:
    [(text, rows)], and how many drawn texts the parser split and were left out."""
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    kept: List[Tuple[str, Parsed]] = []
    split_up = 0
    for start in range(0, len(order), BATCH):
        batch = [texts[i] for i in order[start:start + BATCH]]
        for text, sentences in zip(batch, parse(batch)):
            if len(sentences) != 1:
                split_up += 1
            elif len(kept) < n:
                kept.append((text, sentences[0]))
        if len(kept) >= n:
            break
    return kept, split_up


def write(out: Path, kept: List[Tuple[str, Parsed]], meta: Dict) -> None:
    """OUT (CoNLL-U) and OUT.json (the parser, its version and the sample)."""
    from fairseq_local import outputs

    blocks = [f"# sent_id = {k}\n# text = {text}\n" + "\n".join(rows) + "\n\n"
              for k, (text, rows) in enumerate(kept, 1)]
    out.parent.mkdir(parents=True, exist_ok=True)
    outputs.write_text(out, "".join(blocks))
    outputs.write_text(out.with_name(out.name + ".json"), json.dumps({**meta, "sentences": len(kept)}, indent=1))


def parser_of(conllu: Path) -> Optional[str]:
    """"stanza 1.15.0" as recorded beside a CoNLL-U of :func:`write`; None without."""
    try:
        meta = json.loads(conllu.with_name(conllu.name + ".json").read_text(encoding="utf-8"))
        return f"{meta['parser']} {meta['version']}"
    except (OSError, ValueError, KeyError, TypeError):
        return None


def main(argv: Optional[Sequence[str]] = None, parser: Optional[Tuple[Parser, str]] = None) -> int:
    """``parser``: (parse, version) instead of Stanza's (tests)."""
    p = argparse.ArgumentParser(prog="python -m fairseq_local_reproduce.pande_parse",
                                description=f"Parse test sentences with {PARSER} (Pande et al. §3, paper scale).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--glue-dir", help="a GLUE folder (with --task and --split)")
    src.add_argument("--text", help="one sentence a line")
    p.add_argument("--task")
    p.add_argument("--split", default="test")
    p.add_argument("--pretokenized", action="store_true", help="--text: whitespace-tokenised words, kept")
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--model-dir", help="Stanza's model folder (default its own)")
    p.add_argument("--cpu", action="store_true")
    a = p.parse_args(argv)
    if a.glue_dir and not a.task:
        p.error("--glue-dir needs --task")
    if a.sentences < 1:
        p.error("--sentences must be positive")
    try:
        texts = glue_sentences(a.glue_dir, a.task, a.split) if a.glue_dir else text_sentences(a.text)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    parse, version = parser or stanza_parser(a.pretokenized, a.model_dir, not a.cpu)
    kept, split_up = sample(texts, a.sentences, parse, a.seed)
    source = f"{a.task} {a.split} ({a.glue_dir})" if a.glue_dir else a.text
    write(a.out, kept, {"parser": PARSER, "version": version, "pipeline": PIPELINE, "language": "en",
                        "source": source, "seed": a.seed, "left_out_split_by_the_parser": split_up})
    print(f"{len(kept)} sentences of {source} parsed by {PARSER} {version} -> {a.out}"
          + (f" ({split_up} texts left out: the parser split them)" if split_up else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
