"""fairseq_local_data.progress: the progress line of a fairseq-train run,
its pace on and off a terminal, and what it copies where."""

import io

from fairseq_local_data.progress import Follower, clock, progress_line


def line(u: int) -> bytes:
    return f"2026-01-01 00:00:00 | INFO | train_inner | epoch 001:  {u} / 9 loss=1.0, num_updates={u}\n".encode()


def follower(tty=False, max_update=100, start=0):
    log, out, err = io.BytesIO(), io.BytesIO(), io.StringIO()
    return Follower(log, out, err, "a", "runs/a/train.log", max_update, start, 60.0, tty), log, out, err


def test_clock():
    assert [clock(s) for s in (0, 59.4, 95, 3599, 3725)] == ["0s", "59s", "1m35s", "59m59s", "1h02m"]


def test_the_line_states_update_share_elapsed_and_estimate():
    assert progress_line("a", 400, 72.0, 1600, 0, "runs/a/train.log") == (
        "a: update 400 of 1600 (25 %), 1m12s elapsed, about 3m36s left (log: runs/a/train.log)")
    # resumed at 1000: the pace is that of the 200 updates run here
    assert progress_line("a", 1200, 60.0, 1600, 1000, "L") == (
        "a: update 1200 of 1600 (75 %), 1m00s elapsed, about 2m00s left (log: L)")
    assert progress_line("a", 1000, 5.0, 1600, 1000, "L") == "a: update 1000 of 1600 (62 %), 5s elapsed (log: L)"
    assert progress_line("a", 7, 3.0, None, 0, "L") == "a: update 7, 3s elapsed (log: L)"


def test_off_a_terminal_a_line_per_tenth_and_everything_copied():
    f, log, out, err = follower()
    for u in range(1, 101):
        f.feed(line(u))
        f.feed(b"| INFO | valid | no count here\n")
    f.maybe_show(final=True)  # update 100 is shown already
    shown = [x.split("] a: update ")[1].split(" of")[0] for x in err.getvalue().splitlines()]
    assert shown == ["1"] + [str(u) for u in range(10, 101, 10)]  # the first sign of life, then each tenth
    assert log.getvalue() == out.getvalue() and log.getvalue().count(b"\n") == 200


def test_on_a_terminal_one_line_rewritten_in_place():
    f, _, _, err = follower(tty=True, max_update=3)
    for u in (1, 2, 3):
        f.feed(line(u))
    f.maybe_show(final=True)
    text = err.getvalue()
    assert text.count("\r\033[K") == 4 and text.count("\n") == 1 and text.endswith("(log: runs/a/train.log)\n")
    assert text.split("\r\033[K")[-1].startswith("a: update 3 of 3 (100 %)")


def test_after_a_signal_the_log_only_and_no_last_line():
    f, log, out, err = follower(max_update=10)
    f.feed(line(1))
    f.stop_copying()
    f.feed(b"Traceback (most recent call last):\n")
    f.feed(line(5))
    f.maybe_show(final=True)
    assert out.getvalue() == line(1) and log.getvalue().endswith(b"num_updates=5\n")
    assert err.getvalue().count("\n") == 1  # update 1's line only


def test_a_run_that_never_trained_has_no_line():
    f, _, _, err = follower()
    f.feed(b"error: attention layout has 6 layers but the encoder has 1\n")
    f.maybe_show(final=True)
    assert err.getvalue() == ""


def test_a_full_disk_is_one_line_and_the_output_still_flows():
    class Full(io.BytesIO):
        def write(self, b):
            raise OSError(28, "No space left on device")

    out, err = io.BytesIO(), io.StringIO()
    f = Follower(Full(), out, err, "a", "L", 10, 0, 60.0, False)
    f.feed(line(1))
    f.feed(line(2))
    assert out.getvalue() == line(1) + line(2)
    assert err.getvalue().splitlines()[0] == "error: cannot append to L: No space left on device"


def test_on_a_terminal_a_signal_ends_the_line_for_the_scripts_own():
    f, _, _, err = follower(tty=True, max_update=3)
    f.feed(line(1))
    f.stop_copying()
    f.stop_copying()
    f.feed(line(2))
    assert err.getvalue().endswith("(log: runs/a/train.log)\n") and err.getvalue().count("\n") == 1
