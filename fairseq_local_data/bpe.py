"""The two BERT tokenisers: GPT-2 byte-level BPE (as RoBERTa) and SentencePiece.

GPT-2 BPE
---------
The files are GPT-2's ``encoder.json`` and ``vocab.bpe``, checked by SHA-256.
Their folder is an argument (``--model DIR``, ``--dest DIR``) or, where none
is given, the environment variable ``FAIRSEQ_LOCAL_GPT2_BPE``
(:data:`GPT2_DIR_ENV`); there is no other default (the scripts pass the
checkout's ``data-bin/gpt2-bpe``, which scripts/setup_env.sh fills). The user
fills the folder, or :func:`fetch_gpt2` takes the files from a pinned PyPI
package that ships them: the ``openai-whisper==20230124``
source archive holds ``whisper/assets/gpt2/vocab.json`` and ``merges.txt``,
the same vocabulary and merges in Hugging Face's layout. :func:`fetch_gpt2`
checks the archive's and both members' SHA-256, rewrites them byte for byte as
GPT-2's own files (whose SHA-256 it checks again), and checks that
"Hello world" encodes to the GPT-2 ids 15496 995 with GPT-2's encoder
(:mod:`fairseq_local_data.gpt2_bpe`, Hugging Face's ``tokenizers`` with the
ids of fairseq's ``gpt2_bpe_utils``). Only ``fetch-gpt2`` uses the network
(the package registry, through pip); encoding never does.

SentencePiece
-------------
A BPE model trained on the corpus (default 30k pieces, about the size of
BERT's WordPiece vocabulary), segmented exactly as fairseq's
``--bpe sentencepiece`` does, so ``RobertaModel.from_pretrained(...,
bpe="sentencepiece", sentencepiece_model=PATH)`` encodes the same way.

API: :func:`encode_lines` (``bpe="gpt2"`` with the directory of the two files,
or ``bpe="sentencepiece"`` with the ``.model`` file). Command line:
``python -m fairseq_local_data.bpe {fetch-gpt2,check-gpt2,spm-train,encode} ...``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

from .cleaning import spm_train
from .errors import OneLineError
from .gpt2_bpe import Encoder, get_encoder

# The folder of GPT-2's encoder.json and vocab.bpe where no argument names one.
GPT2_DIR_ENV = "FAIRSEQ_LOCAL_GPT2_BPE"
# GPT-2's files as OpenAI publishes them (gpt-2/encodings/main/{encoder.json,vocab.bpe}).
GPT2_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
# The same files in Hugging Face's layout, as openai-whisper 20230124 ships them.
WHISPER = "openai-whisper==20230124"
WHISPER_SDIST = ("openai-whisper-20230124.tar.gz", "31adf9353bf0e3f891b6618896f22c65cf78cd6f845a4d5b7125aa5102187f79")
WHISPER_FILES = {  # GPT-2 name -> (member of the archive, SHA-256)
    "encoder.json": ("openai-whisper-20230124/whisper/assets/gpt2/vocab.json",
                     "3ba3c3109ff33976c4bd966589c11ee14fcaa1f4c9e5e154c2ed7f99d80709e7"),
    "vocab.bpe": ("openai-whisper-20230124/whisper/assets/gpt2/merges.txt",
                  "fe36cab26d4f4421ed725e10a2e9ddb7f799449c603a96e7f29b5a3c82a95862"),
}
# whisper's setup.py imports pkg_resources, which setuptools >= 81 no longer has.
BUILD_CONSTRAINT = "setuptools==80.9.0"
HELLO = ("Hello world", [15496, 995])


class TokenizerError(OneLineError):
    """A missing or wrong tokeniser file, reported as one ``error:`` line."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- GPT-2 BPE


def gpt2_dir(directory: Path | str | None = None) -> Path:
    """The folder of GPT-2's files: ``directory``, else ``$FAIRSEQ_LOCAL_GPT2_BPE``
    (:data:`GPT2_DIR_ENV`); :class:`TokenizerError` if neither is given."""
    if directory is None or str(directory) == "":
        directory = os.environ.get(GPT2_DIR_ENV) or None
    if directory is None:
        raise TokenizerError(f"no folder of GPT-2's encoder.json and vocab.bpe: give one, or set ${GPT2_DIR_ENV}")
    return Path(directory)


