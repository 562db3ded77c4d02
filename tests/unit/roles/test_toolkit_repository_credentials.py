# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""container_toolkit's preflight: a repository or key URL with credentials is refused, naming the variable and
without repeating the password, before the node is touched (issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: gpufleet.nvidia.container_toolkit
        tasks_from: preflight
      vars:
        {variable}: "https://fleet:hunter2-c41d@mirror.invalid/libnvidia-container"
"""


@pytest.mark.parametrize("variable", ["container_toolkit_apt_repo_url", "container_toolkit_gpg_key_url"])
def test_a_url_with_credentials_is_refused_by_name_and_never_printed(tmp_path: Path, variable: str) -> None:
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(variable=variable))
    output = local_play(play, "-vvv", rc=2)
    assert "container_toolkit: invalid settings" in output and "{0} carries credentials".format(variable) in output, output
    assert "container_toolkit_apt_auth_login" in output
    assert "hunter2-c41d" not in output, output
