"""container_toolkit on a live node: packages, holds, repository, config.toml, faults."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import host_vars, mirror_fingerprint, mirror_url, node, run_role, sha256, toml_file

CONFIG = "/etc/nvidia-container-runtime/config.toml"
SOURCES = "/etc/apt/sources.list.d/nvidia-container-toolkit.sources"
KEYRING = "/etc/apt/keyrings/nvidia-container-toolkit.asc"


def wanted(host) -> tuple[str, list[str]]:
    hv = host_vars(host)
    packages = ["nvidia-container-toolkit-base"]
    if hv.get("container_toolkit_operator_extensions"):
        packages.append("nvidia-container-toolkit-operator-extensions")
    return hv["container_toolkit_version"] + "-1", packages


def test_package_set_is_installed_at_the_pinned_version(host):
    version, packages = wanted(host)
    for name in packages:
        pkg = node(host).package(name)
        assert pkg.is_installed, name
        assert pkg.version == version, (name, pkg.version)
    # The base set only: the full set needs libnvidia-container, not built here.
    assert not node(host).package("nvidia-container-toolkit").is_installed


def test_packages_are_held_only_when_asked(host):
    _version, packages = wanted(host)
    held = node(host).check_output("apt-mark showhold").split()
    expect_hold = host_vars(host).get("container_toolkit_hold", True)
    for name in packages:
        assert (name in held) == expect_hold, (name, held)


def test_nvidia_ctk_is_the_pinned_build(host):
    version, _packages = wanted(host)
    out = node(host).check_output("nvidia-ctk --version")
    assert "version " + version.split("-")[0] in out, out


def test_repository_is_the_signed_mirror_with_the_pinned_key(host):
    sources = node(host).file(SOURCES).content_string
    assert "URIs: " + mirror_url(host) + "/libnvidia-container/stable/deb/amd64" in sources
    assert "Suites: /" in sources
    assert "Signed-By: " + KEYRING in sources
    colons = node(host).check_output("gpg --batch --show-keys --with-colons %s", KEYRING)
    fpr = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
    assert fpr == mirror_fingerprint(host)
    policy = node(host).check_output("apt-cache policy nvidia-container-toolkit-base")
    assert mirror_url(host) + "/libnvidia-container/stable/deb/amd64" in policy, policy


def test_config_toml_has_the_settings_and_keeps_the_rest(host):
    hv = host_vars(host)
    config = toml_file(host, CONFIG)
    runtime = config["nvidia-container-runtime"]
    assert runtime["mode"] == (hv.get("container_toolkit_runtime_mode") or "auto")
    if hv.get("container_toolkit_cdi_spec_dirs"):
        assert runtime["modes"]["cdi"]["spec-dirs"] == hv["container_toolkit_cdi_spec_dirs"]
    for dotted, value in (hv.get("container_toolkit_config") or {}).items():
        setting = config
        for part in dotted.split("."):
            setting = setting[part]
        assert setting == value, dotted
    # What we did not set is still the toolkit's own default.
    assert config["nvidia-container-cli"]["ldconfig"] == "@/sbin/ldconfig"
    assert node(host).file(CONFIG).mode == 0o644


def test_operator_extensions_provide_the_cdi_runtime(host):
    if not host_vars(host).get("container_toolkit_operator_extensions"):
        return
    assert node(host).file("/usr/bin/nvidia-container-runtime.cdi").is_file


def test_a_key_with_another_fingerprint_is_refused_and_removed(host):
    version, _packages = wanted(host)
    run = run_role(host, "container_toolkit", {"container_toolkit_gpg_key_fingerprint": "0" * 40})
    assert run.failed, run
    assert "fingerprint" in run.output and "was removed" in run.output, run
    assert not node(host).file(KEYRING).exists
    assert node(host).package("nvidia-container-toolkit-base").version == version
    # Put the node back as converge left it.
    again = run_role(host, "container_toolkit", {"container_toolkit_gpg_key_fingerprint": mirror_fingerprint(host)})
    assert not again.failed, again
    assert node(host).file(KEYRING).exists


def test_an_unreachable_mirror_fails_before_anything_changes(host):
    version, _packages = wanted(host)
    before = {path: sha256(host, path) for path in (CONFIG, SOURCES, KEYRING)}
    other = "1.17.8" if version.startswith("1.20") else "1.20.1"
    run = run_role(
        host,
        "container_toolkit",
        {
            "container_toolkit_version": other,
            "container_toolkit_apt_repo_url": "http://127.0.0.1:9/libnvidia-container/stable/deb",
            "container_toolkit_gpg_key_fingerprint": mirror_fingerprint(host),
        },
    )
    assert run.failed, run
    assert "the repository does not answer" in run.output and "nothing was changed" in run.output, run
    assert {path: sha256(host, path) for path in before} == before
    assert node(host).package("nvidia-container-toolkit-base").version == version
