# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""meta/execution-environment.yml, read by ansible-builder as AWX users build it.

`ansible-builder create` validates the definition (schema 3) and writes the
build context; the Containerfile must install our bindep.txt, requirements.txt
and the collection. ansible-builder also reads the *installed* collection's
meta/execution-environment.yml during the build, with paths relative to the
collection root: the generated introspection script is run on an installed
copy to prove that reading works too. No container is built.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
META = ROOT / "meta"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", PATH="{0}{1}{2}".format(BIN, os.pathsep, os.environ.get("PATH", "")))
    return subprocess.run(list(args), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, check=False)


def version() -> str:
    return yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A private copy of the EE's side of the checkout: meta/ and build/.

    Both unit-test lanes (make units units-oldest) run these tests at the
    same time; one lane's `collection build --force` must not rewrite the
    tarball the other's ansible-builder is reading, so neither uses the
    checkout's build/. meta/'s files are copied, links followed.
    """
    path = tmp_path_factory.mktemp("ee-tree")
    shutil.copytree(META, path / "meta")
    return path


@pytest.fixture(scope="module")
def tarball(tree: Path) -> Path:
    """The collection as `make build` builds it (the EE installs it from ../build/, seen from meta/)."""
    result = run(str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(tree / "build"), ".")
    assert result.returncode == 0, result.stdout
    path = tree / "build" / "gpufleet-nvidia-{0}.tar.gz".format(version())
    assert path.is_file()
    return path


@pytest.fixture(scope="module")
def context(tree: Path, tarball: Path, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ee") / "context"
    result = run(str(BIN / "ansible-builder"), "create", "-f", str(tree / "meta" / "execution-environment.yml"), "-c", str(path))
    assert result.returncode == 0, result.stdout
    assert "No matches" not in result.stdout, result.stdout
    return path


def locked_ansible_core(lock: str) -> str:
    return re.search(r"^ansible-core==(\S+)$", (ROOT / "tests" / "harness" / lock).read_text(), re.MULTILINE).group(1)


def test_definition_is_schema_3_with_a_tested_ansible_core():
    """The EE's ansible-core is one `make test` runs, and one its Python can run.

    The main venv's (requirements.txt) needs Python >= 3.12 on the
    controller; the oldest venv's (requirements-oldest.txt) runs on 3.11,
    which EL 9 images ship as python3.11.
    """
    definition = yaml.safe_load((META / "execution-environment.yml").read_text())
    assert definition["version"] == 3
    pinned = definition["dependencies"]["ansible_core"]["package_pip"]
    newest, oldest = locked_ansible_core("requirements.txt"), locked_ansible_core("requirements-oldest.txt")
    assert pinned in ("ansible-core=={0}".format(newest), "ansible-core=={0}".format(oldest)), "the EE pins {0}; make test runs {1} and {2}".format(
        pinned, newest, oldest
    )
    python = re.search(r"python(3\.\d+)$", definition["dependencies"]["python_interpreter"]["python_path"])
    if python and tuple(int(n) for n in python.group(1).split(".")) < (3, 12):
        assert pinned == "ansible-core=={0}".format(oldest), "the EE's {0} cannot run ansible-core {1} (Python >= 3.12): pin {2}".format(
            python.group(0), newest, oldest
        )


def test_containerfile_installs_our_requirements_and_the_collection(context: Path):
    containerfile = (context / "Containerfile").read_text()
    build = context / "_build"
    assert "COPY _build/bindep.txt bindep.txt" in containerfile
    assert "COPY _build/requirements.txt requirements.txt" in containerfile
    assert "--user-pip=requirements.txt --user-bindep=bindep.txt" in containerfile
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile
    assert "ansible-galaxy collection install --offline /build/collections/gpufleet-nvidia-*.tar.gz" in containerfile
    assert (build / "bindep.txt").read_text() == (META / "bindep.txt").read_text()
    assert (build / "requirements.txt").read_text() == (META / "requirements.txt").read_text()
    # kubernetes.core drains Kubernetes nodes in playbooks/upgrade.yml.
    assert yaml.safe_load((build / "requirements.yml").read_text()) == {"collections": [{"name": "kubernetes.core", "version": ">=6.2.0"}]}
    assert (build / "collections" / "gpufleet-nvidia-{0}.tar.gz".format(version())).is_file()
    # The build context names no outside registry: the base image is the user's to give.
    assert re.search(r'^ARG EE_BASE_IMAGE="localhost/', containerfile, re.MULTILINE)


def test_root_requirement_files_are_the_ee_files():
    """Introspection reads <collection>/bindep.txt and requirements.txt; they must be meta/'s files."""
    for name in ("bindep.txt", "requirements.txt"):
        assert (ROOT / name).resolve() == (META / name).resolve()


def test_installed_collection_declares_its_requirements_to_ansible_builder(tarball: Path, context: Path, tmp_path):
    collections = tmp_path / "collections"
    result = run(str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--force", str(tarball), "-p", str(collections))
    assert result.returncode == 0, result.stdout
    # The build context's own introspection script, as the EE build runs it over the installed collections.
    result = run(
        sys.executable,
        str(context / "_build" / "scripts" / "introspect.py"),
        "introspect",
        "--user-pip=requirements.txt",
        "--user-bindep=bindep.txt",
        str(collections),
        cwd=context / "_build",
    )
    assert result.returncode == 0, result.stdout
    found = yaml.safe_load(result.stdout)
    ours = [line.split("#")[0].strip() for line in found["system"] if line.endswith("from collection gpufleet.nvidia")]
    wanted = [line for line in (META / "bindep.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert ours == wanted
    wanted = [line for line in (META / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert wanted == ["kubernetes>=37.0.2"]
    assert [line.split("#")[0].strip() for line in found["python"] if line.endswith("from collection gpufleet.nvidia")] == wanted
