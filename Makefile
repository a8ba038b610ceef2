# posenc book: the two commands a reader needs are `make book` and `make test`.
# Everything runs inside .venv, created here: requirements.txt for the book (build the
# site, run the chapters in JupyterLab), requirements-test.txt on top of it for the tests.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# --no-compile: modules are byte-compiled when first imported, not all at install (saves
# about 280 MB of .pyc files for the thousands of modules the book never imports).
# That needs Python to write what it compiles. Some machines, CI images among them, set
# PYTHONDONTWRITEBYTECODE; then each of the hundreds of processes `make test` starts (a
# kernel per chapter and edition, test workers, builds) compiles torch, transformers and
# Sphinx from source again: 1.5 s more for `import torch` alone. Bytecode does not depend on
# the CPU, and Python checks it against its source, so it is written here whatever the
# environment says (an empty value is off).
export PYTHONDONTWRITEBYTECODE :=
PIP    := $(PY) -m pip --disable-pip-version-check
INSTALL := $(PIP) install --no-compile
HTML   := _build/html
# The chapters are the notebooks of _toc.yml (their MyST twins live in book/md_src/), the
# editions those of editions.yaml: scripts/manifest.py reads both (with the venv's Python,
# so these are expanded only where a rule runs, after .venv exists). The Chinese editions
# (scripts/editions.py generates them from the English chapters and the Simplified
# translation) have the same code cells and the same outputs.
MANIFEST = $(PY) scripts/manifest.py
CHAPTERS = $(shell $(MANIFEST) chapters)
EDITIONS = $(shell $(MANIFEST) editions)
HANS = $(shell $(MANIFEST) chapters zh-hans)
HANT = $(shell $(MANIFEST) chapters zh-hant)
PORT   ?= 8000
# torch 2.13.0 comes first, on its own. Without an NVIDIA GPU the CPU build is taken from
# PyTorch's CPU index (about 0.2 GB instead of several GB of CUDA libraries); with one,
# the public index's CUDA build. Set TORCH_INDEX to choose another build, for example
# TORCH_INDEX=https://download.pytorch.org/whl/cu128, or TORCH_INDEX= for the public index.
TORCH_INDEX ?= $(if $(shell command -v nvidia-smi 2>/dev/null),,https://download.pytorch.org/whl/cpu)
# Committed outputs must not depend on how a CPU rounds: nbval runs natively, with ATen's
# AVX2 kernels (nbval-cpus) and with its generic kernels (nbval-elsewhere). The three
# editions share their code and outputs (tests/tooling/test_editions.py), so the English chapters
# run natively, the Traditional ones with AVX2 and the Simplified ones elsewhere: every
# chapter of every edition runs once, each cell under all three. The native run keeps torch's
# default thread count; the other two give each of their two workers' kernels one thread
# (ONE_THREAD), which is faster on two cores than four threads contending for them, and
# compares every output under a second thread count too.
# (one folder per clone, so that two clones can run their tests side by side)
ELSEWHERE ?= $(or $(TMPDIR),/tmp)/posenc-elsewhere-$(firstword $(shell printf %s '$(CURDIR)' | cksum))
# Two workers take whole notebooks in the order given (--no-loadscope-reorder), the slowest
# first (the longest-processing-time rule), so that neither waits long on the other's last one.
# -p nbval_kernels (tests/plugins/, on PYTHONPATH): a kernel that dies before it answers, two
# workers having started theirs in the same instant, is started again.
NBVAL := -m pytest -q -p nbval_kernels -n 2 --dist loadfile --no-loadscope-reorder --nbval --nbval-sanitize-with
SLOW_FIRST := 11_experiments 10_pytorch 12_gpu_timing 05_relative 04_learned 02_sinusoidal 07_long_context 09_models
slow_first = $(foreach s,$(SLOW_FIRST),$(filter %$(s).ipynb,$(1))) $(filter-out $(foreach s,$(SLOW_FIRST),%$(s).ipynb),$(1))
NBVAL_LAX := -m pytest -q -p nbval_kernels --nbval-lax -p no:cacheprovider --rootdir .
# The order in which `make test` runs the chapters under the three kernel sets.
NBVAL_RUNS := nbval nbval-cpus nbval-elsewhere
PLUGINS := $(abspath tests/plugins)
ONE_THREAD := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# The chapter that runs once more with Triton hidden.
NO_TRITON_CHAPTER ?= 12_gpu_timing.ipynb
# Compiled-artefact caches. TorchInductor's FX-graph cache is keyed without the CPU's vector
# instruction set (chapter 10; tests/project/test_compile_caches.py): a kernel generated under one
# ATEN_CPU_CAPABILITY and served to a run under another gives wrong numbers or does not
# compile. So every run that executes code starts with empty caches of its own (TorchInductor's
# and Triton's), in the folder given, removed and made anew: $(call own_caches,FOLDER) cmd ...
CACHES ?= $(abspath _build/caches)
own_caches = rm -rf $(1) && mkdir -p $(1) && export TORCHINDUCTOR_CACHE_DIR=$(1)/inductor TRITON_CACHE_DIR=$(1)/triton &&
# Each run of the chapters leaves a JUnit report, and scripts/run_status.py records from it, in
# the run's own environment, each notebook's wall time, result and failed cells, the versions
# and the CPU kernel set: _build/status/RUN.json, from which `make book` renders the page
# "Execution status". A run that fails is recorded too: $(call record,RUN,EDITION[,--kind check])
# goes after the run's command and keeps its exit status.
STATUS ?= $(abspath _build/status)
export POSENC_STATUS := $(STATUS)
junit = rm -f $(STATUS)/$(1).xml $(STATUS)/$(1).json && mkdir -p $(STATUS) &&
record = --junitxml=$(STATUS)/$(1).xml; rc=$$?; $(abspath $(PY)) $(abspath scripts/run_status.py) record $(1) --xml $(STATUS)/$(1).xml --edition $(2) $(3); exit $$rc

.PHONY: book book-en pdf test lab lint lint-and-unit unit nbval nbval-cpus nbval-elsewhere index site notebooks lock serve clean clean-site checks gpu-wheels gpu-record gpu-record-dry-run help

help:
	@echo "make book       set up .venv if missing and build the site into $(HTML)"
	@echo "make test       every check: lint, unit and property tests, nbval natively and under"
	@echo "                other CPU kernels, chapters run outside the repository, installs"
	@echo "                resolved from the public index, book build, site checks"
	@echo "make pdf        the whole book as one PDF, $(HTML)/posenc-book.pdf (needs Chromium)"
	@echo "make lab        JupyterLab on the chapters"
	@echo "make notebooks  re-execute every chapter top to bottom, sync the MyST twins and the"
	@echo "                Chinese editions"
	@echo "make gpu-record chapter 12's GPU timings, on a machine with an NVIDIA GPU (README: With a GPU)"
	@echo "make lock       re-pin requirements*.txt from pyproject.toml against the public index"
	@echo "make serve      serve $(HTML) on http://localhost:$(PORT)"

$(VENV)/.created:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "The book needs Python 3.11 or newer; '$(PYTHON)' is $$($(PYTHON) --version 2>&1 || echo missing)."; \
	  echo "Pick another interpreter, for example: make PYTHON=python3.12 $(MAKECMDGOALS)"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "Could not create $(VENV). On Debian/Ubuntu: sudo apt-get install python3-venv (or python3.11-venv)"; exit 1; }
	touch $@

