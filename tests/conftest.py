"""Shared test configuration: Triton's interpreter without a GPU; hypothesis derandomized so CI is reproducible.

The tests mirror what they test (tests/project/test_layering.py holds the rule): ``library/``
the ``posenc`` package, module by module; ``book_helpers/`` the ``posenc_book`` package;
``chapters/`` the book's chapters and pages; ``tooling/`` the scripts; ``project/`` the rules of
the whole tree; ``site/`` the built site. What they share is here and in ``repo.py`` (the
repository: its root, scripts, extensions and pages), ``helpers.py`` (seeded tensors) and
``fuzzing.py`` (the fuzzers' strategies).
"""

import os

import pytest
import repo  # noqa: F401  (first: puts scripts/ on sys.path for every test module)
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
    import claim_tests

    problems = claim_tests.outcome_problems(_CLAIM_OUTCOMES, claim_tests.marked_tests())
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_line("\nthe ledger's claims are decided by tests that did not pass:\n" + "\n".join(problems))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
