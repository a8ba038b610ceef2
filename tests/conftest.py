"""Shared test configuration: Triton's interpreter without a GPU; hypothesis derandomized so CI is reproducible."""

import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

if not torch.cuda.is_available():
    # No GPU: Triton's interpreter runs the RoPE kernels on CPU tensors. Set before any test imports
    # posenc.triton_rope's kernels (their module decorates them on first use); importing torch does not
    # import Triton, and the CUDA check needs torch.
    os.environ.setdefault("TRITON_INTERPRET", "1")

settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1000, derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
torch.set_num_threads(1)


# The ledger's tests (@pytest.mark.claim, scripts/claim_tests.py): in a run of the whole suite, each
# must pass, neither fail nor skip, or the run fails. Recorded where the reports arrive (the
# controller under xdist), and checked there at the end.
_CLAIM_OUTCOMES: dict[str, set[str]] = {}


def pytest_runtest_logreport(report):
    if "claim" in report.keywords and (report.when == "call" or report.outcome != "passed"):
        _CLAIM_OUTCOMES.setdefault(report.nodeid.split("[")[0], set()).add(report.outcome)


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput") or not _CLAIM_OUTCOMES:
        return  # an xdist worker, or a run without the ledger's tests
    scripts = str(Path(__file__).resolve().parents[1] / "scripts")
    sys.path.insert(0, scripts)
    try:
        import claim_tests
    finally:
        sys.path.remove(scripts)
    problems = claim_tests.outcome_problems(_CLAIM_OUTCOMES, claim_tests.marked_tests())
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_line("\nthe ledger's claims are decided by tests that did not pass:\n" + "\n".join(problems))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