def gpt2_files(directory: Path | str | None = None, check: bool = True) -> tuple[Path, Path]:
    """``(encoder.json, vocab.bpe)`` in ``directory`` (see :func:`gpt2_dir`),
    with their SHA-256 checked and, with ``check``, "Hello world" -> 15496 995."""
    d = gpt2_dir(directory)
    paths = (d / "encoder.json", d / "vocab.bpe")
    for p in paths:
        if not p.is_file():
            hint = "fill the folder with: python -m fairseq_local_data.bpe fetch-gpt2 --dest DIR"
            raise TokenizerError(f"missing GPT-2 BPE file {p} ({hint})")
        got = sha256(p)
        if got != GPT2_SHA256[p.name]:
            raise TokenizerError(f"wrong checksum for {p}: sha256 {got[:16]}..., "
                                 f"expected GPT-2's {GPT2_SHA256[p.name][:16]}...")
    if check:
        check_gpt2(*paths)
    return paths


def gpt2_encoder(encoder_json: Path, vocab_bpe: Path) -> Encoder:
    """GPT-2's byte-level BPE :class:`~fairseq_local_data.gpt2_bpe.Encoder` of the two files."""
    return get_encoder(encoder_json, vocab_bpe)


def check_gpt2(encoder_json: Path, vocab_bpe: Path) -> None:
    """Raise :class:`TokenizerError` unless "Hello world" encodes to [15496, 995]."""
    ids = gpt2_encoder(encoder_json, vocab_bpe).encode(HELLO[0])
    if ids != HELLO[1]:
        raise TokenizerError(f"{encoder_json.parent}: '{HELLO[0]}' encodes to {ids}, not GPT-2's {HELLO[1]}")


