# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_fingerprint's action plugin: the declaration as digests per variable, secrets as set or unset."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.gpufleet.nvidia.plugins.action.node_fingerprint import (
    ActionModule,
    content_digest,
    declaration,
    declared,
    role_options,
)
from ansible_collections.gpufleet.nvidia.plugins.modules.node_fingerprint import ARGUMENT_SPEC
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play


def test_the_action_takes_every_module_option_but_the_declaration_it_computes() -> None:
    assert ActionModule._VALID_ARGS == frozenset(ARGUMENT_SPEC) - {"declaration"}


def test_each_variable_has_its_own_digest_and_secrets_only_count_as_set() -> None:
    first = declaration(
        {"driver_version": "550.163.01", "driver_secure_boot_enroll_password": "hunter2"}, ["gpu_nodes"], {"driver_secure_boot_enroll_password"}, "c1"
    )
    assert first["driver_secure_boot_enroll_password"] == "set"
    assert "hunter2" not in json.dumps(first)
    assert set(first) == {"(collection)", "(groups)", "driver_version", "driver_secure_boot_enroll_password"}
    second = declaration(
        {"driver_version": "550.127.05", "driver_secure_boot_enroll_password": "other"}, ["gpu_nodes"], {"driver_secure_boot_enroll_password"}, "c1"
    )
    assert [name for name in first if first[name] != second[name]] == ["driver_version"]
    assert declaration({}, ["inference"], (), "c1")["(groups)"] != declaration({}, ["training"], (), "c1")["(groups)"]
    # Key order in a mapping does not matter, values do.
    assert declaration({"mig_config": {"a": 1, "b": 2}}, [], (), "c")["mig_config"] == declaration({"mig_config": {"b": 2, "a": 1}}, [], (), "c")["mig_config"]


def test_no_log_variables_come_from_the_argument_specs() -> None:
    options, secrets = role_options()
    assert "driver_secure_boot_enroll_password" in secrets and "driver_secure_boot_enroll_password" in options
    assert "driver_version" not in secrets and "driver_version" in options


def test_the_declaration_is_the_roles_options_and_the_collection_switches() -> None:
    options, _secrets = role_options()
    prefixes = ["gpufleet_", "driver_", "node_labels_", "slurm_gres_"]
    assert declared("driver_version", prefixes, options) and declared("node_labels_enabled", prefixes, options)
    assert declared("gpufleet_bake", prefixes, options)
    # What roles publish under their prefix for reports is an output of the run, not a declaration.
    assert not declared("node_labels_summary", prefixes, options) and not declared("slurm_gres_node_gres", prefixes, options)
    assert not declared("cdi_spec_dir", prefixes, options)  # not one of the prefixes
    # A fact the roles share within the run (the NVML read) is an output too, though under the collection's prefix.
    assert not declared("gpufleet_run_state", prefixes, options)


def test_no_role_option_is_named_like_a_run_fact() -> None:
    """gpufleet_run_* is left out of the declaration: an option named so would never count as declared."""
    options, _secrets = role_options()
    assert [name for name in options if name.startswith("gpufleet_run_")] == []


def test_a_fact_a_role_publishes_after_the_record_is_no_declaration_change(tmp_path: Path) -> None:
    """The record is made at the end of a run, where the roles' published facts exist; the next run compares before
    any role ran. A published fact under a role's prefix must not make the node look changed."""
    record, out = tmp_path / "fingerprint.json", tmp_path / "out.json"
    head = """
- hosts: localhost
  gather_facts: false
  vars:
    node_labels_enabled: true
  tasks:
"""
    (tmp_path / "converge.yml").write_text(
        head
        + """
    - ansible.builtin.set_fact:
        node_labels_summary: {product: NVIDIA-A100-SXM4-40GB, count: 8}
        gpufleet_run_state: {run: "controller:1:1", nvml: {status: ok, driver_version: "550.163.01", gpus: []}}
    - gpufleet.nvidia.node_fingerprint:
        {path: %(record)s, prefixes: [gpufleet_, node_labels_], state: recorded, watch: {paths: [], nvml: false}}
"""
        % {"record": record}
    )
    (tmp_path / "next.yml").write_text(
        head
        + """
    - gpufleet.nvidia.node_fingerprint: {path: %(record)s, prefixes: [gpufleet_, node_labels_]}
      register: compared
    - ansible.builtin.copy: {content: "{{ compared | to_json }}", dest: %(out)s}
"""
        % {"record": record, "out": out}
    )
    local_play(tmp_path / "converge.yml")
    local_play(tmp_path / "next.yml")
    compared = json.loads(out.read_text())
    assert compared["matched"] and compared["reasons"] == [], compared


def test_the_collection_digest_follows_content(tmp_path: Path) -> None:
    (tmp_path / "roles" / "x" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "x" / "tasks" / "main.yml").write_text("---\n")
    (tmp_path / "plugins" / "__pycache__").mkdir(parents=True)
    before = content_digest(tmp_path)
    (tmp_path / "plugins" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    assert content_digest(tmp_path) == before
    (tmp_path / "roles" / "x" / "tasks" / "main.yml").write_text("---\n# changed\n")
    assert content_digest(tmp_path) != before


def test_through_ansible_a_changed_variable_is_named(tmp_path: Path) -> None:
    """Record, compare (matches), compare with another value of one variable (names it), as a playbook runs it."""
    watched = tmp_path / "etc"
    watched.mkdir()
    (watched / "config.toml").write_text("version = 2\n")
    record = tmp_path / "fingerprint.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        """
- hosts: localhost
  gather_facts: false
  vars:
    wanted: "550.163.01"
    driver_version: "{{ wanted }}"
    args: &args
      path: %(record)s
      prefixes: [driver_]
  tasks:
    - gpufleet.nvidia.node_fingerprint:
        <<: *args
        state: recorded
        watch: {paths: ["%(watched)s"], nvml: false}
    - gpufleet.nvidia.node_fingerprint: *args
      register: same
    - gpufleet.nvidia.node_fingerprint: *args
      vars:
        wanted: "550.127.05"
      register: other
    - ansible.builtin.copy:
        content: "{{ {'same': same, 'other': other} | to_json }}"
        dest: %(out)s
"""
        % {"record": record, "watched": watched, "out": tmp_path / "out.json"}
    )
    local_play(playbook)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["same"]["matched"] and out["same"]["reasons"] == []
    assert not out["other"]["matched"]
    assert out["other"]["reasons"] == ["declaration changed: driver_version"]
    stored = json.loads(record.read_text())
    assert "550.163.01" not in json.dumps(stored["declaration"])  # digests, not values
