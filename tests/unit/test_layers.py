"""Three layers, each importing only downward: the plugin that fairseq loads
(``--user-dir fairseq_local``), the experiments (``fairseq_local_reproduce``)
and the commands (``fairseq_local_cli``); the data tools
(``fairseq_local_data``) import none of them.  Importing the plugin loads
none of the others; no file imports a higher layer, at module level or inside
a function; and no files import each other in a loop."""

import ast
import subprocess
import sys

import pytest

from helpers import ENV, ROOT

# Lowest first: a module may import its own layer and the ones before it.
LAYERS = ("fairseq_local_data", "fairseq_local", "fairseq_local_reproduce", "fairseq_local_cli")


def module_name(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")}


def layer_of(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def imports(path) -> set:
    """The project modules ``path`` imports, wherever in the file (an imported
    name that is not a module counts as its module)."""
    name, found = module_name(path), set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            names = [f"{target}.{a.name}" for a in node.names]
            found.update(m if m in MODULES else target for m in names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports(path) for name, path in MODULES.items()}


def test_the_layers_are_read():
    counts = {layer: sum(m.split(".")[0] == layer for m in MODULES) for layer in LAYERS}
    assert counts["fairseq_local"] > 50 and counts["fairseq_local_reproduce"] > 30 and counts["fairseq_local_cli"] > 20
    assert "fairseq_local_cli.attention" in GRAPH["fairseq_local_cli.analyze.hta"]
    assert "fairseq_local.outputs" in GRAPH["fairseq_local_cli.analyze.table"]  # relative and absolute imports


def test_no_file_imports_a_higher_layer():
    upward = {m: sorted(t for t in targets if layer_of(t) > layer_of(m)) for m, targets in GRAPH.items()}
    assert not {m: t for m, t in upward.items() if t}


def test_no_files_import_each_other_in_a_loop():
    """Tarjan's strongly connected components of the import graph: each is one file."""
    index, low, stack, on_stack, loops = {}, {}, [], set(), []

    def visit(v):  # recursion depth is bounded by the number of modules (~200)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not loops


def test_a_loop_is_found():
    """The loop check on a graph with one loop (so that it can fail)."""
    saved = dict(GRAPH)
    try:
        GRAPH["fairseq_local.errors"] = GRAPH["fairseq_local.errors"] | {"fairseq_local.outputs"}
        with pytest.raises(AssertionError):
            test_no_files_import_each_other_in_a_loop()
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


@pytest.mark.slow  # a fresh interpreter
def test_importing_the_plugin_loads_no_experiment_or_command():
    code = "import fairseq_local, sys; print(sorted(m for m in sys.modules if m.startswith('fairseq_local')))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True, check=True)
    loaded = eval(r.stdout)
    assert "fairseq_local.attention.learned.kind" in loaded and "fairseq_local.models.roberta" in loaded
    assert not [m for m in loaded if m.startswith(LAYERS[2:])], loaded
