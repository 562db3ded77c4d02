# gpufleet.nvidia — the two commands a newcomer needs:
#   make demo   build a simulated 8 x A100 node and run playbooks/site.yml on it
#   make test   lint, sanity, unit tests and every Molecule scenario
# Everything else here is a step of those two. Run as root on Debian 12/13.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

HARNESS := tests/harness
VENV := .venv
PYTHON_FOR_VENV := $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)
COLLECTION_LINK := build/collections/ansible_collections/gpufleet/nvidia
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/build/collections
export GPUFLEET_ROOT := $(CURDIR)

.PHONY: help demo test host venv sim collection images images-all mirror real-nvml \
        lint sanity units molecule build clean

help:
	@echo "make demo   - simulated GPU node + playbooks/site.yml (see README.md)"
	@echo "make test   - yamllint, ansible-lint, ansible-test sanity, unit tests, Molecule"

demo: host venv collection mirror
	$(HARNESS)/demo.sh

# Three jobs: the image and mirror builds wait mostly on downloads, so the
# CPU-bound checks run beside them; each job's output is printed whole when it
# ends. Molecule needs all of it, so it runs last.
test:
	$(MAKE) --no-print-directory --jobs=3 --output-sync=target mirror images-all lint sanity units
	$(MAKE) --no-print-directory molecule

host:
	$(HARNESS)/bootstrap-host.sh

venv: $(VENV)/.installed
$(VENV)/.installed: $(HARNESS)/requirements.txt | host
	$(PYTHON_FOR_VENV) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r $(HARNESS)/requirements.txt
	touch $@

sim: host
	$(MAKE) -s -C tests/nvml-sim

collection: $(COLLECTION_LINK)
$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn $(CURDIR) $@

images: host venv sim
	$(HARNESS)/images.sh gpusim debian12

images-all: images
	$(HARNESS)/images.sh gpusim debian13
	$(HARNESS)/images.sh kernel debian12
	$(HARNESS)/images.sh kernel debian13

mirror: host
	$(HARNESS)/mirror-seed.sh

real-nvml: mirror
	@$(HARNESS)/real-nvml.sh >/dev/null

lint: venv collection
	yamllint --strict .
	ansible-lint

sanity: venv
	$(HARNESS)/sanity.sh

units: venv sim real-nvml collection
	GPUFLEET_REAL_LIBNVML=$$($(HARNESS)/real-nvml.sh) python -m pytest tests/unit

molecule: venv collection images-all mirror
	$(HARNESS)/molecule.sh

build: venv
	mkdir -p build
	ansible-galaxy collection build --force --output-path build .

clean:
	-python3 $(HARNESS)/mirror.py stop
	-podman rm -f gpufleet-demo-node
	rm -rf build tests/nvml-sim/build tests/output
