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
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.info_module
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the
      controller.
    support: full
    details:
      - The action plugin judges on the controller in the task's own process; nothing is sent to the host.
options:
  desired:
    description:
      - The declared state, by the roles' own variable names. Leave out what a host does not declare; rules that
        need a missing value do not fire.
    type: dict
    default: {}
    suboptions:
      driver_state:
        description: Whether the driver should be installed; V(absent) skips the driver rules.
        type: str
        choices: [present, absent]
      driver_branch:
        description: The driver branch, for example V(580).
        type: str
      driver_version:
        description: The exact driver release, for example V(580.95.05); its branch must equal O(desired.driver_branch).
        type: str
      driver_kernel_module:
        description: The kernel module flavour.
        type: str
        choices: [auto, open, proprietary]
      driver_gpu_models:
        description:
          - GPU models (V(H100), V(NVIDIA B200), V(Tesla V100-SXM2-16GB)) or architecture names (V(hopper)) for
            hosts whose driver is not loaded yet (image bakes, fresh nodes).
          - Ignored when O(installed.nvml) reports GPUs.
        type: list
        elements: str
      driver_fabricmanager:
        description: Whether Fabric Manager is managed (V(auto), V(true), V(false)); informational.
        type: raw
      container_toolkit_version:
        description: The NVIDIA Container Toolkit version, for example V(1.17.8).
        type: str
      container_runtime_engine:
        description: The container engine.
        type: str
        choices: [containerd, docker, crio]
      container_runtime_cdi:
        description: Whether the engine is to run with CDI enabled.
        type: bool
      cdi_spec_dir:
        description: Where the CDI spec is generated; set when the cdi layer is managed.
        type: str
      cdi_device_name_strategy:
        description: The C(--device-name-strategy) values the CDI spec is generated with; several need Container
          Toolkit 1.15.0 or newer.
        type: list
        elements: str
        version_added: 0.1.0
      container_runtime_set_default:
        description: Whether the nvidia runtime is the engine's default runtime.
        type: bool
        version_added: 0.1.0
      device_plugin_device_list_strategy:
        description: The NVIDIA device plugin's device-list strategy (C(envvar), C(volume-mounts), C(cdi-annotations),
          C(cdi-cri), or several comma-separated); C(envvar) needs the nvidia runtime as the default runtime or an
          nvidia RuntimeClass on the GPU pods.
        type: str
        version_added: 0.1.0
      crictl_version:
        description: The crictl release, for example V(v1.33.0); empty to derive it from the Kubernetes minor.
        type: str
      crictl_kubernetes_version:
        description: The cluster's Kubernetes minor, for example V(1.33).
        type: str
      mig_label:
        description: The MIG configuration label; empty when MIG is not managed.
        type: str
      mig_config:
        description: "The mig-parted C(version: v1) configuration the label is taken from."
        type: dict
  installed:
    description: What the node has now.
    type: dict
    default: {}
    suboptions:
      nvml:
        description: The RV(gpufleet.nvidia.nvml_info#module:nvml) result of M(gpufleet.nvidia.nvml_info).
        type: dict
      packages:
        description: The C(ansible_facts.packages) of M(ansible.builtin.package_facts).
        type: dict
      versions:
        description:
          - Versions found otherwise (binaries installed from tarballs), by name; they win over O(installed.packages).
          - Keys C(driver), C(kernel_module), C(container_toolkit), C(containerd), C(docker), C(crio), C(crictl),
            C(fabricmanager).
        type: dict
  cuda_versions:
    description: The CUDA versions of the images the fleet runs (V(12.4) is the GA release, V(12.4.1) Update 1).
    type: list
    elements: str
    default: []
  cuda_compat:
    description:
      - Whether the images (or the node) carry NVIDIA's C(cuda-compat-<major>-<minor>) package, so that a CUDA release
        newer than the driver runs through forward compatibility.
      - Forward compatibility works on data-center GPUs only; there the matrix reports such a CUDA release as
        C(cuda_forward_compat) (info) instead of a C(cuda_driver) error.
      - With O(target=installed) an installed C(cuda-compat*) package counts as well.
    type: bool
    default: false
    version_added: 0.1.0
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
  tables:
    description:
      - Extra rows for the matrix tables; a row with the key of a built-in row replaces it.
      - C(cuda_drivers) rows are C({cuda, driver[, label]}); C(branches) rows C({branch, type (NFB|PB|LTSB), eol
        (YYYY-MM, ended or null)[, note]}); C(gpu_models) rows C({model, architecture[, match (a regular expression
        on the lower-cased name), grace, mig, mig_min_driver, mig_units]}).
    type: dict
    default: {}
  custom_rules:
    description:
      - Your own rules. Each is C({id, severity (error|warning|info), message, fix, when, require}); C(when) and
        C(require) map a field to a value, a list of values, or for versions an operator and a version
        (C(>= 550.90.07)).
      - Fields are C(driver_version), C(driver_branch), C(kernel_module), C(gpu_model), C(gpu_architecture),
        C(cuda_version), C(container_toolkit_version), C(engine), C(engine_version), C(crictl_version),
        C(kubernetes_version). For GPUs and CUDA versions, C(when) matches if any matches and C(require) needs all.
    type: list
    elements: dict
    default: []
  ignore_rules:
    description:
      - Rule ids (see RV(rules)) or custom rule ids whose findings are dropped.
      - Each Container Toolkit security floor is a rule of its own (C(ctk_cve_2025_23266) and so on); only its own id
        drops it, never C(container_toolkit).
    type: list
    elements: str
    default: []
  eol_warning_days:
    description: Warn this many days before a driver branch reaches its end of life.
    type: int
    default: 180
  today:
    description: The date lifecycle rules compare with (C(YYYY-MM-DD)); the target's date when not given.
    type: str
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

from ansible_collections.gpufleet.nvidia.plugins.module_utils._version_matrix import argument_spec, judge


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    result, failure = judge(module.params)
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
