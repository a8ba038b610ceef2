"""The ways the book is run agree: Binder's pins, CI's entry point, the workflow."""

import re

import yaml
from chapters import ROOT


def pins(path):
    out = {}
    for line in (ROOT / path).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s+]+)", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_binder_pins_match_requirements():
    top, binder = pins("requirements.txt"), pins("binder/requirements.txt")
    assert binder, "binder/requirements.txt pins nothing"
    assert {k: top.get(k) for k in binder} == binder


def test_binder_installs_every_package_the_chapters_import():
    imported = set()
    for nb in (ROOT / "book" / "md_src").glob("*.md"):
        imported |= set(re.findall(r"^\s*(?:from|import) ([a-z_]+)", nb.read_text(), re.M))
    provided = {"posenc", "torch", "matplotlib", "numpy", "yaml", "rotary_embedding_torch", "tqdm", "transformers"}
    stdlib = {"math", "io", "itertools", "inspect", "json", "time", "re", "os", "sys", "collections",
              "functools", "dataclasses", "pathlib", "statistics", "textwrap", "warnings", "typing", "copy",
              "random", "contextlib", "timeit", "platform", "datetime", "string", "pprint", "tracemalloc", "gc"}
    assert imported - provided - stdlib == set(), "chapters import packages Binder would not install"
    binder = pins("binder/requirements.txt")
    for package in ("torch", "matplotlib", "numpy", "pyyaml", "rotary-embedding-torch", "tqdm", "transformers"):
        assert package in binder


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.rstrip().endswith("exec make test")
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```bash", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.strip().splitlines()] == [["make", "book"], ["make", "test"]]


def test_workflow_calls_the_makefile_only():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    runs = [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]
    assert runs == ["make test", "make book"]
    publish = workflow["jobs"]["publish"]
    assert publish["needs"] == "test" and "refs/heads/main" in publish["if"]
    assert any(step.get("with", {}).get("path") == "_build/html" for step in publish["steps"])


def test_repository_url_is_set_once():
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    assert url.startswith("https://github.com/")
    files = [p for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts and "_build" not in p.parts
             and p.suffix in {".md", ".yml", ".py", ".toml", ".txt", ".ipynb", ".cfg"}]
    hits = [p.relative_to(ROOT).as_posix() for p in files if url.split("//", 1)[1] in p.read_text(errors="ignore")]
    assert hits == ["_config.yml"]