# packaging (its pinned version) first, on its own: scripts/check_index.py needs only it and pip,
# so `make test` runs that check while the rest of .venv installs.
$(VENV)/.packaging: $(VENV)/.created requirements-test.txt
	$(INSTALL) --quiet --no-deps $$(grep -m1 '^packaging==' requirements-test.txt)
	touch $@

$(VENV)/.torch: $(VENV)/.packaging
	$(INSTALL) --quiet --retries 1 --no-deps torch==2.13.0 $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	touch $@

$(VENV)/.book: $(VENV)/.torch requirements.txt pyproject.toml
	$(INSTALL) --quiet -r requirements.txt
	$(INSTALL) --quiet --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.test: $(VENV)/.book requirements-test.txt
	$(INSTALL) --quiet -r requirements-test.txt
	touch $@

# The three editions are built side by side (each log in _build/<edition>.log), then the
# Chinese ones are placed under $(HTML)/zh-hans and $(HTML)/zh-hant, sharing the English
# edition's static files and figures (scripts/share_assets.py).
book: $(VENV)/.book
	@mkdir -p _build
	$(MAKE) --no-print-directory -j3 book-en $(addprefix book-,$(EDITIONS))
	@for ed in $(EDITIONS); do rm -rf $(HTML)/$$ed && cp -r _build/$$ed/_build/html $(HTML)/$$ed; done
	$(PY) scripts/share_assets.py $(HTML)
	@echo "Book: $(abspath $(HTML))/index.html (简体中文: zh-hans/index.html, 繁體中文: zh-hant/index.html)"

