"""Run fairseq-train in this process, then save this rank's final parameters.

Usage: python dist_train.py OUT.pt FAIRSEQ_TRAIN_ARGS...
"""

import sys

import torch
from fairseq import trainer as trainer_module

_trainers = []
_init = trainer_module.Trainer.__init__


def _recording_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _trainers.append(self)


trainer_module.Trainer.__init__ = _recording_init

from fairseq_cli import train  # noqa: E402

out = sys.argv[1]
sys.argv = ["fairseq-train"] + sys.argv[2:]
train.cli_main()
model = _trainers[0].get_model()
torch.save({k: v.detach().clone() for k, v in model.state_dict().items() if torch.is_tensor(v)}, out)
