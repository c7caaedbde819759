"""One base class for every one-line error: each error class of the plugin
and of its data tools (found by walking their modules) derives from
OneLineError and keeps its other bases, and the excepthook that fairseq's
commands get prints exactly those errors in one line."""

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import fairseq_local
import fairseq_local_data
from fairseq_local.errors import OneLineError, one_line_error_in
from helpers import ENV, ROOT

# The errors raised for bad input, and their bases besides OneLineError.
KNOWN = {
    "OptionError": ValueError, "InputError": ValueError, "ResumeError": ValueError, "LayoutError": ValueError,
    "MaskSpecError": ValueError, "OutputError": ValueError, "ConversionError": ValueError, "GlueError": ValueError,
    "SyntaxFileError": ValueError, "AnalysisError": ValueError, "RecordError": ValueError,
    "WmtError": Exception, "CorpusError": Exception, "TokenizerError": Exception,
}


def error_classes():
    """{name: class} of every exception class called ...Error defined in a
    module of fairseq_local or fairseq_local_data."""
    found = {}
    for package in (fairseq_local, fairseq_local_data):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith(".__main__"):  # a program, run on import
                continue
            module = importlib.import_module(info.name)
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == info.name and issubclass(cls, BaseException) and name.endswith("Error"):
                    found[name] = cls
    return found


def test_every_error_class_derives_from_the_one_base():
    classes = error_classes()
    assert set(KNOWN) <= set(classes), set(KNOWN) - set(classes)
    assert [name for name, cls in classes.items() if not issubclass(cls, OneLineError)] == []
    for name, base in KNOWN.items():
        assert issubclass(classes[name], base), name  # `except ValueError` keeps catching them


def test_the_plugin_re_exports_the_data_tools_base():
    from fairseq_local_data.errors import OneLineError as data_base

    assert OneLineError is data_base and OneLineError.__bases__ == (Exception,)


def test_one_line_error_is_looked_for_behind_fairseqs_bare_exception_only():
    from fairseq_local_data.glue import GlueError

    inner = GlueError("bad GLUE folder")
    assert one_line_error_in(inner) is inner
    try:
        try:
            raise inner
        except GlueError as e:
            raise Exception("Cannot load model parameters from checkpoint") from e
    except Exception as outer:
        assert one_line_error_in(outer) is inner
    try:
        raise RuntimeError("a real error") from inner
    except RuntimeError as real:
        assert one_line_error_in(real) is None
    size = Exception("Size of sample #3 is invalid (=(90, 12)) since max_positions=(8, 1024)")
    assert one_line_error_in(size) is size
    assert one_line_error_in(ValueError("not ours")) is None


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("raise_line, stderr", [
    ("raise Exception('Cannot load model parameters') from OptionError('--attn-layout: bad token')",
     "error: --attn-layout: bad token\n"),
    ("raise WmtError('missing archive: x.tgz')", "error: missing archive: x.tgz\n"),
])
@pytest.mark.slow  # starts a process
def test_the_excepthook_prints_a_one_line_error_and_exits_1(raise_line, stderr):
    r = python("import fairseq_local\nfrom fairseq_local.errors import OptionError\n"
               f"from fairseq_local_data.cleaning import WmtError\n{raise_line}")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", stderr)


@pytest.mark.slow  # starts a process
def test_the_excepthook_passes_other_errors_to_the_previous_hook():
    r = python("import sys\nsys.excepthook = lambda t, e, tb: print('previous hook:', e, file=sys.stderr)\n"
               "import fairseq_local\nfrom fairseq_local.errors import InputError\n"
               "raise RuntimeError('a real error') from InputError('bad input')")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", "previous hook: a real error\n")
