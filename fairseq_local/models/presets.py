"""Model-size presets of the NMT models: ``tiny`` (the test suite's),
``demo`` (the demo's reduced dimensions) and ``base`` (Transformer-base,
Pande et al. §5.1).

They are written once, in ``presets.json`` beside this module, as fairseq
model options, and read from there by ``fairseq-local benchmark``
(``--nmt-sizes``), by ``fairseq-local configs --preset NAME`` (the scripts'
flags, ``scripts/lib.sh``) and by the tests (``tests/helpers``, which read the
JSON file without importing the plugin).
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Union

PRESETS_FILE = Path(__file__).with_name("presets.json")
Value = Union[int, float, str, bool]


@dataclass(frozen=True)
class Preset:
    """One model size.

    Args:
        name: its key (``tiny``, ``demo``, ``base``).
        about: where it is used, for documentation.
        text: its dimensions in words, for the benchmark's notes.
        options: fairseq model options (``encoder_embed_dim`` -> 32, ...); the
            arch's defaults hold for the others.
    """

    name: str
    about: str
    text: str
    options: Dict[str, Value] = field(default_factory=dict)

    def flags(self) -> List[str]:
        """The options as fairseq command-line flags, in the file's order:
        ``--encoder-embed-dim 32 ...`` (a true boolean is a bare flag)."""
        out: List[str] = []
        for name, value in self.options.items():
            flag = "--" + name.replace("_", "-")
            if value is True:
                out.append(flag)
            elif value is not False:
                out += [flag, str(value)]
        return out


def load_presets(path: Path = PRESETS_FILE) -> Dict[str, Preset]:
    """The presets of ``path`` (default :data:`PRESETS_FILE`), by name, in the file's order."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {name: Preset(name, entry["about"], entry["text"], dict(entry["options"])) for name, entry in data.items()}


PRESETS: Dict[str, Preset] = load_presets()

__all__ = ["PRESETS", "PRESETS_FILE", "Preset", "load_presets"]
