# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The mig, verify and node_labels roles' boot files carry no library source: the `files` argument each role's node_files task
gets, rendered by ansible-playbook from the task's own expression, holds the command, unit and config only; the
collection's code goes once per version through gpufleet.nvidia.node_runtime."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ansible_collections.gpufleet.nvidia.plugins.action.node_runtime import build_runtime
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import ansible_env, local_play

ROOT = Path(__file__).resolve().parents[3]
# Each role's node_files task for its boot files, by (role, tasks file); verify writes its boot files with the
# host's report (report.yml), whose expression adds them as __verify_boot_node_files.
BOOT_TASKS = {"mig": ("mig", "install.yml"), "verify": ("verify", "report.yml"), "node_labels": ("node_labels", "write.yml")}
VERIFY_BOOT_FILES = "{{ __verify_boot_node_files }}"
# The most the arguments may weigh: the commands themselves (~9 and ~19 KB) and their configs; a single runtime
# module (the _nvml/ package alone is ~60 KB) would not fit.
LIMIT = 32 * 1024


def files_expression(role: str, tasks: str) -> str:
    for entry in yaml.safe_load((ROOT / "roles" / role / "tasks" / tasks).read_text()):
        if "gpufleet.nvidia.node_files" in entry:
            return entry["gpufleet.nvidia.node_files"]["files"]
    raise AssertionError("{0}/tasks/{1} has no node_files task".format(role, tasks))


def test_the_boot_files_carry_the_command_unit_and_config_but_no_library(tmp_path: Path) -> None:
    """Rendered in check mode on this machine as the node, with a MIG layout and the boot check on (a bake)."""
    expressions = {name: files_expression(*where) for name, where in BOOT_TASKS.items()}
    assert "__verify_boot_node_files" in expressions["verify"], expressions["verify"]
    expressions["verify"] = VERIFY_BOOT_FILES
    # Outside its role, a lookup finds files and templates beside the playbook: the roles' own, linked.
    for role in BOOT_TASKS:
        for kind in ("files", "templates"):
            (tmp_path / kind).mkdir(exist_ok=True)
            for source in (ROOT / "roles" / role / kind).iterdir():
                (tmp_path / kind / source.name).symlink_to(source)
    book = tmp_path / "play.yml"
    book.write_text(
        """
- hosts: localhost
  gather_facts: false
  vars:
    gpufleet_bake: true
    mig_label: all-balanced
    mig_config_src: %(root)s/extensions/molecule/mig/files/mig-parted-config.yaml
    driver_version: "550.163.01"
    node_labels_dir: %(out_dir)s/features.d
  tasks:
    # The labels' own plan (a role variable) needs NVML; its output is all the write takes. A fact: it
    # outranks the role's variable.
    - ansible.builtin.set_fact:
        __verify_layers: "{{ lookup('gpufleet.nvidia.declared_layers') }}"
        __node_labels_plan: {content: "nvidia.com/gpu.count=8\\n"}
    - {ansible.builtin.include_role: {name: gpufleet.nvidia.verify, tasks_from: boot.yml, public: true}}
    - {ansible.builtin.include_role: {name: gpufleet.nvidia.mig, tasks_from: preflight.yml, public: true}}
    - {ansible.builtin.include_role: {name: gpufleet.nvidia.mig, tasks_from: install.yml, public: true}}
    - {ansible.builtin.include_role: {name: gpufleet.nvidia.node_labels, tasks_from: write.yml, public: true}}
    - ansible.builtin.copy:
        content: "{{ {'mig': %(mig)s, 'verify': %(verify)s, 'node_labels': %(node_labels)s} | to_json }}"
        dest: %(out)s
      check_mode: false
"""
        % {
            "root": ROOT,
            "out": tmp_path / "out.json",
            "mig": expressions["mig"].strip("{} "),
            "verify": expressions["verify"].strip("{} "),
            "node_labels": expressions["node_labels"].strip("{} "),
            "out_dir": tmp_path,
        }
    )
    local_play(book, "--check", env=ansible_env(GPUFLEET_ROOT=str(ROOT)))
    rendered = json.loads((tmp_path / "out.json").read_text())
    runtime = build_runtime()
    sources = [content.decode() for rel, content in runtime.files.items() if not rel.endswith("__init__.py")]
    for role, files in rendered.items():
        size = len(json.dumps(files))
        print("{0}: node_files `files` argument {1} bytes".format(role, size))
        contents = [entry.get("content") or "" for entry in files]
        assert not [source for source in sources if any(source in content for content in contents)], role
        assert size < LIMIT, (role, size)
        command = [entry for entry in files if entry["path"].startswith("/usr/local/sbin/")]
        assert len(command) == 1 and "/usr/local/lib/gpufleet/" + runtime.name in command[0]["content"], role
