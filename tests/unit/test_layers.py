"""Three layers, each importing only downward: the plugin that fairseq loads
(``--user-dir fairseq_local``), the experiments (``fairseq_local.reproduce``)
and the commands (``fairseq_local.cli``).  Importing the plugin loads neither
of the others, no module of the plugin imports one, and no experiment imports
a command, at module level or inside a function."""

import ast
import subprocess
import sys

import pytest

from helpers import ENV, ROOT

PACKAGE = ROOT / "fairseq_local"
UPPER = ("fairseq_local.cli", "fairseq_local.reproduce")


def module_name(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path) -> set:
    """The fairseq_local modules ``path`` imports, wherever in the file."""
    name, found = module_name(path), set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found.update(f"{target}.{a.name}" for a in node.names)
            found.add(target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m and m.startswith("fairseq_local")}


def test_no_plugin_module_imports_an_experiment_or_a_command():
    plugin = [p for p in PACKAGE.rglob("*.py") if not module_name(p).startswith(UPPER)]
    assert len(plugin) > 50
    upward = {module_name(p): sorted(m for m in imports(p) if m.startswith(UPPER)) for p in plugin}
    assert not {k: v for k, v in upward.items() if v}


def test_no_experiment_imports_a_command():
    experiments = list((PACKAGE / "reproduce").rglob("*.py"))
    upward = {module_name(p): sorted(m for m in imports(p) if m.startswith("fairseq_local.cli")) for p in experiments}
    assert len(experiments) > 20 and not {k: v for k, v in upward.items() if v}


@pytest.mark.slow  # a fresh interpreter
def test_importing_the_plugin_loads_no_experiment_or_command():
    code = "import fairseq_local, sys; print(sorted(m for m in sys.modules if m.startswith('fairseq_local')))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True, check=True)
    loaded = eval(r.stdout)
    assert "fairseq_local.attention.learned.kind" in loaded and "fairseq_local.models.roberta" in loaded
    assert not [m for m in loaded if m.startswith(UPPER)], loaded
