# gpufleet.nvidia — the two commands a newcomer needs:
#   make demo   build a simulated 8 x A100 node and run playbooks/site.yml on it
#   make test   lint, sanity, unit tests and every Molecule scenario
# Everything else here is a step of those two. Run as root on Debian 12/13.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

HARNESS := tests/harness
PHASE := $(HARNESS)/phase.sh
# Two lanes of ansible-core: the tool venv on the newest (2.21,
# tests/harness/requirements.in) and the oldest meta/runtime.yml claims
# (2.19, requirements-oldest.in); sanity and the unit tests run on both.
VENV := .venv
VENV_OLDEST := .venv-oldest
# ansible-core 2.20+ needs Python >= 3.12 on the controller: the newest one
# here (find-python.sh: python3.1x on PATH, else pyenv's). Without one the
# tool venv is ansible-core 2.19 on the system Python (venv.sh says so).
PYTHON_SYSTEM := $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)
PYTHON_NEWEST := $(shell $(HARNESS)/find-python.sh || true)
COLLECTION_LINK := build/collections/ansible_collections/gpufleet/nvidia
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/build/collections
export GPUFLEET_ROOT := $(CURDIR)

.PHONY: help demo test check host host-toolchain venv venv-oldest sim collection images images-all demo-image mirror go-tools real-nvml \
        lint sanity sanity-oldest sanity-changed units units-oldest molecule molecule-smoke awx faults faults-all build clean

help:
	@echo "make demo   - simulated GPU node + playbooks/site.yml (see README.md)"
	@echo "make test   - yamllint, ansible-lint, ruff, ansible-test sanity and unit tests (ansible-core 2.21"
	@echo "              and 2.19, the newest and the oldest claimed), Molecule"
	@echo "make check  - the inner loop: lint, sanity on changed files, unit tests, one scenario"

# What the harness sets up: all (make test) or what the demo installs, no
# more (bootstrap-host.sh and mirror-seed.sh take the set).
SET ?= all

# The demo's node image and its mirror side by side, and the Go builds (the
# toolkit and cri-tools; the node runs Debian's containerd) from the start,
# beside the venv and the host's Podman download: debootstrap, uv and apt
# wait on the network, the Go builds on the CPUs. (Starting the node's
# debootstrap from the start too was measured, when containerd was built as
# well: it slowed the Go builds, the longest path, by more than it gained;
# 383 s cold against 362.) `make demo test` in one make would set up the
# demo's set only: run them one by one. Every phase is timed:
# `tests/harness/phase.sh table` shows where the time went.
demo:
	@$(PHASE) start
	@$(MAKE) --no-print-directory --jobs=4 SET=demo go-tools collection mirror demo-image
	$(HARNESS)/demo.sh

# One make, every phase timed (tests/harness/phase.sh) and the table printed
# at the end, also after a failure. Downloads and image builds wait mostly on
# the network, so lint, sanity and the unit tests run beside them. A job
# for each of the nine goals and one for a prerequisite: Molecule, the
# longest path, must not wait for a free job slot; it starts as soon as its
# images and the mirror are ready (with seven, it waited on a cold machine
# until a sanity lane or the Go builds ended). Sanity and the unit
# tests run twice: on the newest ansible-core (.venv) and on the oldest
# meta/runtime.yml claims (.venv-oldest); the two lanes share no cache
# (sanity.sh, PYTEST_CACHE). Each job's output is printed whole when it ends.
# A run stopped from outside (a CI time limit) still prints the table, with
# the phases it was still running: the make runs in the background so that
# the shell's trap answers at once, stops it, and prints.
test:
	@$(PHASE) start
	@status=0; \
	  trap 'kill -TERM $$lanes 2>/dev/null; wait $$lanes || true; $(PHASE) table; \
	        echo "[harness] make test was stopped from outside; the table says what was still running" >&2; exit 143' TERM INT HUP; \
	  $(MAKE) --no-print-directory --jobs=10 --output-sync=target \
	  go-tools lint sanity sanity-oldest units units-oldest molecule awx faults & lanes=$$!; \
	  wait $$lanes || status=$$?; \
	  $(PHASE) table; exit $$status

# The inner loop (docs/contributing.md): lint, sanity on the files changed
# against main, the unit tests and one smoke scenario. About 5 minutes warm.
CHECK_SCENARIO ?= nvml_info
check:
	@$(PHASE) start
	@status=0; $(MAKE) --no-print-directory --jobs=4 --output-sync=target lint sanity-changed units molecule-smoke || status=$$?; \
	  $(PHASE) table; exit $$status

# Two steps: the toolchain (compiler, Python venv; on most machines already
# there) that the Go builds, the venvs and the simulated NVML need, then the
# rest (Podman, debootstrap, the mirror's tools), which a fresh machine
# downloads while those run.
host-toolchain:
	@$(PHASE) run "host set-up: toolchain" $(HARNESS)/bootstrap-host.sh toolchain

host: host-toolchain
	@$(PHASE) run "host set-up" $(HARNESS)/bootstrap-host.sh $(SET)

venv: host-toolchain
	@$(PHASE) run venv $(HARNESS)/venv.sh $(or $(PYTHON_NEWEST),$(PYTHON_SYSTEM))

venv-oldest: host-toolchain
	@$(PHASE) run "venv (oldest ansible-core)" $(HARNESS)/venv.sh $(PYTHON_SYSTEM) oldest

