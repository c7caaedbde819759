"""Announced fallbacks: where a faster path cannot run, the slower one says so.

Each fallback (dense for a sparse layout, :class:`~fairseq_local.attention.window.ChunkedLSE`
for FlexAttention's log-sum-exp, no FlexAttention at all) calls :func:`announce`
with a key and a one-line reason.  The first call per key in a process emits a
:class:`FallbackWarning`; later calls cost one set lookup.  ``pytest.ini``
keeps this category visible while it ignores other ``UserWarning``s.
"""

import warnings
from typing import Hashable, Set

_SEEN: Set[Hashable] = set()


class FallbackWarning(UserWarning):
    """A slower path was taken than the one asked for or expected."""


def announce(key: Hashable, message: str) -> None:
    """Warn ``message`` once per process for ``key``."""
    if key in _SEEN:
        return
    _SEEN.add(key)
    warnings.warn(message, FallbackWarning, stacklevel=3)


def reset() -> None:
    """Forget what was announced (tests: each expects its own warning)."""
    _SEEN.clear()
