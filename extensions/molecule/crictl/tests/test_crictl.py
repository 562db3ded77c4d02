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
from stack import host_vars, mirror_fingerprint, mirror_url, node, run_role, scenario_playbook, sha256

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
            "crictl_checksums": {VERSION: {"amd64": genuine_digest(host)}},
        },
    )
    assert run.failed, run
    assert "checksum mismatch" in run.output.lower(), run
    assert not node(host).file("/opt/gpufleet-tamper-test/crictl").exists
    # Nothing half-written beside where crictl would have gone, and no download left behind.
    assert node(host).check_output("find /opt -maxdepth 2 -name '.gpufleet-*'") == ""
    assert node(host).check_output("find /tmp /var/tmp -maxdepth 1 -name 'gpufleet-crictl.*'") == ""


def tampered_digest(host) -> str:
    """The tampered tarball's own digest, published beside it as a compromised mirror would."""
    return mirror_file(host, "cri-tools-tampered/{0}/{1}.sha256".format(VERSION, TARBALL)).decode().strip()


def nothing_written(host, install_dir: str) -> None:
    assert not node(host).file(install_dir).exists
    assert node(host).check_output("find /opt /usr/local/bin -maxdepth 2 -name '.gpufleet-*'") == ""


def test_a_plain_http_binary_with_its_own_digest_is_refused_before_download(host):
    # Issue 37, reproduced: a fake binary and its own digest from a plain-HTTP server. Without
    # crictl_allow_insecure_transport the plan refuses the URL before the node is touched.
    run = run_role(
        host,
        "crictl",
        {
            "crictl_download_url": mirror_url(host) + "/files/cri-tools-tampered",
            "crictl_install_dir": "/opt/gpufleet-insecure-test",
            "crictl_allow_insecure_transport": False,
            "crictl_checksums": {VERSION: {"amd64": tampered_digest(host)}},
        },
    )
    assert run.failed, run
    assert "crictl_download_url {0}/files/cri-tools-tampered is fetched over http".format(mirror_url(host)) in run.output, run
    assert "crictl_allow_insecure_transport: true" in run.output, run
    assert "TASK [gpufleet.nvidia.crictl : Download, verify and put crictl in place]" not in run.output, run
    nothing_written(host, "/opt/gpufleet-insecure-test")


def test_the_mirrors_own_sha256_is_never_trusted(host):
    # Before issue 37, crictl_checksum_source: release read <tarball>.sha256 from the same server and
    # installed the tampered build. The setting is gone: the pinned (genuine) digest refuses the tarball.
    run = run_role(
        host,
        "crictl",
        {
            "crictl_download_url": mirror_url(host) + "/files/cri-tools-tampered",
            "crictl_install_dir": "/opt/gpufleet-release-sum-test",
            "crictl_checksum_source": "release",
        },
    )
    assert run.failed, run
    assert "checksum mismatch" in run.output.lower(), run
    nothing_written(host, "/opt/gpufleet-release-sum-test")


KEY_PLAY = """
- hosts: {host}
  gather_facts: false
  tasks:
    - name: A repository whose key URL carries a password
      gpufleet.nvidia.apt_signed_source:
        key_url: "{url}/keys/gpufleet-mirror.asc"
        key_fingerprint: "{fingerprint}"
        key_path: /etc/apt/keyrings/gpufleet-credentials-test.asc
        sources_path: /etc/apt/sources.list.d/gpufleet-credentials-test.sources
        sources_content: "Types: deb\nURIs: {plain}/debian\nSuites: bookworm\nComponents: main\nSigned-By: /etc/apt/keyrings/gpufleet-credentials-test.asc\n"
"""
ROLE_PLAY = """
- hosts: {host}
  gather_facts: false
  tasks:
    - name: A crictl mirror URL that carries a password
      ansible.builtin.import_role:
        name: gpufleet.nvidia.crictl
      vars:
        crictl_download_url: "{url}/files/cri-tools"
        crictl_install_dir: /opt/gpufleet-credentials-test
"""


def test_credentials_in_a_url_are_refused_and_never_in_verbose_output(host, tmp_path):
    secret = "hunter2-e6a9"
    plain = mirror_url(host)
    url = plain.replace("//", "//fleet:{0}@".format(secret), 1)
    book, role_book = tmp_path / "key.yml", tmp_path / "role.yml"
    book.write_text(KEY_PLAY.format(host=host.backend.host, url=url, plain=plain, fingerprint=mirror_fingerprint(host)))
    role_book.write_text(ROLE_PLAY.format(host=host.backend.host, url=url))
    # ANSIBLE_INJECT_INVOCATION: the module's arguments as the result echoes them (AWX stores them), also on
    # ansible-core 2.21, which leaves them out unless asked.
    key = scenario_playbook(book, "-vvv", ANSIBLE_INJECT_INVOCATION="1")
    assert key.returncode != 0, key.stdout
    assert "key_url: " in key.stdout and "carries credentials" in key.stdout, key.stdout
    assert secret not in key.stdout, key.stdout
    assert not node(host).file("/etc/apt/keyrings/gpufleet-credentials-test.asc").exists
    assert not node(host).file("/etc/apt/sources.list.d/gpufleet-credentials-test.sources").exists
    role = scenario_playbook(role_book, "-vvv", ANSIBLE_INJECT_INVOCATION="1")
    assert role.returncode != 0 and "crictl_download_url carries credentials" in role.stdout, role.stdout
    assert secret not in role.stdout, role.stdout
    assert not node(host).file("/opt/gpufleet-credentials-test").exists


def test_unreachable_mirror_fails_cleanly_and_changes_nothing(host):
    before = sha256(host, "/etc/crictl.yaml")
    run = run_role(
        host,
        "crictl",
        {
            "crictl_download_url": "http://127.0.0.1:9/cri-tools",
            "crictl_install_dir": "/opt/gpufleet-unreachable-test",
        },
    )
    assert run.failed, run
    assert "Connection refused" in run.output, run
    assert not node(host).file("/opt/gpufleet-unreachable-test/crictl").exists
    assert sha256(host, "/etc/crictl.yaml") == before


def test_release_without_a_known_checksum_is_an_error_before_download(host):
    run = run_role(host, "crictl", {"crictl_version": "v1.99.0", "crictl_install_dir": "/opt/gpufleet-unknown-test"})
    assert run.failed, run
    assert "no sha256 for crictl v1.99.0 on amd64" in run.output, run
    assert "crictl_checksums" in run.output, run
    assert not node(host).file("/opt/gpufleet-unknown-test").exists


def test_unknown_kubernetes_minor_is_an_error(host):
    run = run_role(host, "crictl", {"crictl_version": "", "crictl_kubernetes_version": "1.12"})
    assert run.failed, run
    assert "no cri-tools release is known for crictl_kubernetes_version=1.12" in run.output, run