book-en:
	$(VENV)/bin/jupyter-book build . --builder html -n -W --keep-going > _build/en.log 2>&1 || { cat _build/en.log; exit 1; }
	@grep -E "build succeeded|WARNING" _build/en.log || true

book-zh-%:
	$(VENV)/bin/jupyter-book build zh-$* --path-output _build/zh-$* --builder html -n -W --keep-going > _build/zh-$*.log 2>&1 || { cat _build/zh-$*.log; exit 1; }
	@grep -E "build succeeded|WARNING" _build/zh-$*.log || true

# The whole book as one PDF, printed by Chromium from the site's own HTML (scripts/build_pdf.py).
pdf: book $(VENV)/.test
	$(PY) scripts/build_pdf.py

lab: $(VENV)/.book
	$(VENV)/bin/jupyter lab book/

lint: $(VENV)/.test
	$(PY) -m ruff check posenc posenc_book tests scripts book/_ext
	$(PY) -m ruff format --check posenc posenc_book tests scripts book/_ext
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(VENV)/bin/zizmor --offline --quiet .github/workflows/

unit: $(VENV)/.test
	$(call own_caches,$(CACHES)/unit) $(PY) -m pytest -q -n 2 tests --ignore=tests/site

nbval: $(VENV)/.test
	$(call junit,nbval) $(call own_caches,$(CACHES)/nbval) export PYTHONPATH=$(PLUGINS) && $(PY) $(NBVAL) tests/nbval_sanitize.cfg $(call slow_first,$(CHAPTERS)) $(call record,nbval,en)

# The same comparison with the kernels ATen picks on an AVX2 machine.
nbval-cpus: $(VENV)/.test
	$(call junit,nbval-cpus) $(call own_caches,$(CACHES)/nbval-cpus) export ATEN_CPU_CAPABILITY=avx2 $(ONE_THREAD) PYTHONPATH=$(PLUGINS) && $(PY) $(NBVAL) tests/nbval_sanitize.cfg $(call slow_first,$(HANT)) $(call record,nbval-cpus,zh-hant)

