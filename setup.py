"""fairseq-local: a fairseq --user-dir plugin for local, tied and sparse attention heads
(``fairseq_local``), and its data tools, which run without fairseq (``fairseq_local_data``)."""

from setuptools import find_packages, setup

setup(
    name="fairseq-local",
    version="0.1.0",
    description="Transformer encoders with local, Q/K-tied and sparse attention heads for fairseq",
    packages=find_packages(include=["fairseq_local", "fairseq_local.*", "fairseq_local_data", "fairseq_local_data.*"]),
    package_data={"fairseq_local.models": ["presets.json"]},  # the model-size presets
    python_requires=">=3.10",
    # fairseq-fixed must be installed with --no-deps (see scripts/setup_env.sh).
    install_requires=["torch>=2.6", "sacrebleu", "sacremoses", "subword-nmt", "tensorboard"],
    entry_points={"console_scripts": ["fairseq-local=fairseq_local.cli.main:main"]},
)
