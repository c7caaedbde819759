"""Shared fixtures (a tiny synthetic corpus, prepared once per test session)
and the skipping of CUDA tests where no GPU is visible.  The helpers are in
the ``helpers`` package (``tests/helpers``)."""

from pathlib import Path

import pytest

from helpers import run


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` are skipped, with one line saying why, where no
    CUDA device is visible (they run on a GPU: ``bash scripts/check-gpu.sh``)."""
    cuda = [item for item in items if item.get_closest_marker("cuda") is not None]
    if not cuda:
        return
    import torch

    if torch.cuda.is_available():
        return
    why = ("this torch has no CUDA support" if torch.version.cuda is None else "no CUDA device is visible")
    skip = pytest.mark.skip(reason=f"needs a CUDA device: {why} (torch {torch.__version__})")
    for item in cuda:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synthetic")
    run(["bash", "scripts/prepare-synthetic.sh", "--out", str(out), "--train", "400",
         "--valid", "40", "--test", "30", "--merges", "300"])
    return out


