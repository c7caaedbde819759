"""The ``fairseq-local <command>`` console script and its commands' parsers.

Each subprocess imports fairseq (a few seconds), so most checks run the same
``main`` in this process, and a few run the installed console script and
``python -m`` to check that they are wired to it."""

import importlib
import re
import runpy
import sys
import warnings

import pytest

from helpers import run
from fairseq_local_cli.common import COMMANDS
from fairseq_local_cli.main import main
from fairseq_local.errors import InputError
from fairseq_local_data.glue import GlueError

# Each command's options, as its --help must list them.
OPTIONS = {
    "configs": ["--resolve KEY [KEY ...]", "--arch KEY [KEY ...]", "--preset {tiny,demo,base}", "--roberta"],
    "sparsity": ["PATTERN", "--n N", "--seeds S"],
    "export": ["checkpoint", "--out FILE", "--png FILE", "--prune PCT", "--prune-random SEED", "--n N"],
    "gates": ["checkpoint"],
    "results": ["RUNS_DIR", "--runs NAME [NAME ...]", "--csv FILE", "--markdown FILE"],
    "tables": ["--runs-root DIR", "--markdown FILE", "--csv FILE", "--bert", "--tasks TASK [TASK ...]"],
    "inspect": ["CKPT", "--field NAME", "--json", "--bpe-model PATH", "--machine"],
    "average": ["RUN_DIR", "--num N", "--output FILE"],
    "convert-roberta": ["IN.pt", "OUT.pt", "--arch ARCH", "--tie-init {first,mean}", "--attn-layout ATTN_LAYOUT"],
    "convert-hf": ["HF_DIR", "OUT_DIR", "--arch ARCH", "--tie-init {first,mean}", "--attn-layout ATTN_LAYOUT"],
    "glue": ["evaluate", "table"],
    "attention": ["dump"],
    "analyze": ["bias", "sensitivity", "hta", "table", "roles", "importance"],
    "prune-curve": ["CKPT", "--data DATA", "--out DIR", "--lambdas LAMBDAS", "--max-update MAX_UPDATE", "--lr LR",
                    "--rare-top K", "--dry-run"],
    "reproduce": ["PAPER", "--scale {tiny,small,paper}", "--runs DIR", "--dry-run"],
    "benchmark": ["LEVEL [LEVEL ...]", "--repeats R", "--threads N", "--markdown FILE", "--lengths N [N ...]",
                  "--impls IMPL [IMPL ...]", "--max-memory GIB", "--nmt-sizes [SIZE ...]", "--roberta-lengths [N ...]",
                  "--gen-len N"],
    "check-resume": ["CKPT", "FAIRSEQ_TRAIN_ARGS"],
}
PAPERS = ("Pande et al.", "SparseBERT", "Voita et al. 2019", "Wang et al.", "Vaswani et al. 2017",
          "Adaptive Axis Attention", "Pascual et al.")


def error_lines(stderr: str):
    """stderr without the lines that fairseq logs while it is imported (its
    tensorboardX notice), which come before any of ours."""
    return [line for line in stderr.splitlines() if not line.startswith("INFO:fairseq.")]


def in_process_help(capsys, argv, module=None):
    """(exit status, stdout) of ``fairseq-local ARGV`` run by main(), or of
    ``python -m MODULE ARGV`` run by runpy, in this process."""
    with pytest.raises(SystemExit) as e:
        if module is None:
            main(argv)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # module already imported
                old, sys.argv = sys.argv, [module, *argv]
                try:
                    runpy.run_module(module, run_name="__main__", alter_sys=True)
                finally:
                    sys.argv = old
    return e.value.code, capsys.readouterr().out


def test_commands_are_the_documented_ones():
    assert list(COMMANDS) == ["configs", "sparsity", "export", "gates", "results", "tables", "inspect", "average",
                              "convert-roberta", "convert-hf", "glue", "attention", "analyze", "prune-curve", "reproduce", "benchmark",
                              "check-resume"]
    assert set(OPTIONS) == set(COMMANDS)


@pytest.mark.slow
def test_help_lists_every_command():
    r = run(["fairseq-local", "--help"])
    assert r.stdout.startswith("usage: fairseq-local <command> [options]\n")
    for name, (_, summary) in COMMANDS.items():
        assert re.search(rf"^  {name} +{re.escape(summary)}$", r.stdout, re.M), name
        assert "\n" not in summary and len(summary) < 80
    assert "fairseq-local <command> --help" in r.stdout


def test_help_imports_no_command(monkeypatch, capsys):
    """--help lists the commands without importing their modules."""
    for name in list(sys.modules):
        if name.startswith("fairseq_local_cli.") and name not in ("fairseq_local_cli.main", "fairseq_local_cli.common"):
            monkeypatch.delitem(sys.modules, name)
    assert main(["--help"]) == 0 and "commands:" in capsys.readouterr().out
    assert not [m for m in sys.modules if m.startswith("fairseq_local_cli.")
                and m not in ("fairseq_local_cli.main", "fairseq_local_cli.common")]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_command_help(command, capsys):
    status, out = in_process_help(capsys, [command, "--help"])
    assert status == 0
    assert out.startswith(f"usage: fairseq-local {command} ")
    description = out.split("\n\n")[1]
    assert description == COMMANDS[command][1]  # the summary of fairseq-local --help, then details
    assert "\noptions:\n" in out and "-h, --help" in out
    for option in OPTIONS[command]:
        assert option in out, option
    assert any(paper in out for paper in PAPERS)
    # argparse help, not a dump of the module's docstring or source
    for text in ("``", ":mod:", "def ", "import ", '"""', "seed 00", "python -m"):
        assert text not in out, text
    # python -m fairseq_local_cli.COMMAND: the same parser
    status, out_m = in_process_help(capsys, ["--help"], module=f"fairseq_local_cli.{COMMANDS[command][0]}")
    assert status == 0 and out_m == out


