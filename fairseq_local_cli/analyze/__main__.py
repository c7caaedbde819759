"""``python -m fairseq_local_cli.analyze ...``: ``fairseq-local analyze ...``."""

import sys

from ..main import main

sys.exit(main(["analyze", *sys.argv[1:]]))
