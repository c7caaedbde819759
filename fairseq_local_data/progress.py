"""``CMD 2>&1 | python -m fairseq_local_data.progress --log FILE --name NAME
[--max-update M] [--start U]``: follow a fairseq-train run.

Every line of the command's output is appended to FILE (the run's full log)
and copied to stdout, as ``tee -a`` would; stderr gets one progress line for
the run: "NAME: update N of M (P %), 1m12s elapsed, about 3m36s left (log:
FILE)". On a terminal the line is rewritten in place; otherwise a new one is
printed every tenth of the run (or every --every seconds without
--max-update), and once at the end. The update count is read from fairseq's
``num_updates`` fields (``train_inner`` and ``valid`` lines); the estimate is
the rate since this process started, from update --start (a resumed
checkpoint's).

On Ctrl-C or SIGTERM the filter keeps appending to FILE, so that fairseq's
last words are in the log, and stops copying to stdout: the script that runs
it prints the one line about the interruption (``scripts/lib/jobs.sh``).
"""

import argparse
import re
import signal
import sys
import time
from typing import IO, List, Optional

_UPDATES = re.compile(r"\bnum_updates[= ](\d+)")


def clock(seconds: float) -> str:
    """``95`` -> ``"1m35s"``; ``3725`` -> ``"1h02m"``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def progress_line(name: str, update: int, elapsed: float, max_update: Optional[int], start: int,
                  log: str) -> str:
    """One progress line: the update, the elapsed time and, with a known --max-update, the estimate."""
    done = update - start
    if max_update:
        pct = 100.0 * update / max_update
        left = (max_update - update) * elapsed / done if done > 0 else None
        tail = f", about {clock(left)} left" if left is not None else ""
        head = f"update {update} of {max_update} ({pct:.0f} %), {clock(elapsed)} elapsed{tail}"
    else:
        head = f"update {update}, {clock(elapsed)} elapsed"
    return f"{name}: {head} (log: {log})"


class Follower:
    """Copies lines to the log and stdout, and decides when a progress line is due."""

    def __init__(self, log: IO[bytes], out: IO[bytes], err: IO[str], name: str, log_name: str,
                 max_update: Optional[int], start: int, every: float, tty: bool) -> None:
        self.log, self.out, self.err = log, out, err
        self.name, self.log_name = name, log_name
        self.max_update, self.start, self.every, self.tty = max_update, start, every, tty
        self.t0 = time.monotonic()
        self.update = start
        self.shown = None  # (update, time) of the last line printed
        self.quiet = False  # set on Ctrl-C / SIGTERM: the log only

    def stop_copying(self, *_) -> None:
        if self.tty and self.shown and not self.quiet:
            self.err.write("\n")  # end the line rewritten in place: the script's own line comes next
            self.err.flush()
        self.quiet = True

    def feed(self, raw: bytes) -> None:
        if self.log is not None:
            try:
                self.log.write(raw)
                self.log.flush()
            except OSError as e:  # a full disk: say so once, and keep the run's output flowing
                self.err.write(f"error: cannot append to {self.log_name}: {e.strerror or e}\n")
                self.log = None
        if not self.quiet:
            try:
                self.out.write(raw)
                self.out.flush()
            except BrokenPipeError:  # a reader that left (| head): the log still gets everything
                self.quiet = True
        m = _UPDATES.findall(raw.decode("utf-8", "replace"))
        if m:
            self.update = max(self.update, int(m[-1]))
            self.maybe_show()

    def _due(self, now: float) -> bool:
        if self.tty:
            return True
        if self.shown is None:
            return True
        if self.max_update:
            step = max(1, self.max_update // 10)
            return self.update // step > self.shown[0] // step
        return now - self.shown[1] >= self.every

    def maybe_show(self, final: bool = False) -> None:
        now = time.monotonic()
        if self.quiet or not (final or self._due(now)):
            return
        if final and (self.update == self.start or (self.shown and self.shown[0] == self.update and not self.tty)):
            return  # nothing trained (a run that failed as it started), or the line is already there
        line = progress_line(self.name, self.update, now - self.t0, self.max_update, self.start, self.log_name)
        if self.tty:
            self.err.write("\r\033[K" + line + ("\n" if final else ""))
        else:
            self.err.write(f"[{time.strftime('%H:%M:%S')}] {line}\n")
        self.err.flush()
        self.shown = (self.update, now)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fairseq_local_data.progress",
                                description=__doc__.split("\n\n")[1])
    p.add_argument("--log", required=True, help="the run's log, appended to")
    p.add_argument("--name", required=True, help="what the progress line calls the run")
    p.add_argument("--max-update", type=int, default=None, help="the run's --max-update (for the estimate)")
    p.add_argument("--start", type=int, default=0, help="the update the run resumes from")
    p.add_argument("--every", type=float, default=60.0, help="seconds between lines without --max-update")
    a = p.parse_args(argv)
    with open(a.log, "ab") as log:
        f = Follower(log, sys.stdout.buffer, sys.stderr, a.name, a.log, a.max_update, a.start, a.every,
                     sys.stderr.isatty())
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, f.stop_copying)
        for raw in sys.stdin.buffer:
            f.feed(raw)
        f.maybe_show(final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
