"""The ways the book is installed and run agree: pins, extras, Binder, Colab, CI, make."""

import ast
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
import sync_repo_url  # noqa: E402
import yaml
from repo import ROOT, chapter_notebooks

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None


def pins(path):
    out = {}
    for line in (ROOT / path).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def extras():
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {}
    for extra, reqs in project["optional-dependencies"].items():
        names[extra] = {re.match(r"[A-Za-z0-9_.\-]+", r).group(0).lower().replace("_", "-") for r in reqs}
    return project, names


def test_requirement_files_agree_with_each_other():
    readers, tests, binder = pins("requirements.txt"), pins("requirements-test.txt"), pins("binder/requirements.txt")
    assert readers and binder
    # one version of each package everywhere
    assert {k: tests.get(k) for k in readers} == readers
    assert {k: readers.get(k) for k in binder} == binder
    assert readers["torch"] == tests["torch"] == binder["torch"] == "2.13.0"


def test_every_extra_is_pinned_where_it_is_installed():
    _, names = extras()
    readers, tests, binder = pins("requirements.txt"), pins("requirements-test.txt"), pins("binder/requirements.txt")
    book, site, test = (names[k] - {"posenc"} for k in ("book", "site", "test"))
    assert book <= binder.keys() and book | site <= readers.keys() and book | site | test <= tests.keys()
    assert "jupyterlab" in readers, "readers run the chapters in JupyterLab"


def test_readers_environment_leaves_out_the_test_suite_and_cuda():
    readers = pins("requirements.txt")
    for name in ("pytest", "nbval", "hypothesis", "playwright", "ruff", "triton"):
        assert name not in readers, f"{name} is a test dependency, not a reader's"
    assert not [name for name in readers if name.startswith(("nvidia-", "cuda-"))]


def test_triton_pin_is_the_one_torch_requires():
    line = next(x for x in (ROOT / "requirements-test.txt").read_text().splitlines() if x.startswith("triton=="))
    # torch 2.13.0's CUDA build on the public index requires exactly this Triton (Requires-Dist)
    assert line == 'triton==3.7.1; sys_platform == "linux"'


def test_binder_installs_torch_from_the_cpu_index_and_the_package():
    text = (ROOT / "binder" / "requirements.txt").read_text()
    assert text.splitlines()[0] == "--extra-index-url https://download.pytorch.org/whl/cpu"
    post_build = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post_build
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"


def chapter_imports() -> set[str]:
    """Top-level modules every chapter imports, read from the code cells' syntax trees."""
    modules = set()
    for path in chapter_notebooks():
        cells = json.loads(path.read_text())["cells"]
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Import):
                    modules |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    modules.add(node.module.split(".")[0])
    return modules


def test_binder_and_colab_install_every_package_the_chapters_import():
    _, names = extras()
    imported = chapter_imports()
    stdlib = set(sys.stdlib_module_names)
    # import name -> distribution name, where they differ
    dist = {"yaml": "pyyaml", "rotary_embedding_torch": "rotary-embedding-torch", "IPython": "ipython"}
    optional = {"triton"}  # chapter 12 runs without it and says what it skips
    provided = {"posenc", "posenc_book", "torch"} | (names["book"] & {dist.get(m, m) for m in imported})
    # IPython comes with every Jupyter kernel (Colab's and Binder's included)
    missing = {m for m in imported - stdlib - optional - {"IPython"} if dist.get(m, m) not in provided}
    assert not missing, f"chapters import {missing}, which posenc[book] (Colab, Binder) would not install"
    binder = pins("binder/requirements.txt")
    assert all(name in binder for name in names["book"])


def test_every_chapter_starts_by_installing_the_package_where_it_is_missing():
    cell = sync_repo_url.install_cell()
    url = sync_repo_url.repository()[0]
    assert f'"posenc[book] @ git+{url}"' in cell
    for path in chapter_notebooks():
        code = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        assert "".join(code[0]["source"]) == cell, f"{path.name}: first code cell is not the install cell"
        assert code[0]["outputs"] == [], "the install cell prints nothing where the package is installed"
        assert code[0]["metadata"].get("tags") == ["hide-cell"], "the site folds the install cell away"


