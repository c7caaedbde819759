"""Unit tests start no process: a test under tests/unit that runs a command
(subprocess, a script, fairseq-train) must be marked ``slow`` (or live in
tests/e2e), so that ``-m "not slow"`` is the fast suite it claims to be."""

import subprocess

import pytest


@pytest.fixture(autouse=True)
def _no_process_unless_slow(request, monkeypatch):
    if request.node.get_closest_marker("slow") is not None:
        return
    name = request.node.nodeid
    if "tiny_data" in request.fixturenames:  # a session fixture that runs scripts/prepare-synthetic.sh
        raise AssertionError(f"{name} uses tiny_data (a generated corpus): mark it @pytest.mark.slow")

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"{name} starts a process: mark it @pytest.mark.slow or move it to tests/e2e")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
