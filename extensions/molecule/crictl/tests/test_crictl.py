"""crictl from the mirror: the exact verified artifact, crictl.yaml, and the faults."""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
import urllib.request

import yaml

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import host_vars, mirror_url, node, run_role, sha256

VERSION = "v1.36.0"
TARBALL = "crictl-{0}-linux-amd64.tar.gz".format(VERSION)
ENDPOINTS = {"containerd": "unix:///run/containerd/containerd.sock", "crio": "unix:///var/run/crio/crio.sock"}


def mirror_file(host, path: str) -> bytes:
    with urllib.request.urlopen(mirror_url(host) + "/files/" + path, timeout=30) as response:
        return response.read()


def genuine_digest(host) -> str:
    return mirror_file(host, "cri-tools/{0}/{1}.sha256".format(VERSION, TARBALL)).decode().strip()


def test_installed_binary_is_the_one_in_the_verified_tarball(host):
    data = mirror_file(host, "cri-tools/{0}/{1}".format(VERSION, TARBALL))
    assert hashlib.sha256(data).hexdigest() == genuine_digest(host)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile("crictl")
        expected = hashlib.sha256(member.read()).hexdigest()
    f = node(host).file("/usr/local/bin/crictl")
    assert f.sha256sum == expected
    assert (f.user, f.group, f.mode) == ("root", "root", 0o755)
    assert node(host).check_output("/usr/local/bin/crictl --version").split()[-1] == VERSION


def test_crictl_yaml_points_at_the_engine(host):
    hv = host_vars(host)
    config = yaml.safe_load(node(host).file("/etc/crictl.yaml").content_string)
    endpoint = ENDPOINTS[hv.get("crictl_engine", "containerd")]
    assert config == {
        "runtime-endpoint": endpoint,
        "image-endpoint": endpoint,
        "timeout": hv.get("crictl_timeout", 10),
        "debug": hv.get("crictl_debug", False),
    }


def test_tampered_tarball_is_refused_and_nothing_installed(host):
    run = run_role(
        host,
        "crictl",
        {
            "crictl_download_url": mirror_url(host) + "/files/cri-tools-tampered",
            "crictl_install_dir": "/opt/gpufleet-tamper-test",
            "crictl_checksum_source": "table",
            "crictl_checksums": {VERSION: {"amd64": genuine_digest(host)}},
        },
    )
    assert run.failed, run
    assert "checksum mismatch" in run.output.lower(), run
    assert not node(host).file("/opt/gpufleet-tamper-test/crictl").exists
    # Nothing half-written beside where crictl would have gone, and no download left behind.
    assert node(host).check_output("find /opt -maxdepth 2 -name '.gpufleet-*'") == ""
    assert node(host).check_output("find /tmp /var/tmp -maxdepth 1 -name 'gpufleet-crictl.*'") == ""


def test_unreachable_mirror_fails_cleanly_and_changes_nothing(host):
    before = sha256(host, "/etc/crictl.yaml")
    run = run_role(
        host,
        "crictl",
        {
            "crictl_download_url": "http://127.0.0.1:9/cri-tools",
            "crictl_install_dir": "/opt/gpufleet-unreachable-test",
            "crictl_checksum_source": "release",
        },
    )
    assert run.failed, run
    assert "Connection refused" in run.output, run
    assert not node(host).file("/opt/gpufleet-unreachable-test/crictl").exists
    assert sha256(host, "/etc/crictl.yaml") == before


def test_release_without_a_known_checksum_is_an_error_before_download(host):
    run = run_role(host, "crictl", {"crictl_version": "v1.99.0", "crictl_checksum_source": "table", "crictl_install_dir": "/opt/gpufleet-unknown-test"})
    assert run.failed, run
    assert "no sha256 for crictl v1.99.0 on amd64" in run.output, run
    assert "crictl_checksums" in run.output, run
    assert not node(host).file("/opt/gpufleet-unknown-test").exists


def test_unknown_kubernetes_minor_is_an_error(host):
    run = run_role(host, "crictl", {"crictl_version": "", "crictl_kubernetes_version": "1.12"})
    assert run.failed, run
    assert "no cri-tools release is known for crictl_kubernetes_version=1.12" in run.output, run
