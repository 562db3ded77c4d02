#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The documentation of the preflight_gate action plugin (plugins/action/preflight_gate.py);
# it runs on the controller only, so there is no module code.

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight_gate
short_description: Judge one host's declaration with the version matrix and say whether the preflight gate stops it
version_added: 0.1.0
description:
  - The preflight role's gate (C(roles/preflight/tasks/gate.yml)) in one task per host. It judges the declared
    versions as M(gpufleet.nvidia.version_matrix) does with O(gpufleet.nvidia.version_matrix#module:fail_on=never),
    decides with O(fail_on) whether the host stops, names the variables behind the failing findings with their
    effective values (mappings are named, not printed) and the fixes, and returns the judgement to AWX as
    M(ansible.builtin.set_stats) with C(per_host=false) and C(aggregate=true) would - under C(gpufleet_preflight),
    host name to judgement (RV(ansible_stats.data)) - so that a job's artifacts hold every host's judgement.
  - It does not fail the host for a finding (Ansible keeps the custom stats of a task only when it did not fail);
    stop the host with the next task, for example M(ansible.builtin.assert) on RV(verdict.stop) with
    RV(verdict.message).
  - It fails for bad options and for bad O(tables) or O(custom_rules), naming the field.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.version_matrix
  - gpufleet.nvidia.attributes.info_module
  - gpufleet.nvidia.attributes.internal
options:
  fail_on:
    description: The lowest severity that stops the host (C(preflight_fail_on)); V(never) only reports.
    type: str
    choices: [error, warning, never]
    default: error
  rule_variables:
    description:
      - The variables each matrix rule reads, by rule id (the preflight role's C(__preflight_rule_variables)); custom
        rules share the entry C(custom), the toolkit's CVE floors the entry C(ctk_cve).
    type: dict
    required: true
  layers:
    description: The P(gpufleet.nvidia.declared_layers#lookup) lookup's answer for the host (the variables' values).
    type: dict
    required: true
  values:
    description: Further variables' values to name in the message (C(preflight_cuda_versions)).
    type: dict
    default: {}
  declared:
    description: The variables the matrix judges; a finding whose subject is one of them names it.
    type: list
    elements: str
    default: []
  notices:
    description:
      - Notes of the caller about the host (what it could not judge), said at the end of the stop message after the
        host's findings below O(fail_on).
    type: list
    elements: str
    default: []
notes:
  - Runs on the controller, in the process that runs the task; the host is never contacted.
seealso:
  - module: gpufleet.nvidia.version_matrix
"""

EXAMPLES = r"""
- name: Check the declared versions against the version matrix
  gpufleet.nvidia.preflight_gate:
    desired:
      driver_branch: "590"
      driver_gpu_models: [Tesla V100-SXM2-16GB]
    fail_on: error
    rule_variables: "{{ __preflight_rule_variables }}"
    layers: "{{ lookup('gpufleet.nvidia.declared_layers') }}"
  register: gate

- name: Stop a host whose declaration does not fit
  ansible.builtin.assert:
    that: not gate.verdict.stop
    fail_msg: "{{ gate.verdict.message }}"
    quiet: true
"""

RETURN = r"""
findings:
  description: The findings, as RV(gpufleet.nvidia.version_matrix#module:findings).
  returned: success
  type: list
  elements: dict
summary:
  description: The counts per severity and the worst, as RV(gpufleet.nvidia.version_matrix#module:summary).
  returned: success
  type: dict
messages:
  description: "One line per finding: C([severity] rule: message -- fix: fix)."
  returned: success
  type: list
  elements: str
matrix:
  description: The declaration as the matrix read it, as RV(gpufleet.nvidia.version_matrix#module:matrix).
  returned: success
  type: dict
rules:
  description: Every rule id and what it checks.
  returned: success
  type: dict
verdict:
  description: Whether the gate stops the host.
  returned: success
  type: dict
  contains:
    stop:
      description: Whether a finding reaches O(fail_on).
      type: bool
    message:
      description:
        - The stop message - the host, O(fail_on), the failing findings, the variables behind them with their values,
          and the fixes; empty when the host passes.
        - "Then, when there are any, C(. Also on this host:) and briefly the host's findings below O(fail_on)
          (C([severity] rule: message), most severe first) and O(notices), joined with C(; )."
      type: str
      sample: >-
        The declared versions of gpu-dev-01 do not fit together (preflight_fail_on: error): driver R590 does not
        support Volta GPUs (Tesla V100-SXM2-16GB). Variables: driver_branch="590",
        driver_gpu_models=["Tesla V100-SXM2-16GB"]. Fix: use driver branch R580 (set driver_branch: "580")
    failing:
      description: The findings that reach O(fail_on).
      type: list
      elements: dict
ansible_stats:
  description: The judgement for AWX, kept by Ansible as custom stats (aggregated over the hosts).
  returned: success
  type: dict
  contains:
    data:
      description: C(gpufleet_preflight), the host's name to its C(status) (V(pass) or V(fail)), C(summary) (with
        C(failed) as O(fail_on) decides) and its C(findings) other than C(info).
      type: dict
"""
