"""fairseq-local: a fairseq ``--user-dir`` plugin for Transformer encoders whose
heads are local, Q/K-tied or sparse.

Importing it registers the ``transformer_local`` model and its architectures,
makes fairseq checkpoints load on torch >= 2.6, and prints plugin configuration
errors as one line on the command line.
"""

import logging
import warnings

# fairseq's text_to_speech task logs an INFO line on import; keep the
# plugin's commands quiet (their errors are one line).
logging.getLogger("fairseq.tasks.text_to_speech").setLevel(logging.WARNING)
# fairseq 0.12 composes its config with deprecated Hydra 1.0 calls; each run
# would print a page of Hydra's deprecation notices.
warnings.filterwarnings("ignore", category=UserWarning, module=r"hydra(\.|$)")
warnings.filterwarnings("ignore", message=r"(?s).*(ConfigStore schema|version_base|no longer experimental)")
# fairseq asks for pinned memory on every device; torch warns on a CPU-only machine.
warnings.filterwarnings("ignore", message=r".*'pin_memory' argument is set as true")

from .checkpoint_compat import enable_fairseq_checkpoint_loading  # noqa: E402
from .errors import install_excepthook  # noqa: E402

enable_fairseq_checkpoint_loading()
install_excepthook()

from . import criteria, models  # noqa: E402,F401  (registers criteria, models and architectures)

__version__ = "0.1.0"
