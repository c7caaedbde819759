"""``python -m fairseq_local_cli.benchmark ...``: the same as ``fairseq-local benchmark ...``."""

import sys

from ..main import main

sys.exit(main(["benchmark", *sys.argv[1:]]))
