"""``fairseq-local <command> [options]``: the plugin's command-line tools.

Each command is a module of :mod:`fairseq_local_cli` with a ``main(argv)``,
imported only when that command runs (so ``fairseq-local --help`` stays
fast); ``python -m fairseq_local_cli.<module>`` runs the same parser
(see :data:`~fairseq_local_cli.common.COMMANDS`).  A
command's :class:`~fairseq_local.errors.OneLineError` (also behind fairseq's
bare ``Exception``) and any file error are printed as one ``error:`` line
with exit status 1.
"""

import difflib
import importlib
import os
import sys
from typing import List, Optional

from fairseq_local.errors import one_line_error_in
from fairseq_local.outputs import output_error_line
from .common import COMMANDS

USAGE = "usage: fairseq-local <command> [options]"


def help_text() -> str:
    width = max(len("-h, --help"), *map(len, COMMANDS))
    lines = [USAGE, "",
             "Command-line tools of fairseq-local, a fairseq --user-dir plugin for Transformer",
             "encoders with local, Q/K-tied and sparse attention heads (for training and",
             "translation use fairseq-train/-generate with --user-dir fairseq_local).",
             "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "options:",
              f"  {'-h, --help':<{width}}  show this help and exit",
              f"  {'--version':<{width}}  print the plugin's version and exit",
              f"  {'--trust-checkpoint':<{width}}  unpickle checkpoints in full (they may run code; by default",
              f"  {'':<{width}}  only the types fairseq's checkpoints hold are read)",
              "", "Run 'fairseq-local <command> --help' for a command's options."]
    return "\n".join(lines) + "\n"


def _fail(message: str, status: int = 2) -> int:
    sys.stderr.write(f"error: {message}\n")
    return status


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--trust-checkpoint" in argv:  # a global option: every checkpoint this run reads is unpickled in full
        from fairseq_local.safe_pickle import TRUST_ENV

        argv.remove("--trust-checkpoint")
        os.environ[TRUST_ENV] = "1"
    if not argv:
        return _fail("missing command: one of " + ", ".join(COMMANDS) + " (see fairseq-local --help)")
    command, rest = argv[0], argv[1:]
    if command in ("-h", "--help"):
        sys.stdout.write(help_text())
        return 0
    if command == "--version":
        from fairseq_local import __version__

        print(f"fairseq-local {__version__}")
        return 0
    if command not in COMMANDS:
        close = difflib.get_close_matches(command, COMMANDS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        kind = "option" if command.startswith("-") else "command"
        return _fail(f"unknown {kind} '{command}' ({hint}commands: {', '.join(COMMANDS)}; see fairseq-local --help)")
    module = importlib.import_module(f"{__package__}.{COMMANDS[command][0]}")
    try:
        status = module.main(rest)
    except KeyboardInterrupt:  # one line, unless a script that runs this says what a re-run does
        if os.environ.get("FAIRSEQ_LOCAL_INTERRUPT_OWNER"):
            return 130
        sys.stderr.write(f"interrupted: fairseq-local {command} stopped before it finished\n")
        return 130
    except OSError as e:  # a file that cannot be read or written: one line, never a traceback
        return _fail(output_error_line(e), status=1)
    except Exception as e:
        found = one_line_error_in(e)
        if found is None:
            raise
        return _fail(str(found), status=1)
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
