"""One-line errors for the command line.

Configuration errors raised by the plugin (a bad ``--attn-layout``, say) are
:class:`ValueError` subclasses for library callers.  When one reaches the top
of a command-line program uncaught, it is printed as a single ``error:`` line
instead of a traceback, and the process exits at once with status 1.
"""

import os
import sys
from typing import Optional, Tuple, Type



class OptionError(ValueError):
    """A bad value of one of the plugin's command-line options."""


class InputError(ValueError):
    """A bad input file or value (a truncated checkpoint, a malformed table,
    a checkpoint of another model), reported in one line."""


class ResumeError(InputError):
    """A checkpoint loaded to continue training a model other than the one
    it was saved from (another arch, layout, mask mode or mask option)."""


def user_errors() -> Tuple[Type[BaseException], ...]:
    """The errors printed in one line: bad options, layouts, masks, input and
    output files."""
    from .attention.layout import LayoutError
    from .attention.masks import MaskSpecError
    from .outputs import OutputError

    return (LayoutError, MaskSpecError, OptionError, InputError, OutputError)


# fairseq's own bad-input errors, raised as a bare Exception: printed in one
# line too (e.g. a sentence longer than the model's maximum positions).
FAIRSEQ_INPUT_ERRORS = ("Size of sample #",)


def user_error_in(exc: Optional[BaseException]) -> Optional[BaseException]:
    """``exc`` or the first exception it was raised from or while handling
    (fairseq re-raises load errors as a bare ``Exception``) that is one of
    :func:`user_errors`, else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, user_errors()) or (type(exc) is Exception and str(exc).startswith(FAIRSEQ_INPUT_ERRORS)):
            return exc
        if type(exc) is not Exception:  # only fairseq's bare re-raise is looked behind, never a real error
            return None
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


_WARNED = set()


def warn_once(message: str) -> None:
    """Print ``warning: MESSAGE`` to stderr, once per process."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


def install_excepthook() -> None:
    """Idempotently wrap ``sys.excepthook`` to print :func:`user_errors` in one line."""
    previous = sys.excepthook
    if getattr(previous, "_fairseq_local", False):
        return

    def hook(exc_type, exc, tb):
        found = user_error_in(exc)
        if found is None:
            previous(exc_type, exc, tb)
            return
        print(f"error: {found}", file=sys.stderr)
        if not hasattr(sys, "ps1"):  # a program, not an interactive session: exit now,
            # before background threads (data loaders) are torn down noisily
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

    hook._fairseq_local = True  # type: ignore[attr-defined]
    sys.excepthook = hook
