"""Runs under different CPU kernel settings never share compiled artefacts.

TorchInductor keys its FX-graph cache without the CPU's vector instruction set: a kernel
generated for AVX-512 and served to a run under AVX2 computes wrong numbers, and one served
to ATen's generic kernels does not compile (``test_inductor_cache_key_leaves_out_the_vector_isa``
documents this upstream behaviour). So the Makefile gives every run of the chapters caches of
its own, and those runs, in the suite's order, compare chapter 10's compiled module with the
uncompiled table under each setting (native, AVX2, generic). ``test_no_run_finds_an_artefact_left_by_another``
drives the Makefile's real chapter runs (``NBVAL_RUNS``) on a small notebook in
``tests/fixtures/`` that looks for what an earlier run left in its caches, with the caches that
every run would otherwise share set to one folder, as TorchInductor's default (one folder per
user) is; it fails on a Makefile whose runs share their caches. The notebook is run by
``tests/fixtures/run_cells.py`` in place of nbval (which takes 15 s to start a run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from repo import FIXTURES, ROOT

LEFTOVERS = FIXTURES / "cache_leftovers.ipynb"
RUN_CELLS = FIXTURES / "run_cells.py"  # nbval's comparison in this process: a kernel and pytest cost 15 s a run


def suite_order() -> list[str]:
    """The chapter runs in the order `make test` runs them."""
    makefile = (ROOT / "Makefile").read_text()
    runs = re.search(r"^NBVAL_RUNS := (.+)$", makefile, re.MULTILINE).group(1).split()
    test_line = re.search(r"^test: (.+)$", makefile, re.MULTILINE).group(1)
    assert "$(NBVAL_RUNS)" in test_line.split()
    return runs


def shared_env(shared: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TORCHINDUCTOR_", "TRITON_CACHE"))}
    env.pop("ATEN_CPU_CAPABILITY", None)
    env.update(TORCHINDUCTOR_CACHE_DIR=str(shared / "inductor"), TRITON_CACHE_DIR=str(shared / "triton"))
    return env


def run_chapters(runs: list[str], notebooks: list[Path], tmp: Path, shared: Path) -> subprocess.CompletedProcess:
    """`make RUN ...` with these notebooks as the chapters of every edition."""
    names = " ".join(str(p.relative_to(ROOT)) for p in notebooks)
    command = [
        "make", "--no-print-directory", "-C", str(ROOT), "-o", ".venv/.test",
        f"PY={sys.executable}", f"NBVAL={RUN_CELLS}", f"NBVAL_LAX={RUN_CELLS} --lax",
        f"CHAPTERS={names}", f"HANT={names}", f"HANS={names}",
        f"NO_TRITON_CHAPTER={LEFTOVERS.name}", f"CACHES={tmp / 'caches'}", f"ELSEWHERE={tmp / 'elsewhere'}",
        f"STATUS={tmp / 'status'}",
        *runs,
    ]  # fmt: skip
    return subprocess.run(command, env=shared_env(shared), capture_output=True, text=True, timeout=600)


def test_the_suite_order_is_the_order_of_make_test():
    assert suite_order() == ["nbval", "nbval-cpus", "nbval-elsewhere"]


def test_no_run_finds_an_artefact_left_by_another(tmp_path):
    """`make test` twice in a row, the second time in the reverse order: every run starts with empty caches."""
    shared = tmp_path / "shared"
    for runs in (suite_order(), suite_order()[::-1]):
        done = run_chapters(runs, [LEFTOVERS], tmp_path, shared)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]


REPRODUCER = """
import os, sys, torch
from posenc import SinusoidalPositionalEncoding, sinusoidal_table
x = torch.zeros(2, 12, 16)
expected = x + sinusoidal_table(12, 16)
for capability in sys.argv[1:]:
    if capability != "native":
        os.environ["ATEN_CPU_CAPABILITY"] = capability
    torch._dynamo.reset()
    try:
        out = torch.compile(SinusoidalPositionalEncoding(16, initial_len=4), fullgraph=True)(x)
        print(capability, int((~torch.isclose(out, expected, atol=1e-6)).sum()))
    except Exception as error:  # the error, then what it wraps (Dynamo wraps the compiler's)
        chain = [error]
        while len(chain) < 8:
            inner = getattr(chain[-1], "inner_exception", None) or chain[-1].__cause__
            if inner is None:
                break
            chain.append(inner)
        print(capability, ",".join(type(e).__name__ for e in chain))
"""


@pytest.mark.upstream
def test_inductor_cache_key_leaves_out_the_vector_isa(tmp_path):
    """torch 2.13: with one cache folder, the kernels compiled natively are served to a run under
    another ATEN_CPU_CAPABILITY. Where AVX-512 is native, AVX2 gets the same C++ source (16 floats
    a step) built with AVX2's 8-float vectors, and about half the entries are wrong; the generic
    kernels get code that calls at::vec and does not compile. If this test fails, torch has fixed
    its cache key: chapter 10's section on torch.compile says what to change."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    native = str(pick_vec_isa())
    if not native or native == "INVALID_VEC_ISA":
        pytest.skip("this CPU has no vector instruction set that TorchInductor uses")
    other = "avx2" if "avx512" in native else "default"
    env = shared_env(tmp_path)
    script = textwrap.dedent(REPRODUCER)
    done = subprocess.run(
        [sys.executable, "-c", script, "native", other], env=env, capture_output=True, text=True, timeout=600
    )
    lines = dict(line.split() for line in done.stdout.splitlines())
    assert lines["native"] == "0"
    if other == "default":
        # raised as is, or wrapped in Dynamo's BackendCompilerFailed (as it is under load)
        assert "CppCompileError" in lines[other].split(","), lines
    else:
        assert int(lines[other]) > 100, lines  # of 384