# Every chapter (Simplified edition) copied to a folder outside the repository and compared there, with posenc
# installed from its wheel (so its data files must ship in it) and ATen's generic kernels;
# then chapter 12 once more with Triton hidden, as on a machine without it.
nbval-elsewhere: $(VENV)/.test
	rm -rf $(ELSEWHERE) && mkdir -p $(ELSEWHERE)/site $(ELSEWHERE)/no-triton/triton $(ELSEWHERE)/zh-hans $(ELSEWHERE)/plugins
	$(PIP) wheel --quiet --no-deps --no-build-isolation -w $(ELSEWHERE) . && rm -rf build
	$(INSTALL) --quiet --no-deps --target $(ELSEWHERE)/site $(ELSEWHERE)/posenc-*.whl
	cp $(HANS) tests/nbval_sanitize.cfg $(ELSEWHERE)/zh-hans/ && cp tests/plugins/nbval_kernels.py $(ELSEWHERE)/plugins/
	echo 'raise ImportError("Triton is hidden: chapters must run without it")' > $(ELSEWHERE)/no-triton/triton/__init__.py
	$(call junit,nbval-elsewhere) $(call own_caches,$(ELSEWHERE)/caches/chapters) cd $(ELSEWHERE)/zh-hans && export PYTHONPATH=$(ELSEWHERE)/site:$(ELSEWHERE)/plugins ATEN_CPU_CAPABILITY=default $(ONE_THREAD) && \
	  $(abspath $(PY)) -c 'import posenc, posenc_book; assert all(m.__file__.startswith("$(ELSEWHERE)/site/") for m in (posenc, posenc_book))' && \
	  $(abspath $(PY)) $(NBVAL) nbval_sanitize.cfg -p no:cacheprovider --rootdir . $(call slow_first,$(notdir $(HANS))) \
	  $(call record,nbval-elsewhere,zh-hans)
	$(call junit,no-triton) $(call own_caches,$(ELSEWHERE)/caches/no-triton) cd $(ELSEWHERE) && export PYTHONPATH=$(ELSEWHERE)/no-triton:$(ELSEWHERE)/site:$(ELSEWHERE)/plugins $(ONE_THREAD) && \
	  $(abspath $(PY)) -c 'from posenc.triton_rope import triton_available; assert not triton_available()' && \
	  $(abspath $(PY)) $(NBVAL_LAX) zh-hans/$(NO_TRITON_CHAPTER) $(call record,no-triton,zh-hans,--kind check)

# Every requirements file resolves from the public package index alone.
index: $(VENV)/.packaging
	$(PY) scripts/check_index.py

site: $(VENV)/.test
	$(PY) -m pytest -q -n 2 --dist worksteal tests/site

# The tests build the site from scratch: no page, figure or search entry left over from an
# earlier build (`make book` alone rebuilds only what changed).
clean-site:
	rm -rf $(HTML) _build/.doctrees _build/jupyter_execute $(addprefix _build/,$(EDITIONS))

# The public-index check runs while .venv installs (pip installs on one core: the other is
# free), then beside lint and the unit tests.
test: checks $(NBVAL_RUNS) clean-site book pdf site

checks: $(VENV)/.packaging
	$(MAKE) --no-print-directory -j3 index lint-and-unit

# (the three of checks' job slots: index, lint, unit)
lint-and-unit: $(VENV)/.test
	$(MAKE) --no-print-directory lint unit

# Everything derived, in order, each file by its one writer (scripts/generate.py --check says what is stale).
notebooks: $(VENV)/.test
	$(call own_caches,$(CACHES)/notebooks) $(PY) scripts/generate.py

lock:
	$(PYTHON) scripts/lock_requirements.py

# Chapter 12's GPU timings in one command (scripts/gpu_record.py): the kernel checked on the
# GPU, then the whole benchmark, written to posenc_book/data/. It needs no network: the wheels
# it carries (Liger-Kernel's RoPE) are downloaded into .whl/ beforehand by gpu-wheels.
LIGER := liger-kernel==0.8.5
gpu-wheels: $(VENV)/.book
	$(PIP) download --quiet --no-deps --only-binary=:all: -d .whl $(LIGER)

gpu-record:
	$(or $(wildcard $(PY)),python3) scripts/gpu_record.py

# The same command without a GPU: CPU tensors in Triton's interpreter, quick shapes, a
# temporary folder for the JSON.
gpu-record-dry-run: $(VENV)/.test gpu-wheels
	$(PY) scripts/gpu_record.py --dry-run

serve:
	@test -f $(HTML)/index.html || { echo "no site yet: run make book"; exit 1; }
	$(PYTHON) -m http.server $(PORT) --bind 127.0.0.1 --directory $(HTML)

clean:
	rm -rf _build
