# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""verify writes <verify_report_dir>/<inventory_hostname>.json on the controller: a host name with a slash, '..' or a
control character is refused before anything runs, naming the variable and the fix; nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: gpufleet.nvidia.verify
      vars:
        verify_report_dir: {reports}
"""


@pytest.mark.parametrize("host", ["../../escaped", "rack1/gpu-01", ".."])
def test_a_host_name_that_would_leave_the_report_directory_is_refused(tmp_path: Path, host: str) -> None:
    reports = tmp_path / "reports"
    book = tmp_path / "play.yml"
    book.write_text(PLAY.format(reports=reports))
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("{0} ansible_connection=local\n".format(host))
    output = local_play(book, hosts=str(inventory), rc=2)
    assert "verify_report_dir: this host's report would be written to" in output, output[-3000:]
    assert "Name the host without them in the inventory" in output
    assert not reports.exists() and not (tmp_path / "escaped.json").exists()
