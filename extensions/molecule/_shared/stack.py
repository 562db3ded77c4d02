"""Helpers for the container-stack scenarios' testinfra tests (not a test file).

The fault tests run our roles once more against a live node with other
settings, through ansible-playbook and the scenario's own inventory and
ansible.cfg (Molecule exports both), and look at what the run left behind.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
import tomllib
from contextlib import contextmanager
from pathlib import Path

import yaml


class PlaybookRun:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.rc = proc.returncode
        self.output = proc.stdout + proc.stderr

    @property
    def failed(self) -> bool:
        return self.rc != 0

    def __repr__(self) -> str:  # pytest shows this when an assertion fails
        return "PlaybookRun(rc={0})\n{1}".format(self.rc, self.output[-6000:])


@functools.cache
def kube_api():
    """The scenario's cluster (tests/harness/kube.sh, started by _shared/kube.yml) as someone else, site-operator:
    the kubernetes package's client module and an API client. Reading as site-operator never shows in the audit
    log of the collection's requests."""
    from kubernetes import client, config

    kubeconfig = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "kube" / "operator.kubeconfig"
    return client, config.new_client_from_config(str(kubeconfig))


def kube_core():
    """kube_api's core/v1 API: Nodes and Pods."""
    client, api = kube_api()
    return client.CoreV1Api(api)


def run_role(host, role: str, extra_vars: dict | None = None, check: bool = False, tasks_from: str = "main") -> PlaybookRun:
    """Run gpufleet.nvidia.<role> on `host` with `extra_vars` (highest precedence)."""
    play = [
        {
            "name": "Fault test: {0}".format(role),
            "hosts": host.backend.host,
            "gather_facts": False,
            "tasks": [{"ansible.builtin.import_role": {"name": "gpufleet.nvidia." + role, "tasks_from": tasks_from}}],
        }
    ]
    return run_playbook(play, extra_vars, check)


def scenario_playbook(playbook: str | Path, *args: str, timeout: int = 300, **env_extra: str) -> subprocess.CompletedProcess:
    """ansible-playbook `playbook` `args` over the scenario's nodes; its output (stdout and stderr together) as text.

    As Molecule runs the scenario: its inventory and ansible.cfg (Molecule exports both; the ephemeral
    directory's where a test runs without them), this checkout as the collection; `env_extra` on top.
    """
    ephemeral = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
    root = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd()))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", **env_extra)
    env.setdefault("ANSIBLE_CONFIG", str(ephemeral / "ansible.cfg"))
    env["ANSIBLE_COLLECTIONS_PATH"] = str(root / "build" / "collections")
    inventory = os.environ.get("MOLECULE_INVENTORY_FILE", str(ephemeral / "inventory" / "ansible_inventory.yml"))
    return subprocess.run(
        ["ansible-playbook", str(playbook), "-i", inventory, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_playbook(play: list, extra_vars: dict | None = None, check: bool = False) -> PlaybookRun:
    with tempfile.TemporaryDirectory() as tmp:
        book = os.path.join(tmp, "play.yml")
        with open(book, "w", encoding="utf-8") as handle:
            yaml.safe_dump(play, handle)
        cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], book]
        if extra_vars:
            varfile = os.path.join(tmp, "vars.json")
            with open(varfile, "w", encoding="utf-8") as handle:
                json.dump(extra_vars, handle)
            cmd += ["-e", "@" + varfile]
        if check:
            cmd.append("--check")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    return PlaybookRun(proc)


def node(host):
    """The node the tests talk to: the host itself.

    ../conftest.py already sends an Ansible-backed podman host's commands
    through `podman exec`, and testinfra gives Docker nodes its docker
    backend, so no second host is needed for speed.
    """
    return host


def host_vars(host) -> dict:
    """The node's inventory variables, templated by Ansible (read once per node)."""
    return _host_vars(host.backend.host, host)


_VARS: dict[str, dict] = {}


def _host_vars(name: str, host) -> dict:
    if name not in _VARS:
        _VARS[name] = host.ansible.get_variables()
    return _VARS[name]


def toml_file(host, path: str) -> dict:
    return tomllib.loads(node(host).file(path).content_string)


@contextmanager
def set_aside(host, path: str, keep_copy: bool = True):
    """A file on the node put back as it was after the block; keep_copy=False moves it away, so the block sees it gone."""
    host.check_output("{0} {1} {1}.test-aside".format("cp -p" if keep_copy else "mv", path))
    try:
        yield
    finally:
        host.check_output("mv {0}.test-aside {0}".format(path))


def sha256(host, path: str) -> str | None:
    f = node(host).file(path)
    return f.sha256sum if f.exists else None


def mirror_url(host) -> str:
    return host_vars(host)["gpufleet_test_mirror_url"]


def mirror_fingerprint(host) -> str:
    """The fingerprint of the test mirror's signing key, read on the controller."""
    key = subprocess.run(["curl", "-fsS", mirror_url(host) + "/keys/gpufleet-mirror.asc"], capture_output=True, check=True).stdout
    colons = subprocess.run(["gpg", "--batch", "--show-keys", "--with-colons"], input=key, capture_output=True, check=True).stdout.decode()
    return next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
