#!/usr/bin/env python
"""The same as ``fairseq-local benchmark``: speed and memory of the attention
paths (kernels), training words/s (train) and beam-search sentences/s
(generate), each as ratios against a baseline measured in the same run.

Usage: python scripts/benchmark.py {kernels,train,generate,all} ... [options]
       (see python scripts/benchmark.py --help)
"""

import sys

from fairseq_local_cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main())
