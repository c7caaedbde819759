"""One-line errors for the command line.

Configuration errors raised by the plugin (a bad ``--attn-layout``, say) are
:class:`ValueError` subclasses for library callers.  When one reaches the top
of a command-line program uncaught, it is printed as a single ``error:`` line
instead of a traceback, and the process exits at once with status 1.
"""

import os
import sys
from typing import Tuple, Type



class OptionError(ValueError):
    """A bad value of one of the plugin's command-line options."""


def user_errors() -> Tuple[Type[BaseException], ...]:
    """The errors printed in one line: bad options, layouts and masks."""
    from .modules.layout import LayoutError
    from .modules.masks import MaskSpecError

    return (LayoutError, MaskSpecError, OptionError)


def install_excepthook() -> None:
    """Idempotently wrap ``sys.excepthook`` to print :func:`user_errors` in one line."""
    previous = sys.excepthook
    if getattr(previous, "_fairseq_local", False):
        return

    def hook(exc_type, exc, tb):
        if not issubclass(exc_type, user_errors()):
            previous(exc_type, exc, tb)
            return
        print(f"error: {exc}", file=sys.stderr)
        if not hasattr(sys, "ps1"):  # a program, not an interactive session: exit now,
            # before background threads (data loaders) are torn down noisily
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

    hook._fairseq_local = True  # type: ignore[attr-defined]
    sys.excepthook = hook
