"""fairseq-local: a fairseq --user-dir plugin for local, tied and sparse attention heads
(``fairseq_local``), the papers' reproductions (``fairseq_local_reproduce``), the
``fairseq-local`` commands (``fairseq_local_cli``), and the data tools, which run
without fairseq (``fairseq_local_data``).

``pip install .`` gives the plugin: it trains, generates and dumps attention.
The extras give the rest: ``[analysis]`` (the analyses' figures and
tokenizers), ``[data]`` (the data pipelines), ``[reproduce]`` (the papers'
reproductions, stanza's parser at paper scale), ``[hf]`` (``convert-hf``
reading Hugging Face folders, and fairseq's ``bert`` BPE for converted BERTs), ``[all]``.  The pinned versions
are in requirements.txt (``scripts/setup_env.sh``).  tests/unit/test_packaging.py
checks that every third-party import of a layer is declared here."""

from setuptools import find_packages, setup

# Three layers, each importing only the ones before it, and the data tools:
# the plugin fairseq loads, the papers' reproductions, the commands.
PACKAGES = ("fairseq_local", "fairseq_local_reproduce", "fairseq_local_cli", "fairseq_local_data")

# fairseq-fixed must be installed with --no-deps (see scripts/setup_env.sh), so
# its own runtime requirements are listed here (not torchaudio, not cython).
FAIRSEQ_RUNTIME = ["bitarray", "cffi", "hydra-core", "numpy", "omegaconf", "packaging", "regex", "sacrebleu",
                   "scikit-learn", "scipy", "tqdm"]
INSTALL_REQUIRES = ["torch>=2.6", "tensorboard", *FAIRSEQ_RUNTIME]
EXTRAS = {
    "analysis": ["matplotlib", "sentencepiece", "subword-nmt", "tokenizers"],
    "data": ["blingfire", "conllu", "sacremoses", "sentencepiece", "subword-nmt", "tokenizers", "wikiextractor"],
    "reproduce": ["matplotlib", "blingfire", "conllu", "sacremoses", "sentencepiece", "subword-nmt", "tokenizers",
                  "wikiextractor", "stanza"],
    "hf": ["safetensors", "transformers"],
}

setup(
    name="fairseq-local",
    version="0.1.0",
    description="Transformer encoders with local, Q/K-tied and sparse attention heads for fairseq",
    packages=find_packages(include=[f"{name}{tail}" for name in PACKAGES for tail in ("", ".*")]),
    package_data={"fairseq_local.models": ["presets.json"]},  # the model-size presets
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require={**EXTRAS, "all": sorted({r for rs in EXTRAS.values() for r in rs})},
    entry_points={"console_scripts": ["fairseq-local=fairseq_local_cli.main:main"]},
)