@pytest.mark.slow
def test_console_script_and_python_m_run_the_same_parser(capsys):
    _, expected = in_process_help(capsys, ["export", "--help"])
    assert run(["fairseq-local", "export", "--help"]).stdout == expected
    _, expected = in_process_help(capsys, ["gates", "--help"])
    assert run([sys.executable, "-m", "fairseq_local_cli.gates", "--help"]).stdout == expected


@pytest.mark.slow
def test_unknown_command_is_one_line():
    r = run(["fairseq-local", "frobnicate", "--x"], check=False)
    assert r.returncode == 2 and r.stdout == ""
    assert error_lines(r.stderr) == [
        "error: unknown command 'frobnicate' (commands: configs, sparsity, export, gates, results, tables, "
        "inspect, average, convert-roberta, convert-hf, glue, attention, analyze, prune-curve, reproduce, benchmark, check-resume; "
        "see fairseq-local --help)"]


@pytest.mark.parametrize("argv, message", [
    ([], "error: missing command: one of configs, sparsity, export, gates, results, tables, inspect, average, "
         "convert-roberta, convert-hf, glue, attention, analyze, prune-curve, reproduce, benchmark"),
    (["expotr"], "error: unknown command 'expotr' (did you mean 'export'? "),
    (["--frob"], "error: unknown option '--frob'"),
    (["sparsity", "--n", "0"], "error: --n must be >= 1, not 0"),
    (["sparsity", "nonsense-kind"], "error: "),
    (["export", "ckpt.pt"], "error: the following arguments are required: --out"),
    (["average", "/nonexistent", "--num", "0", "--output", "x.pt"], "error: --num must be at least 1"),
    (["results", "/nonexistent"], "error: no runs directory '/nonexistent'"),
    (["tables", "--runs-root", "/nonexistent"], "error: no runs directory '/nonexistent'"),
    (["tables", "--tasks", "SST-2"], "error: --tasks needs --bert"),
    (["tables", "--bert", "--tasks", "SST2"], "error: unknown GLUE task 'SST2' (one of CoLA, SST-2, "),
    (["gates", "/nonexistent.pt"], "error: [Errno 2] No such file or directory: '/nonexistent.pt'"),
])
def test_bad_input_is_one_error_line(argv, message, capsys):
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert captured.err.startswith(message) and captured.err.count("\n") == 1, captured.err


def raising(exc):
    def command_main(argv):
        raise exc
    return command_main


@pytest.mark.parametrize("exc, line", [
    (GlueError("missing RTE/dev.tsv in GLUE folder 'g'"), "error: missing RTE/dev.tsv in GLUE folder 'g'\n"),
    (Exception("Cannot load model parameters from checkpoint x.pt"), None),  # with an InputError behind it
    (FileNotFoundError(2, "No such file or directory", "x.pt"), "error: cannot access 'x.pt': No such file or directory\n"),
])
def test_a_commands_one_line_errors_exit_1(exc, line, monkeypatch, capsys):
    """Any OneLineError (the data tools' too), also behind fairseq's bare
    Exception, and file errors: one line, status 1."""
    if line is None:
        exc.__cause__, line = InputError("'x.pt' is a mask file, not a fairseq checkpoint"), \
            "error: 'x.pt' is a mask file, not a fairseq checkpoint\n"
    monkeypatch.setattr(importlib.import_module("fairseq_local_cli.configs"), "main", raising(exc))
    assert main(["configs"]) == 1
    assert capsys.readouterr() == ("", line)


def test_a_commands_other_errors_are_not_hidden(monkeypatch):
    monkeypatch.setattr(importlib.import_module("fairseq_local_cli.configs"), "main", raising(ValueError("a bug")))
    with pytest.raises(ValueError, match="a bug"):
        main(["configs"])
    wrapped = RuntimeError("a real error")
    wrapped.__cause__ = InputError("bad input")  # only fairseq's bare Exception is looked behind
    monkeypatch.setattr(importlib.import_module("fairseq_local_cli.configs"), "main", raising(wrapped))
    with pytest.raises(RuntimeError, match="a real error"):
        main(["configs"])


def test_version(capsys):
    assert main(["--version"]) == 0
    assert re.fullmatch(r"fairseq-local \d+\.\d+\.\d+\n", capsys.readouterr().out)


@pytest.mark.slow
def test_configs_resolve():
    r = run(["fairseq-local", "configs", "--resolve", "a", "transformer_dam_s", "k", "sparse_star"])
    assert r.stdout.splitlines() == [
        "a transformer_local_baseline",
        "transformer_dam_s transformer_dam_s",
        "k transformer_local_half_tied",
        "transformer_sparse_star transformer_sparse_star",
    ]


@pytest.mark.slow
def test_configs_resolve_unknown_key_is_one_line():
    r = run(["fairseq-local", "configs", "--resolve", "a", "zz"], check=False)
    assert r.returncode == 1 and r.stdout == ""  # checked before anything is printed
    assert error_lines(r.stderr) == ["error: no configuration 'zz' (letters a-l or a named arch)"]
