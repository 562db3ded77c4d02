# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""container_runtime's preflight: the sandbox image archive's URL is judged before the node is touched (issue 37).

The role's own preflight tasks run on this machine with container_runtime_install false: a URL that passes
reaches the first check that needs an engine (none here), one that does not stops at its own check.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play

pytestmark = pytest.mark.skipif(bool(shutil.which("containerd")), reason="the allowed case stops where no containerd is installed")

DIGEST = "sha256:" + "ab" * 32
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: gpufleet.nvidia.container_runtime
        tasks_from: preflight
      vars:
        container_runtime_engine: containerd
        container_runtime_install: false
        container_runtime_sandbox_image: registry.invalid/pause@{digest}
        container_runtime_sandbox_image_archive_url: "{url}"
        container_runtime_sandbox_image_archive_checksum: "{digest}"
        container_runtime_allow_insecure_transport: {allow}
"""


def preflight(tmp_path: Path, url: str, allow: bool, *options: str) -> str:
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(url=url, digest=DIGEST, allow="true" if allow else "false"))
    return local_play(play, *options, rc=2)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8765/files/images/pause.oci.tar", "ftp://mirror.invalid/pause.oci.tar", "file:///srv/pause.oci.tar"])
def test_an_archive_url_that_is_not_https_is_refused_unless_allowed(tmp_path: Path, url: str) -> None:
    refused = preflight(tmp_path, url, False)
    assert "is not an https:// URL" in refused and "container_runtime_allow_insecure_transport: true" in refused, refused
    allowed = preflight(tmp_path, url, True)
    assert "is not an https:// URL" not in allowed and "containerd is not installed" in allowed, allowed


def test_an_https_archive_url_needs_no_flag(tmp_path: Path) -> None:
    output = preflight(tmp_path, "https://mirror.invalid/images/pause.oci.tar", False)
    assert "is not an https:// URL" not in output and "containerd is not installed" in output, output


def test_credentials_in_the_archive_url_are_refused_and_not_printed(tmp_path: Path) -> None:
    output = preflight(tmp_path, "https://fleet:hunter2-4b7a@mirror.invalid/images/pause.oci.tar", True, "-v")
    assert "container_runtime_sandbox_image_archive_url carries credentials" in output, output
    assert "containerd is not installed" not in output
    assert "hunter2-4b7a" not in output, output