@pytest.mark.parametrize("where", ["book", "zh-hant/book", "outside", "outside, pip fails"])
def test_the_install_cell_installs_the_sources_it_sits_in_else_the_repository(where, tmp_path, monkeypatch):
    """Run where the package is missing: from a folder of the sources it installs those (no
    address is needed, wherever the sources came from); elsewhere the published repository,
    and a failed pip is one clear error, not a traceback from inside subprocess."""
    calls = []

    def pip(command, **kwargs):
        calls.append(command[-1])
        return subprocess.CompletedProcess(command, 1 if "fails" in where else 0)

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.setattr(subprocess, "run", pip)
    monkeypatch.chdir(tmp_path if where.startswith("outside") else ROOT / where)
    cell = sync_repo_url.install_cell()
    if "fails" in where:
        with pytest.raises(RuntimeError, match="pip could not install posenc.book. @ git.*sources"):
            exec(cell, {})
    else:
        exec(cell, {})
    url = sync_repo_url.repository()[0]
    expected = f"posenc[book] @ git+{url}" if where.startswith("outside") else f"{ROOT.resolve()}[book]"
    assert calls == [expected]


def test_package_data_ships_in_the_wheel_configuration():
    project, _ = extras()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "posenc*" in config["packages"]["find"]["include"]
    data = config["package-data"]["posenc_book"]
    shipped = {p.name for p in (ROOT / "posenc_book" / "data").iterdir()}
    assert shipped and all(any(Path(name).match(Path(pattern).name) for pattern in data) for name in shipped)
    assert (ROOT / "posenc" / "py.typed").exists() and "py.typed" in config["package-data"]["posenc"]


def test_published_project_metadata():
    project, _ = extras()
    assert (ROOT / "LICENSE").read_text().startswith("MIT License") and project["license"] == {"text": "MIT"}
    # the addresses exist once the book is published: only the release workflow's metadata has them
    assert "urls" not in project, "pyproject.toml presents no address; sync_repo_url.py --publish adds them"
    published = tomllib.loads(sync_repo_url.published_files()[ROOT / "pyproject.toml"])["project"]
    assert set(published["urls"]) >= {"Homepage", "Documentation", "Repository", "Issues", "Changelog", "Errata"}
    cff = yaml.safe_load(sync_repo_url.published_files()[ROOT / "CITATION.cff"])
    assert cff["repository-code"] == sync_repo_url.repository()[0] and cff["url"] == sync_repo_url.site_url()
    assert project["authors"] and any("Python :: 3.12" in c for c in project["classifiers"])
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["version"] == project["version"]
    assert f"## {project['version']} " in (ROOT / "CHANGELOG.md").read_text()
    assert "## How to cite" in (ROOT / "README.md").read_text()


