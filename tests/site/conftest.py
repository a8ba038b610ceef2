from pathlib import Path

HTML = Path(__file__).resolve().parents[2] / "_build" / "html"


def _cost(item) -> float:
    """A browser test's expected cost, for the order in which the workers take them: axe-core's
    contrast rule, which dominates, grows with the page's size; the walk visits every page."""
    if "previous_and_next" in item.name:
        return float("inf")
    name = getattr(item, "callspec", None) and item.callspec.params.get("name")
    if not name:
        return 0.0
    page = HTML / f"{name}.html"
    return page.stat().st_size if page.exists() else 0.0


def pytest_collection_modifyitems(session, config, items):
    """Longest tests first (the longest-processing-time rule): with two workers that steal
    work from each other (``--dist worksteal``), neither ends waiting on the other's last
    long page. The order changes when a test runs, never what it checks."""
    modules = list(dict.fromkeys(item.module.__name__ for item in items))
    modules.sort(key=lambda m: m != "test_browser")  # the browser's tests are the long ones
    # one module after another (each launches its browser once), longest test first within it
    items.sort(key=lambda item: (modules.index(item.module.__name__), -_cost(item)))
