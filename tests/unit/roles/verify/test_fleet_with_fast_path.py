# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The verify role's fleet report and kept host reports in a site.yml run where the fast path left some nodes out.

A real ansible-playbook over three local hosts: gpu-a ran verify, gpu-b took the fast path (in
gpufleet_unchanged, with its last report kept by the fast_path role), gpu-c failed before verify. The verify
play runs on gpu-a and gpu-c only, as site.yml's host pattern makes it; the fleet report must still list all
three, gpu-b with its last report.
"""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _verify
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play


def report(host: str, status: str) -> dict:
    check = _verify.not_managed("cdi", {"reason": "not in this test"})
    built = _verify.build_report(host, [check], {}, {"driver": "550.163.01"})
    built["status"] = status
    return built


def test_nodes_left_out_by_the_fast_path_are_in_the_fleet_report(tmp_path: Path) -> None:
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        """
- name: What the earlier plays left
  hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.group_by:
        key: gpufleet_unchanged
      when: inventory_hostname == 'gpu-b'
    - ansible.builtin.set_fact:
        __fast_path_report: %(b)s
      when: inventory_hostname == 'gpu-b'
    - ansible.builtin.set_fact:
        __verify_report: %(a)s
      when: inventory_hostname == 'gpu-a'

- name: Verify's fleet report, on the hosts that site.yml's verify play gets
  hosts: "all:!gpufleet_unchanged"
  gather_facts: false
  tasks:
    - ansible.builtin.import_role:
        name: gpufleet.nvidia.verify
        tasks_from: fleet
"""
        % {"a": json.dumps(report("gpu-a", "pass")), "b": json.dumps(report("gpu-b", "warn"))}
    )
    output = local_play(playbook, "-e", "verify_report_dir={0}".format(tmp_path / "reports"), hosts="gpu-a,gpu-b,gpu-c,")
    markdown = (tmp_path / "reports" / "fleet-report.md").read_text()
    for host in ("gpu-a", "gpu-b", "gpu-c"):
        assert host in markdown, markdown
    assert "3 host(s): 1 warn, 1 pass, 1 no report" in output and "gpu-b: warn" in output, output
    assert "no verify report" in markdown  # gpu-c, and only gpu-c
    assert markdown.count("no verify report") == 1
    # The same one call keeps each verified host's report, and only theirs, ending as the node's copy ends.
    assert sorted(path.name for path in (tmp_path / "reports").glob("*.json")) == ["gpu-a.json"]
    kept = (tmp_path / "reports" / "gpu-a.json").read_text()
    assert json.loads(kept)["host"] == "gpu-a" and kept.endswith("}\n")