def test_repository_url_is_set_once_and_everything_else_derives_from_it():
    url, owner, name = sync_repo_url.repository()
    assert sync_repo_url.main(["--check"]) == 0, "run python scripts/sync_repo_url.py"
    readme = (ROOT / "README.md").read_text()
    # named as what the publishing workflow will produce, never as a link to follow
    assert f"`{url}`" in readme and f"`{sync_repo_url.site_url()}`" in readme
    assert "git clone http" not in readme and f"<{sync_repo_url.site_url()}" not in readme
    assert f"]({sync_repo_url.site_url()}" not in readme and f"]({url}" not in readme
    for path in ("CITATION.cff", "pyproject.toml", "book/intro.md", "zh-hans/book/intro.md"):
        text = (ROOT / path).read_text()
        assert url not in text and sync_repo_url.site_url() not in text, path
    # nothing outside the derived files spells the repository out
    derived = {p.relative_to(ROOT).as_posix() for p in sync_repo_url.expected_files()}
    derived |= {p.relative_to(ROOT).as_posix() for p in chapter_notebooks()}
    # the Chinese editions are generated from these (tests/tooling/test_editions.py)
    for edition in ("zh-hans", "zh-hant"):
        derived |= {f"{edition}/_config.yml"} | {f"{edition}/book/{p.name}" for p in chapter_notebooks()}
    # build/ and dist/ are setuptools' scratch folders: `make index` resolves the project
    # beside these tests (make checks), and its build/ can vanish mid-scan
    files = [
        p
        for p in ROOT.rglob("*")
        if p.is_file()
        and not {".venv", "_build", ".git", "build", "dist"} & set(p.relative_to(ROOT).parts)
        and p.suffix in {".md", ".yml", ".py", ".toml", ".txt", ".ipynb", ".cfg", ".cff"}
    ]
    marks = (f"{owner}/{name}", f"{owner}.github.io")

    def spells(path):
        try:
            return any(m in path.read_text(errors="ignore") for m in marks)
        except FileNotFoundError:  # removed since the scan listed it
            return False

    spelled = {p.relative_to(ROOT).as_posix() for p in files if spells(p)}
    assert spelled - derived == {"_config.yml"}


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.rstrip().endswith("exec make test")
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```bash", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.strip().splitlines()] == [["make", "book"], ["make", "test"]]


def test_workflow_tests_on_two_pythons_and_deploys_the_tested_site():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    jobs = workflow["jobs"]
    runs = [step["run"] for job in jobs.values() for step in job["steps"] if "run" in step]
    assert runs == [".ci/run"], "the workflow runs what every CI runs: .ci/run, the README's test command"
    assert jobs["test"]["strategy"]["matrix"]["python"] == ["3.11", "3.12"]
    setup = next(s for s in jobs["test"]["steps"] if s.get("uses", "").startswith("actions/setup-python"))
    assert setup["with"]["cache"] == "pip"
    upload = next(s for s in jobs["test"]["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html" and "3.11" in upload["if"]
    deploy = jobs["deploy"]
    assert deploy["needs"] == "test" and "refs/heads/main" in deploy["if"]
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"], "deploy only, no rebuild"
    assert deploy["concurrency"]["cancel-in-progress"] is False
    assert "concurrency" not in workflow, "a workflow-wide group would let a new push cancel a deployment"


def test_make_refuses_a_python_older_than_3_11(tmp_path):
    fake = tmp_path / "python3"
    fake.write_text('#!/bin/sh\n[ "$1" = "--version" ] && echo "Python 3.10.12"\nexit 1\n')
    fake.chmod(0o755)
    proc = subprocess.run(
        ["make", "-C", str(ROOT), f"PYTHON={fake}", f"VENV={tmp_path / 'venv'}", f"{tmp_path / 'venv'}/.created"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "needs Python 3.11 or newer" in proc.stdout and "Python 3.10.12" in proc.stdout
    assert "make PYTHON=python3.12" in proc.stdout
    assert not (tmp_path / "venv").exists()


def test_jupyterlab_starts_from_the_environment(tmp_path):
    scripts = Path(sysconfig.get_path("scripts"))
    assert (scripts / "jupyter-lab").exists(), "requirements.txt must install JupyterLab"
    assert "lab:" in (ROOT / "Makefile").read_text()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    cmd = [
        str(scripts / "jupyter"),
        "lab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ip=127.0.0.1",
        "--IdentityProvider.token=check",
        f"--ServerApp.root_dir={ROOT / 'book'}",
    ]
    server = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline and status != 200:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=check", timeout=5) as response:
                    status = response.status
            except OSError:
                assert server.poll() is None, "jupyter lab exited"
        assert status == 200, "JupyterLab did not serve /lab within a minute"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_data_is_found_through_the_package_from_any_directory(tmp_path):
    code = textwrap.dedent("""
        from posenc_book import data_path, recorded
        from posenc_book.ledger import chapter_sections
        print(data_path("claims.yaml").is_file(), len(chapter_sections()) >= 10)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert proc.stdout.split() == ["True", "True"], proc.stderr


def test_no_build_artefacts_are_tracked():
    proc = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        pytest.skip("not a git checkout")
    tracked = proc.stdout.splitlines()
    stray = [p for p in tracked if p.split("/")[0] in {"build", "dist", "_build", ".venv"} or ".egg-info/" in p]
    assert not stray, f"build output committed: {stray[:5]}"


def test_make_lets_python_write_bytecode_whatever_the_environment_says():
    """The venv is installed without .pyc files (--no-compile), so Python must write them on
    first import; with PYTHONDONTWRITEBYTECODE set (CI images set it) every process of
    `make test` would compile torch and Sphinx from source again."""
    probe = "probe-bytecode: ; @$(PYTHON) -c 'import sys; print(sys.flags.dont_write_bytecode)'"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = ["make", "--no-print-directory", "-C", str(ROOT), f"PYTHON={sys.executable}", "--eval", probe]
    done = subprocess.run([*command, "probe-bytecode"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


LAYOUT_ROWS = {
    "posenc/": ROOT / "posenc",
    "posenc/hf/": ROOT / "posenc" / "hf",
    "posenc/rope/": ROOT / "posenc" / "rope",
    "posenc/triton_rope/": ROOT / "posenc" / "triton_rope",
    "posenc/benchmark/": ROOT / "posenc" / "benchmark",
    "posenc/experiments/": ROOT / "posenc" / "experiments",
    "posenc_book/": ROOT / "posenc_book",
    "scripts/": ROOT / "scripts",
}


@pytest.mark.parametrize("row", LAYOUT_ROWS)
def test_the_readme_layout_names_every_module(row):
    """The README's layout table is kept by hand, so it is checked against the tree: each
    row names every module of its folder (a script by its file name)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines() if line.startswith(f"| `{row}` |"))
    folder = LAYOUT_ROWS[row]
    stems = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("__"))
    written = [f"`{s}.py`" if row == "scripts/" else f"`{s}`" for s in stems]
    missing = [w for w in written if w not in line]
    assert not missing, f"README's layout row for {row} misses {missing}"
