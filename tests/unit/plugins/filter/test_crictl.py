# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""crictl_plan: the crictl role's release, checksum and endpoints from its own data, and each problem's fix."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.crictl import FilterModule, crictl_plan

ROLE = Path(__file__).parents[4] / "roles" / "crictl"
ROLE_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
OURS = "0123456789abcdef" * 4


def plan(architecture: str = "x86_64", **overrides: t.Any) -> dict[str, t.Any]:
    """The filter as the role calls it: its defaults, its data, and the host's architecture."""
    settings = {
        "version": DEFAULTS["crictl_version"],
        "kubernetes_version": DEFAULTS["crictl_kubernetes_version"],
        "release_for_kubernetes": ROLE_VARS["__crictl_release_for_kubernetes"],
        "architecture": architecture,
        "arches": ROLE_VARS["__crictl_arches"],
        "sha256": ROLE_VARS["__crictl_sha256"],
        "checksums": DEFAULTS["crictl_checksums"],
        "install_dir": DEFAULTS["crictl_install_dir"],
        "download_url": "https://mirror.example/cri-tools",
        "allow_insecure_transport": DEFAULTS["crictl_allow_insecure_transport"],
        "engine": "containerd",
        "endpoints": ROLE_VARS["__crictl_endpoints"],
        "runtime_endpoint": DEFAULTS["crictl_runtime_endpoint"],
        "image_endpoint": DEFAULTS["crictl_image_endpoint"],
    }
    settings.update(overrides)
    return crictl_plan(settings)


def test_the_defaults_pick_the_kubernetes_minors_release_and_its_pinned_digest() -> None:
    assert FilterModule().filters()["crictl_plan"] is crictl_plan
    got = plan()
    release = ROLE_VARS["__crictl_release_for_kubernetes"][DEFAULTS["crictl_kubernetes_version"]]
    assert got["problem"] == ""
    assert (got["release"], got["arch"]) == (release, "amd64")
    assert got["sha256"] == ROLE_VARS["__crictl_sha256"][release]["amd64"]
    assert got["tarball_url"] == "https://mirror.example/cri-tools/{0}/crictl-{0}-linux-amd64.tar.gz".format(release)
    assert got["runtime_endpoint"] == got["image_endpoint"] == "unix:///run/containerd/containerd.sock"


def test_user_checksums_extend_the_table_without_dropping_its_other_architectures() -> None:
    got = plan(version="v1.35.0", architecture="aarch64", checksums={"v1.35.0": {"amd64": OURS}})
    assert got["problem"] == ""
    assert got["table"]["v1.35.0"]["amd64"] == OURS
    assert got["sha256"] == ROLE_VARS["__crictl_sha256"]["v1.35.0"]["arm64"]
    # The role's own data is not modified in place.
    assert ROLE_VARS["__crictl_sha256"]["v1.35.0"]["amd64"] != OURS


def test_the_endpoints_follow_the_engine_unless_given() -> None:
    got = plan(engine="crio", image_endpoint="unix:///run/images.sock")
    assert got["problem"] == ""
    assert got["runtime_endpoint"] == "unix:///var/run/crio/crio.sock"
    assert got["image_endpoint"] == "unix:///run/images.sock"


def test_the_release_checksum_file_is_no_source() -> None:
    # Issue 37: a .sha256 from the server that serves the tarball vouches for whatever that server sends.
    assert "crictl_checksum_source" not in DEFAULTS
    got = plan(version="v1.99.0", checksum_source="release")
    assert got["problem"].startswith("no sha256 for crictl v1.99.0 on amd64"), got


def test_plain_http_is_refused_before_the_node_is_touched_unless_allowed() -> None:
    url = "http://127.0.0.1:8765/files/cri-tools"
    refused = plan(download_url=url)
    assert refused["problem"] == (
        "crictl_download_url http://127.0.0.1:8765/files/cri-tools is fetched over http, which does not authenticate the "
        "server; use an https:// mirror, or set crictl_allow_insecure_transport: true (the pinned sha256 still checks the tarball)"
    )
    assert refused["sha256"] is None
    for scheme in ("ftp://mirror.example/cri-tools", "file:///srv/bundle/cri-tools"):
        assert "crictl_allow_insecure_transport" in plan(download_url=scheme)["problem"]
    allowed = plan(download_url=url, allow_insecure_transport=True)
    assert allowed["problem"] == "" and allowed["sha256"] and allowed["tarball_url"].startswith(url)


def test_credentials_in_the_download_url_are_refused_and_not_repeated() -> None:
    got = plan(download_url="https://fleet:hunter2@mirror.example/cri-tools", allow_insecure_transport=True)
    assert got["problem"].startswith("crictl_download_url carries credentials"), got
    # The plan is printed by set_fact at -v: nothing in it may carry the password.
    assert "hunter2" not in str(got), got


@pytest.mark.parametrize(
    "overrides, problem",
    [
        (
            {"engine": "podman"},
            "crictl_engine must be one of containerd, crio, docker, got 'podman' (it defaults to container_runtime_engine); set crictl_engine for this host",
        ),
        (
            {"kubernetes_version": "1.12"},
            "no cri-tools release is known for crictl_kubernetes_version=1.12 (known: 1.30, 1.31, 1.32, 1.33, 1.34, 1.35, 1.36); set crictl_version explicitly",
        ),
        ({"version": "1.36"}, "crictl_version must look like v1.36.0, got '1.36'"),
        ({"architecture": "riscv64"}, "no cri-tools build for the architecture riscv64"),
        ({"install_dir": "usr/bin"}, "crictl_install_dir must be an absolute path"),
        (
            {"version": "v1.99.0"},
            'no sha256 for crictl v1.99.0 on amd64 in the role\'s table; add it as crictl_checksums: {"v1.99.0": {"amd64": "<sha256 of the tarball>"}}',
        ),
        ({"checksums": {"v1.36.0": {"amd64": "not-a-digest"}}}, "no sha256 for crictl v1.36.0 on amd64"),
        # The engine is checked first: it may come from the runtime layer's variable.
        ({"engine": "podman", "version": "bad"}, "crictl_engine must be one of"),
    ],
)
def test_each_problem_is_named_with_its_fix(overrides: dict[str, t.Any], problem: str) -> None:
    got = plan(**overrides)
    assert got["problem"].startswith(problem), got["problem"]
    assert got["sha256"] is None


def test_malformed_checksums_are_refused_naming_the_variable() -> None:
    with pytest.raises(AnsibleFilterError, match=r"crictl_plan: crictl_checksums\['v1.36.0'\] must map"):
        plan(checksums={"v1.36.0": OURS})
    with pytest.raises(AnsibleFilterError, match="crictl_plan: settings lack allow_insecure_transport, arches"):
        crictl_plan({"version": ""})
