"""The one base class of the errors that are shown to the user as one line.

Every error raised for a bad input, option or output, by the data tools and
by the plugin (``fairseq_local.errors`` re-exports this class), derives from
:class:`OneLineError`.  Its message is the whole report: a command prints it
as ``error: MESSAGE`` and exits with status 1, without a traceback.  The
subclasses keep their other bases (most are also :class:`ValueError`), so
callers that catch those keep working.
"""


class OneLineError(Exception):
    """A bad input, option or output whose message, one line, is what the user sees."""
