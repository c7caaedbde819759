"""Packaging (issue 35, point 5): every third-party import of a module is
declared in setup.py, in ``install_requires`` or in the extra of the module's
layer; the plugin's own layer imports no extra at module level."""

import ast
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from helpers import ROOT

# Layers by folder: the plugin (install_requires only), the commands and
# analyses, the data tools, the reproductions.
LAYERS = {"fairseq_local/analysis/": "analysis", "fairseq_local_cli/": "analysis",
          "fairseq_local/outputs.py": "analysis", "fairseq_local_data/": "data", "fairseq_local_reproduce/": "reproduce",
          "fairseq_local/models/hf_folder.py": "hf"}
ALWAYS = {"torch", "fairseq"}  # torch: install_requires; fairseq: installed with --no-deps (setup_env.sh)


def setup_lists():
    """INSTALL_REQUIRES and EXTRAS of setup.py, read with ast (setup() not run)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:  # INSTALL_REQUIRES unpacks FAIRSEQ_RUNTIME
                values[node.targets[0].id] = [e.value for e in node.value.elts if isinstance(e, ast.Constant)] + (
                    values["FAIRSEQ_RUNTIME"] if any(isinstance(e, ast.Starred) for e in node.value.elts) else [])
    return values["INSTALL_REQUIRES"], values["EXTRAS"]


def normal(name: str) -> str:
    return name.split(">")[0].split("=")[0].split("<")[0].strip().lower().replace("_", "-")


def third_party_imports(path: Path):
    """(top-level module, at module level?) of each import of ``path`` outside
    the standard library and this project."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            head = name.split(".")[0]
            if head not in sys.stdlib_module_names and not head.startswith("fairseq_local"):
                yield head, id(node) in top


def layer_of(path: Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    return next((layer for prefix, layer in LAYERS.items() if rel.startswith(prefix)), "plugin")


def distributions(module: str):
    return {normal(d) for d in packages_distributions().get(module, [module])}


SOURCES = sorted(p for pkg in ("fairseq_local", "fairseq_local_reproduce", "fairseq_local_cli", "fairseq_local_data")
                 for p in (ROOT / pkg).rglob("*.py"))


def test_every_third_party_import_is_declared_in_its_layer():
    core, extras = setup_lists()
    core = {normal(r) for r in core}
    missing = []
    for path in SOURCES:
        layer = layer_of(path)
        allowed = core | ({normal(r) for r in extras[layer]} if layer != "plugin" else set())
        for module, _ in third_party_imports(path):
            if module not in ALWAYS and not distributions(module) & allowed:
                missing.append(f"{path.relative_to(ROOT)}: {module} ({layer})")
    assert not missing, "\n".join(missing)


def test_the_plugin_imports_no_extra():
    """The plugin fairseq loads (attention, models, criteria) imports nothing
    outside install_requires, at module level or within a function.  (That a
    plain install also dumps attention, with every extra unimportable, is
    tests/e2e/test_analysis_end_to_end.py::test_attention_dump_without_the_extras.)"""
    core, _ = setup_lists()
    core = {normal(r) for r in core}
    extra = [f"{p.relative_to(ROOT)}: {m}" for p in SOURCES if layer_of(p) == "plugin"
             for m, _ in third_party_imports(p) if m not in ALWAYS and not distributions(m) & core]
    assert not extra, "\n".join(extra)


@pytest.mark.parametrize("layer", ["analysis", "data", "reproduce", "hf"])
def test_extras_are_declared(layer):
    _, extras = setup_lists()
    assert extras[layer] and len(set(extras[layer])) == len(extras[layer])