def _pip_download(dest: Path) -> Path:
    """``pip download --no-deps openai-whisper==20230124`` into ``dest``."""
    constraint = dest / "build-constraints.txt"
    constraint.write_text(BUILD_CONSTRAINT + "\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(dest), WHISPER]
    env = dict(os.environ)
    helptext = subprocess.run([sys.executable, "-m", "pip", "download", "--help"],
                              capture_output=True, text=True).stdout
    if "--build-constraint" in helptext:
        cmd[4:4] = ["--build-constraint", str(constraint)]
    else:  # older pip applies PIP_CONSTRAINT to build environments too
        env["PIP_CONSTRAINT"] = str(constraint)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    sdist = dest / WHISPER_SDIST[0]
    if r.returncode != 0 or not sdist.is_file():
        last = [line for line in (r.stderr or r.stdout).splitlines() if line.strip()][-1:] or ["no output"]
        raise TokenizerError(f"pip download {WHISPER} failed: {last[0].strip()}")
    return sdist


def fetch_gpt2(dest: Path | str | None = None, sdist: Path | str | None = None) -> tuple[Path, Path]:
    """Write GPT-2's ``encoder.json`` and ``vocab.bpe`` into ``dest`` (see
    :func:`gpt2_dir`) from the whisper source archive ``sdist`` (default:
    downloaded with pip). Every file is checked by SHA-256."""
    dest = gpt2_dir(dest)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(sdist) if sdist is not None else _pip_download(Path(tmp))
        if not archive.is_file():
            raise TokenizerError(f"missing archive {archive}")
        if sha256(archive) != WHISPER_SDIST[1]:
            raise TokenizerError(f"wrong checksum for {archive}: not the {WHISPER} source archive")
        data = {}
        with tarfile.open(archive, "r:gz") as tar:
            for name, (member, digest) in WHISPER_FILES.items():
                raw = tar.extractfile(member).read()  # type: ignore[union-attr]
                if hashlib.sha256(raw).hexdigest() != digest:
                    raise TokenizerError(f"wrong checksum for {member} in {archive}")
                data[name] = raw
    # Hugging Face layout -> GPT-2's: the same JSON written as json.dump does
    # by default, and the merges under GPT-2's one-line header.
    files = {"encoder.json": json.dumps(json.loads(data["encoder.json"])).encode("utf-8"),
             "vocab.bpe": b"#version: 0.2\n" + data["vocab.bpe"].split(b"\n", 1)[1]}
    dest.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        if hashlib.sha256(raw).hexdigest() != GPT2_SHA256[name]:
            raise TokenizerError(f"{name} rebuilt from {WHISPER} is not GPT-2's file")
        tmp_path = dest / f"{name}.tmp"
        tmp_path.write_bytes(raw)
        os.replace(tmp_path, dest / name)
    return gpt2_files(dest)


# --------------------------------------------------------------------------- SentencePiece


def auto_vocab_size(train: Path, requested: int) -> int:
    """``requested``, lowered for a corpus too small for it: at most a third of
    the distinct words of ``train`` (rounded down to hundreds, at least 100)."""
    words: set[str] = set()
    with open(train, encoding="utf-8") as f:
        for line in f:
            words.update(line.split())
            if len(words) >= 3 * requested:
                return requested
    return min(requested, max(100, len(words) // 300 * 100))


def train_sentencepiece(train: Path, prefix: Path, vocab_size: int = 30000, threads: int = 2) -> int:
    """Train ``prefix.model`` (BPE pieces) on ``train``; returns the vocabulary size used."""
    if not train.is_file() or train.stat().st_size == 0:
        raise TokenizerError(f"missing or empty training text {train}")
    size = auto_vocab_size(train, vocab_size)
    spm_train([train], prefix, size, threads)
    return size


def sentencepiece_processor(model: Path | str):
    """The ``sentencepiece.SentencePieceProcessor`` of a ``.model`` file;
    :class:`TokenizerError` if the file is missing."""
    import sentencepiece as spm

    if not Path(model).is_file():
        raise TokenizerError(f"missing SentencePiece model {model}")
    return spm.SentencePieceProcessor(model_file=str(model))


# --------------------------------------------------------------------------- encoding

ENCODERS = ("gpt2", "sentencepiece", "wordpiece", "byte_bpe")


def wordpiece_tokenizer(vocab_txt: Path | str):
    """BERT's WordPiece tokenizer (``tokenizers.BertWordPieceTokenizer``) of
    ``vocab_txt``, with the ``do_lower_case``, ``strip_accents`` and
    ``tokenize_chinese_chars`` of the ``tokenizer_config.json`` next to it, as
    Hugging Face reads them (``fairseq-local convert-hf`` writes one; without
    it, an uncased BERT's defaults)."""
    from tokenizers import BertWordPieceTokenizer

    if not Path(vocab_txt).is_file():
        raise TokenizerError(f"wordpiece needs BERT's vocab.txt, not '{vocab_txt}'")
    config: dict = {}
    path = Path(vocab_txt).parent / "tokenizer_config.json"
    if path.is_file():
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise TokenizerError(f"'{path}' is not a JSON tokenizer configuration") from None
        config = config if isinstance(config, dict) else {}
    try:
        return BertWordPieceTokenizer(str(vocab_txt), lowercase=bool(config.get("do_lower_case", True)),
                                      strip_accents=config.get("strip_accents"),
                                      handle_chinese_chars=bool(config.get("tokenize_chinese_chars", True)))
    except Exception as e:  # tokenizers raises TypeError/Exception for a vocabulary without [CLS]/[SEP], or not text
        raise TokenizerError(f"'{vocab_txt}' is not BERT's WordPiece vocab.txt: {str(e).splitlines()[0]}") from None


def make_encoder(bpe: str, model_or_dir: Path | str | None = None):
    """A function line -> space-joined tokens, as fairseq's ``--bpe gpt2``
    (GPT-2 ids as strings) or ``--bpe sentencepiece`` (pieces) encodes;
    ``wordpiece``: BERT's pieces of ``vocab.txt`` (as fairseq's ``--bpe bert``);
    ``byte_bpe``: the ids (as strings) of a Hugging Face RoBERTa folder's
    ``vocab.json`` and ``merges.txt``, as ``convert-hf`` writes its dict.txt."""
    if bpe == "wordpiece":
        wp = wordpiece_tokenizer(model_or_dir or "")
        return lambda line: " ".join(wp.encode(line.strip(), add_special_tokens=False).tokens)
    if bpe == "byte_bpe":
        files = [Path(model_or_dir or "") / name for name in ("vocab.json", "merges.txt")]
        if not all(f.is_file() for f in files):
            raise TokenizerError(f"byte_bpe needs a folder with vocab.json and merges.txt, not '{model_or_dir}'")
        enc = gpt2_encoder(*files)
        return lambda line: " ".join(map(str, enc.encode(line.strip())))
    if bpe == "gpt2":
        enc = gpt2_encoder(*gpt2_files(model_or_dir))
        return lambda line: " ".join(map(str, enc.encode(line.strip())))
    if bpe == "sentencepiece":
        if model_or_dir is None:
            raise TokenizerError("sentencepiece needs the .model file")
        sp = sentencepiece_processor(model_or_dir)
        return lambda line: " ".join(sp.encode(line.strip(), out_type=str))
    raise TokenizerError(f"unknown bpe '{bpe}' ({', '.join(ENCODERS)})")


def encode_lines(lines: Iterable[str], bpe: str = "gpt2", model_or_dir: Path | str | None = None) -> list[str]:
    """Each line as space-joined tokens; an empty line stays empty.

    ``bpe="gpt2"``: ``model_or_dir`` is the directory of encoder.json and
    vocab.bpe (see :func:`gpt2_dir`); tokens are GPT-2 ids.
    ``bpe="sentencepiece"``: ``model_or_dir`` is the ``.model`` file; tokens are pieces."""
    encode = make_encoder(bpe, model_or_dir)
    return [encode(line) if line.strip() else "" for line in lines]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fairseq_local_data.bpe",
                                description="GPT-2 BPE and SentencePiece for BERT corpora.")
    p.error = lambda message: p.exit(2, f"error: {message}\n")  # type: ignore[method-assign]
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("fetch-gpt2", help=f"GPT-2's encoder.json/vocab.bpe from {WHISPER} (pip download)")
    a.add_argument("--dest", type=Path, help=f"the folder to fill (default: ${GPT2_DIR_ENV})")
    a.add_argument("--sdist", type=Path, help=f"a local {WHISPER_SDIST[0]} instead of downloading it")
    a = sub.add_parser("check-gpt2", help="check encoder.json/vocab.bpe in a directory")
    a.add_argument("dir", type=Path, nargs="?", default=None, help=f"default: ${GPT2_DIR_ENV}")
    a = sub.add_parser("spm-train", help="train a SentencePiece BPE model")
    a.add_argument("--input", type=Path, required=True)
    a.add_argument("--model-prefix", type=Path, required=True)
    a.add_argument("--vocab-size", type=int, default=30000)
    a.add_argument("--threads", type=int, default=2)
    a = sub.add_parser("encode", help="encode stdin to stdout, one line at a time")
    a.add_argument("--bpe", choices=ENCODERS, required=True)
    a.add_argument("--model", type=Path,
                   help=f"gpt2: directory of the two files (default: ${GPT2_DIR_ENV}); sentencepiece: .model file; "
                        f"wordpiece: vocab.txt; byte_bpe: directory of vocab.json and merges.txt")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "fetch-gpt2":
            enc, bpe = fetch_gpt2(args.dest, args.sdist)
            print(f"GPT-2 BPE files checked: {enc} {bpe}")
        elif args.cmd == "check-gpt2":
            enc, bpe = gpt2_files(args.dir)
            print(f"GPT-2 BPE files checked: {enc} {bpe}")
        elif args.cmd == "spm-train":
            if args.vocab_size < 1:
                raise TokenizerError("--vocab-size must be positive")
            size = train_sentencepiece(args.input, args.model_prefix, args.vocab_size, args.threads)
            print(f"SentencePiece model {args.model_prefix}.model ({size} pieces requested)")
        else:
            encode = make_encoder(args.bpe, args.model)
            for line in sys.stdin:
                sys.stdout.write((encode(line) if line.strip() else "") + "\n")
    except OneLineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
