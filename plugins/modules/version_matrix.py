#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: version_matrix
short_description: Check that driver, CUDA, GPU, toolkit, container engine and crictl versions fit together
version_added: 0.1.0
description:
  - Judges one node's versions against the version matrix of this collection (CUDA release notes, NVIDIA's driver
    lifecycle and architecture matrices, the MIG user guide, the Container Toolkit changelog and security bulletins,
    the container engines' CDI support and end of life, and cri-tools' versioning policy) and returns a list of
    findings, each with a severity, the rule, a message and the fix.
  - The facts are the collection's knowledge base (C(plugins/module_utils/_knowledge)); every row names its source and
    the date it was checked.
  - With O(target=desired) it judges the declaration (the roles' variables) before anything is installed; with
    O(target=installed) it judges what the node runs now (the loaded driver from NVML, installed packages).
  - GPUs come from O(installed.nvml) (the result of M(gpufleet.nvidia.nvml_info)) when a driver is loaded, otherwise
    from O(desired.driver_gpu_models).
  - Fails when a finding reaches O(fail_on); the message lists those findings and their fixes.
  - Add CUDA releases, driver branches and GPU models with O(tables), and your own rules with O(custom_rules),
    without changing the collection.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.version_matrix
  - gpufleet.nvidia.attributes.info_module
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the
      controller.
    support: full
    details:
      - The action plugin judges on the controller in the task's own process; nothing is sent to the host.
options:
  target:
    description:
      - V(desired) judges the declared versions; V(installed) judges the versions the node runs now.
    type: str
    choices: [desired, installed]
    default: desired
  fail_on:
    description: The lowest severity that fails the task; V(never) only reports.
    type: str
    choices: [error, warning, never]
    default: error
notes:
  - The module only computes; it never changes the node and reports C(changed=false).
  - An action plugin of the same name runs it on the controller, in the process that runs the task. Nothing is sent
    to or run on the host, no connection is opened and the host needs no Python, so C(delegate_to) is not needed.
    The same options, checks and return values apply when the module runs as a module.
seealso:
  - module: gpufleet.nvidia.nvml_info
  - name: CUDA toolkit and driver versions
    description: Table 3 of the CUDA release notes, one of the matrix's sources.
    link: https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
  - name: NVIDIA data center driver lifecycle
    description: Branch types and end-of-life dates.
    link: https://docs.nvidia.com/datacenter/tesla/drivers/
"""

EXAMPLES = r"""
- name: Gather NVML facts (GPUs, loaded driver)
  gpufleet.nvidia.nvml_info:
  register: gpu

- name: Stop before installing anything if the declared versions do not fit
  gpufleet.nvidia.version_matrix:
    desired:
      driver_branch: "580"
      driver_kernel_module: auto
      container_toolkit_version: "1.19.1"
      container_runtime_engine: containerd
      container_runtime_cdi: true
      crictl_kubernetes_version: "1.33"
    installed:
      nvml: "{{ gpu.nvml }}"
    cuda_versions: ["12.4", "13.0"]

- name: Judge what a node runs now, warnings included, and add a site rule
  gpufleet.nvidia.version_matrix:
    target: installed
    installed:
      nvml: "{{ gpu.nvml }}"
      packages: "{{ ansible_facts.packages }}"
    cuda_versions: ["12.4"]
    fail_on: warning
    custom_rules:
      - id: hopper-driver-floor
        severity: error
        message: our Hopper nodes run R550.90 or newer
        fix: set driver_version to 550.90.07 or newer
        when: {gpu_architecture: hopper}
        require: {driver_version: ">= 550.90.07"}

- name: A bake with no driver loaded, a CUDA release the collection does not know yet
  gpufleet.nvidia.version_matrix:
    desired:
      driver_version: "615.10.01"
      driver_gpu_models: [B200]
    cuda_versions: ["13.4"]
    tables:
      cuda_drivers:
        - {cuda: "13.4", driver: "615.10.01"}
      branches:
        - {branch: "615", type: PB, eol: "2027-09"}
"""

RETURN = r"""
findings:
  description: What the matrix found, most severe first.
  returned: always
  type: list
  elements: dict
  contains:
    rule:
      description: The rule (see RV(rules)), or C(custom:<id>) for a custom rule.
      type: str
      returned: always
      sample: cuda_driver
    severity:
      description: How bad it is.
      type: str
      returned: always
      choices: [error, warning, info]
      sample: error
    layer:
      description: The layer the finding concerns.
      type: str
      returned: always
      choices: [driver, container_toolkit, container_runtime, cdi, crictl, mig, fleet]
      sample: driver
    subject:
      description: What the finding is about (a CUDA version, a branch, a GPU, a variable).
      type: str
      returned: always
      sample: CUDA 13.0
    message:
      description: What is wrong, for a person.
      type: str
      returned: always
      sample: "driver 575.57.08 cannot run CUDA 13.0: it needs 580.65.06 or newer (580 or newer runs it with a limited feature set)"
    fix:
      description: What to change.
      type: str
      returned: always
      sample: use a driver of branch 580 or newer, or build the images with an older CUDA
    source:
      description: Where the rule's facts come from.
      type: str
      returned: always
      sample: CUDA Toolkit Release Notes, Table 3; CUDA Minor Version Compatibility
summary:
  description: Counts per severity and the worst one.
  returned: always
  type: dict
  contains:
    error:
      description: Number of errors.
      type: int
      returned: always
      sample: 1
    warning:
      description: Number of warnings.
      type: int
      returned: always
      sample: 2
    info:
      description: Number of informational findings.
      type: int
      returned: always
      sample: 0
    worst:
      description: The highest severity found; V(null) when there are no findings.
      type: str
      returned: always
      sample: error
    failed:
      description: Whether a finding reached O(fail_on).
      type: bool
      returned: always
      sample: true
matrix:
  description: The node as the rules saw it (normalised versions, GPUs and where they came from).
  returned: always
  type: dict
  sample:
    target: desired
    driver: R580
    driver_branch: "580"
    kernel_module: auto
    gpus:
      - {label: "GPU 0 (NVIDIA H100 80GB HBM3)", name: NVIDIA H100 80GB HBM3, architecture: hopper,
         model: h100, grace: false, mig_capable: true}
    gpu_source: nvml
    cuda_versions: ["12.4"]
    container_toolkit: 1.17.8
    engine: containerd
    engine_version: 1.7.24
messages:
  description: "One line per finding (C([severity] rule: message -- fix: fix)), for people reading the output."
  returned: always
  type: list
  elements: str
  sample:
    - "[warning] branch_lifecycle: driver branch R550 (Production Branch) reached end of life: no more bug or security
      fixes -- fix: move to a supported branch (R580 LTSB)"
rules:
  description: The built-in rules and what each checks.
  returned: always
  type: dict
  sample:
    cuda_driver: the driver runs every CUDA version the fleet's images use
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.judge import argument_spec, judge


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    result, failure = judge(module.params)
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
