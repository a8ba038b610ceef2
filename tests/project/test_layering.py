"""The package's layers import in one direction only, read from the import statements.

    posenc_book  ──► posenc (anything)                  never the reverse
    posenc (the root, the public face) ──► encodings     no posenc module imports the root
    posenc.benchmark ──► encodings, posenc.triton_rope
    posenc.experiments ──► encodings                     (benchmark and experiments never import each other)
    encodings ──► _checks, layout, each other            (rotary ··► triton_rope, lazily, inside functions)
    posenc.triton_rope ──► _checks, layout only

and the library itself needs torch alone: importing ``posenc`` loads none of the book's extras.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest
from repo import ROOT

PACKAGES = ("posenc", "posenc_book")
APPARATUS = ("posenc.benchmark", "posenc.experiments", "posenc.triton_rope")
LOW = ("posenc._checks", "posenc._version", "posenc.layout")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports(path: Path) -> list[tuple[str, bool]]:
    """``(module imported, whether at module level)`` for every import in the file, relative ones resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.append((target, id(node) in top))
            # `from . import x`: x is a submodule (then that is what is imported) or a name of the package
            if not node.module:
                submodules = [f"{target}.{alias.name}" for alias in node.names]
                if all(name in modules() for name in submodules):
                    found.pop()
                found += [(name, id(node) in top) for name in submodules if name in modules()]
    return found


def layer(module: str) -> str:
    if module.startswith("posenc_book"):
        return "book"
    if module == "posenc":
        return "face"
    for apparatus in APPARATUS:
        if module == apparatus or module.startswith(apparatus + "."):
            return apparatus
    if module in LOW:
        return "low"
    return "encodings" if module.startswith("posenc") else "outside"


def within(module: str, owner: str) -> bool:
    return layer(module) == layer(owner)


ALLOWED = {
    "low": {"low"},
    "encodings": {"low", "encodings"},
    "posenc.triton_rope": {"low"},
    "posenc.benchmark": {"low", "encodings", "posenc.triton_rope"},
    "posenc.experiments": {"low", "encodings"},
    "face": {"low", "encodings"},
    "book": {"face", "low", "encodings", "posenc.triton_rope", "posenc.benchmark", "posenc.experiments", "book"},
}


def test_the_package_has_the_layers_named_here():
    found = {layer(m) for m in modules()}
    assert {"face", "low", "encodings", "book"} <= found
    assert "outside" not in found


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_point_down_the_layers(module):
    path = modules()[module]
    own = layer(module)
    for target, top_level in imports(path):
        if not target.startswith(PACKAGES):
            continue
        wanted = layer(target)
        if module in ("posenc.rope.rotary", "posenc.rope.embedding") and wanted == "posenc.triton_rope":
            assert not top_level, "rotary reaches the Triton kernel lazily, inside the functions that use it"
            continue
        if own == wanted:
            continue
        assert wanted in ALLOWED[own], f"{module} ({own}) imports {target} ({wanted})"


