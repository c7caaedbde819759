"""What importing the plugin does besides registering its models: exactly the
effects its docstring names (three warning filters, the excepthook), no
logger changed, and the warnings of other code still shown."""

import json
import subprocess
import sys

import pytest

import fairseq_local
from helpers import ENV, ROOT

STATE = """
def state():
    root = logging.getLogger()
    return {"root": [root.level, [repr(h) for h in root.handlers]],
            "tts": logging.getLogger("fairseq.tasks.text_to_speech").level,
            "levels": {name: logger.level for name, logger in logging.Logger.manager.loggerDict.items()
                       if isinstance(logger, logging.Logger)},
            "filters": [[f[0], getattr(f[1], "pattern", None), f[2].__name__, getattr(f[3], "pattern", None)]
                        for f in warnings.filters],
            "hook": getattr(sys.excepthook, "_fairseq_local", False)}
"""


def python(code: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.mark.slow  # starts a process
def test_the_import_adds_three_filters_and_the_hook_and_changes_no_logger():
    r = python("import json, logging, sys, warnings\n" + STATE + """
import fairseq  # fairseq's own import configures the root logger (logging.basicConfig)
import fairseq_local_data.glue, fairseq_local_data.bpe
data = state()
import fairseq_local
plugin = state()
warnings.warn("a warning of the program")
warnings.warn("'pin_memory' argument is set as true but no accelerator is found (the program's own)")
print(json.dumps([data, plugin]))
""")
    data, plugin = json.loads(r.stdout)
    assert data["hook"] is False and plugin["hook"] is True
    assert plugin["root"] == data["root"] and plugin["tts"] == data["tts"]
    assert {name: plugin["levels"].get(name, 0) for name in data["levels"]} == data["levels"]
    assert {level for name, level in plugin["levels"].items() if name not in data["levels"]} <= {0}
    added = plugin["filters"][:len(plugin["filters"]) - len(data["filters"])]
    assert plugin["filters"][len(added):] == data["filters"]
    assert added == [  # the last one added comes first
        ["ignore", "'pin_memory' argument is set as true", "UserWarning", r"torch\.utils\.data\.dataloader$"],
        ["ignore", r"\s*'config' is validated against ConfigStore schema", "UserWarning", None],
        ["ignore", None, "UserWarning", r"hydra(\.|$)"],
    ]
    assert "UserWarning: a warning of the program" in r.stderr
    assert "UserWarning: 'pin_memory' argument is set as true but no accelerator is found (the program's" in r.stderr


@pytest.mark.slow  # starts a process
def test_fairseqs_import_time_info_line_is_held_back_only_during_the_import():
    r = python("import json, logging, sys, warnings\n" + STATE + "import fairseq_local\nprint(json.dumps(state()))")
    assert r.stderr == ""  # fairseq's "Please install tensorboardX" INFO line
    assert json.loads(r.stdout)["tts"] == 0  # NOTSET again


def test_the_plugin_registers_its_models_and_criteria():
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    assert fairseq_local.__version__
    assert "transformer_local" in MODEL_REGISTRY and "transformer_local_baseline" in ARCH_MODEL_REGISTRY
    assert "label_smoothed_cross_entropy_with_sparsity" in CRITERION_REGISTRY
