"""One-line errors for the command line.

Configuration errors raised by the plugin (a bad ``--attn-layout``, say) are
:class:`ValueError` subclasses for library callers.  When one reaches the top
of a command-line program uncaught, it is printed as a single ``error:`` line
instead of a traceback (the process exits with status 1, as after any
uncaught exception).
"""

import sys
from typing import Tuple, Type

from .modules.layout import LayoutError
from .modules.masks import MaskSpecError



class OptionError(ValueError):
    """A bad value of one of the plugin's command-line options."""


USER_ERRORS: Tuple[Type[BaseException], ...] = (LayoutError, MaskSpecError, OptionError)


def install_excepthook() -> None:
    """Idempotently wrap ``sys.excepthook`` to print :data:`USER_ERRORS` in one line."""
    previous = sys.excepthook
    if getattr(previous, "_fairseq_local", False):
        return

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, USER_ERRORS):
            print(f"error: {exc}", file=sys.stderr)
        else:
            previous(exc_type, exc, tb)

    hook._fairseq_local = True  # type: ignore[attr-defined]
    sys.excepthook = hook
