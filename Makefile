# posenc book: the two commands a reader needs are `make book` and `make test`.
# Everything runs inside .venv, created here from the pinned requirements.txt.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
HTML   := _build/html
# Chapters are the numbered notebooks; their MyST twins live in book/md_src/.
CHAPTERS := $(sort $(wildcard book/[0-9][0-9]_*.ipynb))
PORT   ?= 8000

.PHONY: book test unit nbval site notebooks serve lint clean help

help:
	@echo "make book       set up .venv if missing and build the site into $(HTML)"
	@echo "make test       unit/property tests, notebook checks, nbval, book build, site checks"
	@echo "make notebooks  re-execute every chapter top to bottom and sync the MyST twins"
	@echo "make serve      serve $(HTML) on http://localhost:$(PORT)"

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --builder html -n -W --keep-going
	@echo "Book: $(abspath $(HTML))/index.html"

lint: $(STAMP)
	$(PY) -m ruff check posenc tests scripts

unit: $(STAMP)
	$(PY) -m pytest -q -n 2 tests --ignore=tests/site

nbval: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg $(CHAPTERS)

site: $(STAMP)
	$(PY) -m pytest -q tests/site

test: lint unit nbval book site

notebooks: $(STAMP)
	$(PY) scripts/run_notebooks.py

serve:
	@test -f $(HTML)/index.html || { echo "no site yet: run make book"; exit 1; }
	$(PYTHON) -m http.server $(PORT) --bind 127.0.0.1 --directory $(HTML)

clean:
	rm -rf _build
