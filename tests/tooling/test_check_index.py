"""The public-index check: a file of pins counts as resolvable only if its pins are closed."""

import check_index  # noqa: E402


def metadata(**packages):
    """Resolver-report metadata: name -> (version, [Requires-Dist, ...])."""
    return {name: {"name": name, "version": v, "requires_dist": deps} for name, (v, deps) in packages.items()}


def write(tmp_path, monkeypatch, text):
    monkeypatch.setattr(check_index, "ROOT", tmp_path)
    (tmp_path / "requirements.txt").write_text(text)
    return "requirements.txt"


def test_a_closed_set_of_pins_passes(tmp_path, monkeypatch):
    path = write(tmp_path, monkeypatch, "torch==2.13.0\njinja2==3.1.6\nmarkupsafe==3.0.4\n")
    meta = metadata(
        torch=(
            "2.13.0",
            [
                "jinja2",
                'nvidia-cublas==13.1.1.3; platform_system == "Linux"',
                'triton==3.7.1; platform_system == "Linux"',
            ],
        ),
        jinja2=("3.1.6", ["MarkupSafe>=2.0", 'Babel>=2.7; extra == "i18n"']),
        markupsafe=("3.0.4", []),
    )
    assert check_index.closed(path, meta, "3.11") == []


def test_a_dependency_left_unpinned_is_reported(tmp_path, monkeypatch):
    path = write(tmp_path, monkeypatch, "jinja2==3.1.6\n")
    meta = metadata(jinja2=("3.1.6", ["MarkupSafe>=2.0"]), markupsafe=("3.0.4", []))
    assert check_index.closed(path, meta, "3.11") == ["jinja2 requires MarkupSafe>=2.0 is not pinned"]


def test_a_pin_outside_a_dependency_range_is_reported(tmp_path, monkeypatch):
    path = write(tmp_path, monkeypatch, "myst-parser==3.0.1\nmarkdown-it-py==4.3.0\n")
    meta = metadata(**{"myst-parser": ("3.0.1", ["markdown-it-py<4.0.0,>=3.0.0"]), "markdown-it-py": ("4.3.0", [])})
    assert check_index.closed(path, meta, "3.11") == [
        "myst-parser requires markdown-it-py<4.0.0,>=3.0.0 but markdown-it-py==4.3.0 is pinned"
    ]


def test_markers_are_evaluated_for_the_python_checked(tmp_path, monkeypatch):
    path = write(tmp_path, monkeypatch, "torch==2.13.0\n")
    meta = metadata(torch=("2.13.0", ['setuptools; python_version >= "3.12"']))
    assert check_index.closed(path, meta, "3.11") == []
    assert check_index.closed(path, meta, "3.12") == [
        'torch requires setuptools; python_version >= "3.12" is not pinned'
    ]


def test_a_pin_the_resolver_did_not_choose_is_reported(tmp_path, monkeypatch):
    path = write(tmp_path, monkeypatch, "six==1.16.0\nnothere==1.0\n")
    meta = metadata(six=("1.17.0", []))
    assert check_index.closed(path, meta, "3.11") == [
        "six==1.16.0, while the resolver chose 1.17.0",
        "nothere==1.0 is not part of the resolved test environment",
    ]
