"""tests/harness/molecule_nodes.py: the `podman run` each Molecule platform gets, and the keys it refuses.

Every scenario's nodes are started by it (extensions/molecule/_shared/create.yml), so the scenarios are its
real test; these pin what a platform's keys become and that an unknown key stops the run by name instead of
starting a node without the option.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "harness" / "molecule_nodes.py"
spec = importlib.util.spec_from_file_location("molecule_nodes", SCRIPT)
molecule_nodes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(molecule_nodes)

WORKLOAD_NODE = {
    "name": "workload-docker",
    "image": "localhost/gpufleet/debian13-gpusim:latest",
    "pre_build_image": True,
    "command": "/sbin/init",
    "systemd": "always",
    "network": "host",
    "privileged": True,
    "devices": ["/dev/null:/dev/nvidiactl"],
    "volumes": ["/var/cache/gpufleet/ccache:/var/cache/gpufleet-ccache:rw"],
    "extra_opts": ["--cgroupns=private", "--tmpfs=/var/lib/docker:rw,exec,size=2g"],
    "groups": ["gpu_nodes", "debian13", "docker"],
}


def test_every_key_of_a_platform_reaches_podman_run():
    assert molecule_nodes.run_argv("podman", WORKLOAD_NODE) == [
        "podman", "run", "--detach", "--name=workload-docker", "--hostname=workload-docker", "--label=owner=molecule",
        "--network=host", "--systemd=always", "--privileged", "--device=/dev/null:/dev/nvidiactl",
        "--volume=/var/cache/gpufleet/ccache:/var/cache/gpufleet-ccache:rw",
        "--cgroupns=private", "--tmpfs=/var/lib/docker:rw,exec,size=2g",
        "localhost/gpufleet/debian13-gpusim:latest", "/sbin/init",
    ]  # fmt: skip


def test_a_key_it_does_not_pass_on_is_refused_by_name():
    with pytest.raises(molecule_nodes.NodeError, match=r"platform n1: key\(s\) published_ports, tmpfs are not passed"):
        molecule_nodes.run_argv("podman", {"name": "n1", "image": "i", "tmpfs": ["/run"], "published_ports": ["80:80"]})


def test_a_dockerfile_build_is_refused():
    with pytest.raises(molecule_nodes.NodeError, match="pre_build_image: false"):
        molecule_nodes.run_argv("podman", {"name": "n1", "image": "i", "pre_build_image": False})


def fake_podman(tmp_path: Path, fail_on: str = "") -> Path:
    """A podman that records its calls, and fails `run` for one name: the script's own control flow is what is tested."""
    script = tmp_path / "podman"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >>"{tmp_path}/calls"\n'
        f'case "$*" in run*--name={fail_on}\\ *) [ -n "{fail_on}" ] && {{ echo "name in use" >&2; exit 125; }} ;; esac\n'
        "exit 0\n"
    )
    script.chmod(0o755)
    return script


def call(tmp_path: Path, action: str, platforms: list[dict], podman: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MOLECULE_PODMAN_EXECUTABLE=str(podman))
    return subprocess.run([sys.executable, str(SCRIPT), action], input=json.dumps(platforms), env=env, capture_output=True, text=True, check=False)


def test_create_removes_leftovers_first_and_starts_each_platform(tmp_path):
    platforms = [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}]
    result = call(tmp_path, "create", platforms, fake_podman(tmp_path))
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "rm --force --ignore --time=0 a b"
    assert sorted(calls[1:]) == [
        "run --detach --name=a --hostname=a --label=owner=molecule i",
        "run --detach --name=b --hostname=b --label=owner=molecule i",
    ]


def test_a_node_that_does_not_start_fails_create_naming_it(tmp_path):
    platforms = [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}]
    result = call(tmp_path, "create", platforms, fake_podman(tmp_path, fail_on="b"))
    assert result.returncode == 1
    assert result.stderr.startswith("b: ") and "--name=b" in result.stderr and "name in use" in result.stderr
    assert "a:" not in result.stderr


def test_destroy_removes_all_in_one_call(tmp_path):
    result = call(tmp_path, "destroy", [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}], fake_podman(tmp_path))
    assert result.returncode == 0
    assert (tmp_path / "calls").read_text().splitlines() == ["rm --force --ignore --time=0 a b"]


def test_a_scenario_network_is_made_before_its_nodes_and_removed_after_them(tmp_path):
    platforms = [{"name": "a", "image": "i", "network": "bnd-net"}, {"name": "b", "image": "i", "network": "host"}]
    assert call(tmp_path, "create", platforms, fake_podman(tmp_path)).returncode == 0
    created = (tmp_path / "calls").read_text().splitlines()
    assert created[:4] == ["rm --force --ignore --time=0 a b", "network exists bnd-net", "network rm --force bnd-net", "network create bnd-net"]
    assert sorted(created[4:]) == [
        "run --detach --name=a --hostname=a --label=owner=molecule --network=bnd-net i",
        "run --detach --name=b --hostname=b --label=owner=molecule --network=host i",
    ]
    (tmp_path / "calls").unlink()
    assert call(tmp_path, "destroy", platforms, fake_podman(tmp_path)).returncode == 0
    assert (tmp_path / "calls").read_text().splitlines() == [
        "rm --force --ignore --time=0 a b",
        "network exists bnd-net",
        "network rm --force bnd-net",
    ]