def test_the_root_exports_the_library_only():
    """``posenc`` re-exports the encodings and the model-config reader; the experiments and the
    benchmark are imported by name. Their old names on the root still work, with a warning."""
    code = (
        "import sys, warnings, posenc; "
        "print(sorted(m for m in sys.modules if m.startswith(('posenc.experiments', 'posenc.benchmark')))); "
        "print(sorted({getattr(posenc, n).__module__.split('.')[1] for n in posenc.__all__ "
        "if hasattr(getattr(posenc, n), '__module__')}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    loaded, homes = (ast.literal_eval(line) for line in proc.stdout.splitlines())
    assert loaded == [], f"importing posenc loaded the apparatus: {loaded}"
    assert not set(homes) & {"experiments", "benchmark", "triton_rope"}, homes
    import posenc
    from posenc import experiments

    with pytest.warns(DeprecationWarning, match="posenc.experiments.TinyTransformer"):
        assert posenc.TinyTransformer is experiments.TinyTransformer
    with pytest.raises(AttributeError, match="no_such_name"):
        posenc.no_such_name  # noqa: B018


def test_importing_posenc_loads_only_torch():
    code = (
        "import sys, torch; before = {m.split('.')[0] for m in sys.modules}; "
        "import posenc; "
        "print(sorted({m.split('.')[0] for m in sys.modules} - before))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    # top-level packages loaded by posenc beyond what torch itself loads: posenc and the standard library
    extra = set(ast.literal_eval(proc.stdout.strip())) - {"posenc"} - set(sys.stdlib_module_names)
    assert not extra, f"importing posenc loaded {sorted(extra)}"


# What each part of the library may import at module level besides the standard library and itself.
THIRD_PARTY = {"posenc": {"torch"}, "posenc.triton_rope.kernel": {"torch", "triton", "numpy"}}


@pytest.mark.parametrize("module", sorted(m for m in modules() if m.startswith("posenc.") or m == "posenc"))
def test_the_library_imports_torch_alone_at_module_level(module):
    allowed = THIRD_PARTY.get(module, THIRD_PARTY["posenc"])
    for target, top_level in imports(modules()[module]):
        root = target.split(".")[0]
        if top_level and root not in PACKAGES and root not in sys.stdlib_module_names:
            assert root in allowed, f"{module} imports {target} at module level; the library needs only torch"


# Imports inside a function body, each for a reason other than dodging a cycle:
#: Triton is optional: the kernel's package is loaded only where a caller asks for it.
LAZY_TARGETS = ("posenc.triton_rope",)
#: (module, target): reading the recorded data needs no torch until the names of the library are
#: listed. (The entry points import their command lines by name through posenc._entry.run.)
LAZY_PAIRS = {("posenc_book.data", "posenc")}


def private_names(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` for every ``from module import _name`` (one underscore, not a dunder) in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{target}.{alias.name}" not in modules():  # a private module is fine
                    found.append((target, alias.name))
    return found


@pytest.mark.parametrize("module", sorted(modules()))
def test_no_module_imports_another_modules_private_names(module):
    """A name with a leading underscore belongs to its module: what another module needs is public
    there (the low-level ``_checks`` module's functions are public names of a private module)."""
    assert private_names(modules()[module]) == [], f"{module} imports private names"


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_inside_functions_are_lazy_loads_never_hidden_cycles(module):
    for target, top_level in imports(modules()[module]):
        if top_level or not target.startswith(PACKAGES):
            continue
        lazy = target.startswith(LAZY_TARGETS) or (module, target) in LAZY_PAIRS
        assert lazy, f"{module} imports {target} inside a function: import it at the top, or break the cycle"


def test_the_module_imports_form_no_cycle():
    """At module level, the package's modules import each other without a cycle (a package's
    ``__init__`` importing its own modules is not one)."""
    graph = {
        module: {t for t, top in imports(path) if top and t in modules() and not module.startswith(t + ".")}
        for module, path in modules().items()
    }
    done, active = set(), []

    def visit(module):
        if module in active:
            raise AssertionError("import cycle: " + " -> ".join(active[active.index(module) :] + [module]))
        if module in done:
            return
        active.append(module)
        for target in sorted(graph[module]):
            if not target.startswith(module + "."):
                visit(target)
        active.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


@pytest.mark.parametrize("module", sorted(modules()))
def test_functions_stay_short(module):
    """No function body over 60 lines (docstring not counted). Modules have no line limit: what
    belongs together stays together, and the rules above draw the walls."""
    source = modules()[module].read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) and len(node.body) > 1 else node.body
            lines = node.end_lineno - body[0].lineno + 1
            assert lines <= 60, f"{module}.{node.name} has a {lines}-line body"


# ---------------------------------------------------------------------------
# The tests mirror what they test
# ---------------------------------------------------------------------------

#: Each folder of tests/ and what it mirrors: a package (a test module per module), the chapters
#: and pages of the book, the scripts, or nothing (rules of the whole tree; the built site).
TEST_AREAS = {
    "library": ROOT / "posenc",
    "book_helpers": ROOT / "posenc_book",
    "tooling": ROOT / "scripts",
    "chapters": None,  # the book's chapters and pages, by their names in the manifest
    "project": None,  # rules of the whole tree: packaging, layering, caches
    "site": None,  # the built site and PDF (make book first)
}

#: Test modules of the library that cross every module on purpose: the fuzzers call every
#: public function, and the module-cache tests move every nn.Module.
ACROSS_MODULES = ("fuzz_", "module_caches")

#: Test modules of the book as a whole, beside the one-per-chapter ones.
WHOLE_BOOK = ("exercises_", "notebooks", "prose_numbers")

#: What tests/ holds besides the areas: the shared code every area imports.
SHARED = {"conftest.py", "repo.py", "helpers.py", "fuzzing.py", "reading_time.py"}


def _test_modules() -> list[Path]:
    return sorted((ROOT / "tests").rglob("test_*.py"))


def _mirrored_names(folder: Path) -> set[str]:
    """The names a test module in a mirror of ``folder`` may start with: its modules and sub-packages."""
    names = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    names |= {"main"} if (folder / "__main__.py").exists() else set()  # the command line
    return names | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}


def _names_what_it_tests(path: Path) -> bool:
    area, *inner = path.relative_to(ROOT / "tests").parent.parts
    stem = path.stem.removeprefix("test_")
    if area == "chapters":
        import manifest

        stems = [p.stem.split("_", 1)[1] for p in manifest.chapters()] + [Path(p).name for p in manifest.toc_files()]
        return not inner and stem.startswith(tuple(stems) + WHOLE_BOOK)
    if TEST_AREAS[area] is None:
        return True
    folder = TEST_AREAS[area].joinpath(*inner)
    if not folder.is_dir():
        return False
    if inner and stem.startswith(inner[-1] + "_"):
        stem = stem.removeprefix(inner[-1] + "_")  # test_benchmark_main.py: the benchmark's __main__.py
    names = _mirrored_names(folder) | ({inner[-1]} if inner else set())
    across = area == "library" and not inner and stem.startswith(ACROSS_MODULES)
    return across or any(stem == n or stem.startswith(n + "_") for n in names)


def test_every_test_module_sits_in_an_area_and_names_what_it_tests():
    """tests/library/rope/test_scaling.py tests posenc/rope/scaling.py; tests/chapters/test_models.py
    the chapter models; tests/tooling/test_manifest.py scripts/manifest.py. A test module that
    names no module or chapter tells nobody where its subject lives."""
    wrong = [
        str(p.relative_to(ROOT))
        for p in _test_modules()
        if p.parent == ROOT / "tests"
        or p.relative_to(ROOT / "tests").parts[0] not in TEST_AREAS
        or not _names_what_it_tests(p)
    ]
    assert wrong == []
    assert {p.name for p in (ROOT / "tests").glob("*.py")} == SHARED


def test_test_module_names_are_unique():
    """pytest imports test modules by their file name (no __init__.py in tests/): two of one name
    in different folders would collide."""
    names = [p.name for p in _test_modules()]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_tests_reach_scripts_and_extensions_one_way():
    """scripts/ is on sys.path through tests/repo.py, extensions load through repo.extension():
    no test module edits sys.path or loads a file by path itself."""
    found = []
    for path in _test_modules() + [ROOT / "tests" / "site" / "conftest.py"]:
        if path == Path(__file__).resolve():
            continue  # this rule names the words
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}: {w}" for w in ("sys.path.insert", "spec_from_file_location") if w in text]
    assert found == []


def test_shared_fixtures_live_in_conftest():
    """A fixture that two test modules define alike belongs in tests/conftest.py."""
    seen: dict[str, list[str]] = {}
    for path in _test_modules():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list):
                seen.setdefault(ast.unparse(node), []).append(str(path.relative_to(ROOT)))
    assert [places for places in seen.values() if len(places) > 1] == []
