"""fairseq-local: a fairseq ``--user-dir`` plugin for Transformer encoders whose
heads are local, Q/K-tied or sparse.

Importing it registers the plugin's models, architectures and criteria with
fairseq.  fairseq's commands (``fairseq-train``, ``fairseq-generate``, ...
``--user-dir fairseq_local``) import it before they parse their arguments and
give it no later hook, so the import also does what those commands need for
this plugin, and nothing else:

* checkpoints: fairseq.checkpoint_utils (only) loads weights only, with the types fairseq's checkpoints hold allowed
  (torch >= 2.6 refuses them otherwise; :mod:`fairseq_local.safe_pickle`): no checkpoint runs code.
* ``sys.excepthook``: a :class:`~fairseq_local.errors.OneLineError` is one ``error:`` line; others go to the previous hook.
* Hydra's deprecation warnings are ignored: fairseq's Hydra 1.0 calls print a page of them at the start of each run.
* torch's "pinned memory needs an accelerator" warning is ignored: fairseq asks for it on CPUs too (before any error).

The last filter matches that warning from any DataLoader of the process, the
Hydra filters match only Hydra's deprecation notices.  No logger is changed:
fairseq's INFO line when it is imported (no tensorboardX) is held back only
while this package imports it.  Importing fairseq itself configures the root
logger (``logging.basicConfig`` in some of its modules), as in any process
that imports fairseq.  The data tools, :mod:`fairseq_local_data`, need none of this.
"""

import contextlib
import logging
import warnings
from typing import Iterator

from .errors import install_excepthook

warnings.filterwarnings("ignore", category=UserWarning, module=r"hydra(\.|$)")
warnings.filterwarnings("ignore", category=UserWarning, message=r"\s*'config' is validated against ConfigStore schema")
warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.utils\.data\.dataloader$",
                        message=r"'pin_memory' argument is set as true")
install_excepthook()


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Logger ``logger_name`` at WARNING inside the block, at its own level after."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


with _quiet("fairseq.tasks.text_to_speech"):
    from . import criteria, models  # noqa: E402,F401  (registers criteria, models and architectures)
    from .checkpoint_compat import enable_fairseq_checkpoint_loading  # noqa: E402

enable_fairseq_checkpoint_loading()

__version__ = "0.1.0"
