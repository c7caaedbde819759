"""fairseq-local: a fairseq ``--user-dir`` plugin for Transformer encoders whose
heads are local, Q/K-tied or sparse.

Importing it registers the ``transformer_local`` model and its architectures,
makes fairseq checkpoints load on torch >= 2.6, and prints plugin configuration
errors as one line on the command line.
"""

from .checkpoint_compat import enable_fairseq_checkpoint_loading
from .errors import install_excepthook

enable_fairseq_checkpoint_loading()
install_excepthook()

from . import criteria, models  # noqa: E402,F401  (registers criteria, models and architectures)

__version__ = "0.1.0"
