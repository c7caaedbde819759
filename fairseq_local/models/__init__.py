"""Models registered with fairseq."""

from . import local_transformer  # noqa: F401