sim: host-toolchain
	@$(PHASE) run "simulated NVML" $(HARNESS)/sim.sh

collection: $(COLLECTION_LINK)
$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn $(CURDIR) $@

# The simulated GPU nodes every scenario starts from; images-all adds the
# nodes with a Debian kernel that the driver scenario builds modules for.
images: host venv sim
	@$(PHASE) run "images: debian12 gpusim" $(HARNESS)/images.sh gpusim debian12
	@$(PHASE) run "images: debian13 gpusim" $(HARNESS)/images.sh gpusim debian13

demo-image: host venv sim
	@$(PHASE) run "images: debian13 gpusim" $(HARNESS)/images.sh gpusim debian13 >/dev/null

images-all: images
	@$(PHASE) run "images: debian12 kernel" $(HARNESS)/images.sh kernel debian12
	@$(PHASE) run "images: debian13 kernel" $(HARNESS)/images.sh kernel debian13

# The mirror's script runs under the venv's python (first in PATH): it must
# wait for the venv, or it starts a half-made one. The Go builds need no
# venv: go-tools starts them after the toolchain step, on a PATH without it, and
# a seed that needs a pin still being built waits for it (go-build.sh), so
# each tool is packaged while the next one builds.
mirror: host venv
	@$(HARNESS)/mirror-seed.sh $(SET)

go-tools: host-toolchain
	@PATH=$(subst $(CURDIR)/$(VENV)/bin:,,$(PATH)) $(PHASE) run "Go tools ($(SET))" $(HARNESS)/go-tools.sh $(SET)

real-nvml: mirror
	@$(HARNESS)/real-nvml.sh >/dev/null

# ruff reads ruff.toml. `ruff format --check` fails on any file the
# formatter would change: run `ruff format` before committing.
lint: host venv collection
	@$(PHASE) run yamllint yamllint --strict .
	@$(PHASE) run "ruff check" ruff check --no-cache .
	@$(PHASE) run "ruff format" ruff format --no-cache --check .
	@$(PHASE) run ansible-lint ansible-lint

sanity: host venv
	@$(PHASE) run sanity $(HARNESS)/sanity.sh

# The same under the oldest claimed ansible-core: its ansible-test, its
# sanity tests (tests/sanity/ignore-<minor>.txt), its own ansible-test HOME
# (sanity.sh), so the two can run side by side.
sanity-oldest: host venv-oldest
	@PATH=$(CURDIR)/$(VENV_OLDEST)/bin:$$PATH $(PHASE) run "sanity (oldest ansible-core)" $(HARNESS)/sanity.sh

# Sanity on what differs from main (committed, staged, unstaged, untracked).
sanity-changed: host venv
	@$(PHASE) run "sanity (changed files)" $(HARNESS)/sanity.sh --changed-from "$${GPUFLEET_BASE:-main}"

# Each lane its own pytest cache (tests/unit/.pytest_cache would be written
# by both at once). --durations: every run's log names its slowest tests,
# where a CI run that is too long is cut next.
PYTEST_CACHE := $(CURDIR)/build/pytest-cache
units: venv sim real-nvml collection
	@GPUFLEET_REAL_LIBNVML=$$($(HARNESS)/real-nvml.sh) $(PHASE) run units python -m pytest -q --durations=25 tests/unit \
	  -o cache_dir=$(PYTEST_CACHE)/units

# The unit tests under the oldest claimed ansible-core, but for those of the
# simulated NVML and of the harness: they test the test ground, which never
# imports ansible-core.
units-oldest: venv-oldest sim real-nvml collection
	@lib=$$($(HARNESS)/real-nvml.sh); PATH=$(CURDIR)/$(VENV_OLDEST)/bin:$$PATH GPUFLEET_REAL_LIBNVML=$$lib \
	  $(PHASE) run "units (oldest ansible-core)" python -m pytest -q --durations=25 tests/unit \
	  -o cache_dir=$(PYTEST_CACHE)/units-oldest --ignore=tests/unit/nvml_sim --ignore=tests/unit/harness

molecule: venv collection images-all mirror
	$(HARNESS)/molecule.sh

molecule-smoke: venv collection images mirror
	$(HARNESS)/molecule.sh $(CHECK_SCENARIO)

# The AWX path (docs/awx.md): the execution environment built from
# meta/execution-environment.yml, and site.yml jobs run in it through
# ansible-runner against a simulated node over SSH.
awx: venv images mirror
	@$(PHASE) run "AWX: EE and jobs" $(HARNESS)/awx-ee.sh test

# The fault-injection suite (tests/faults/run.py, docs/faults.md): fresh
# converges killed at named points (the controller, the connection, the
# node's power), each run again and compared with a clean converge, and a
# converge while apt's lists lock is held. make test runs one point (power
# lost inside dpkg); faults-all runs every point (about 45 minutes on two cores).
faults: venv collection images mirror
	@$(PHASE) run "faults (power lost inside dpkg, apt busy)" python tests/faults/run.py

faults-all: venv collection images mirror
	@$(PHASE) run "faults (every point)" python tests/faults/run.py --all

build: venv
	mkdir -p build
	ansible-galaxy collection build --force --output-path build .

clean:
	-python3 $(HARNESS)/mirror.py stop
	-podman rm -f gpufleet-demo-node
	rm -rf build tests/nvml-sim/build tests/output
