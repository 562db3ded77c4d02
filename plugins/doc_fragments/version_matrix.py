# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The version matrix's inputs, shared by version_matrix and preflight_gate (one argument spec in code:
    module_utils/_matrix/judge.py)."""

    DOCUMENTATION = r"""
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
        description: The cluster's Kubernetes minor, for example V(1.33); the C(dra) rule reads a full release
          (V(1.34.2)) where one is given.
        type: str
      dcgm_version:
        description: The DCGM release (V(4.5.3)) or package version (V(1:4.5.3-1)); judged against DCGM's security
          floors (C(dcgm_cve_*)).
        type: str
      dcgm_exporter:
        description: Whether dcgm-exporter is deployed; its version is judged only then.
        type: bool
      dcgm_exporter_version:
        description: The dcgm-exporter release tag, C(<DCGM>-<exporter>) (V(4.5.3-4.8.2)); the exporter part is judged
          against its security floors (C(dcgm_cve_*)).
        type: str
      device_plugin_version:
        description: The NVIDIA device plugin release the node's cluster runs (V(v0.19.0)); judged with
          O(desired.device_plugin_device_list_strategy) against its security floors (C(device_plugin_cve_*)).
        type: str
      gpufleet_dra:
        description:
          - The node is prepared for NVIDIA's DRA driver for GPUs - V(driver) (its own Helm chart) or V(operator)
            (the GPU Operator's GPUCluster); empty or absent - no DRA.
          - The C(dra) rule then checks Kubernetes (1.34.2, or 1.32 and 1.33 with feature gates) and the driver (565;
            580 through the Operator) against the DRA driver's documented minimums.
        type: str
        version_added: 0.1.0
      gpufleet_dra_compute_domains:
        description: ComputeDomains (Multi-Node NVLink) are used as well; the driver then needs 570.158.01 or later.
        type: bool
        version_added: 0.1.0
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
      nvidia_pci:
        description:
          - The node's NVIDIA PCI functions as the C(nvidia_pci) read of M(gpufleet.nvidia.node_reads_info) returns
            them; from them the matrix tells a vGPU guest by GPU Feature Discovery's rule (an NVIDIA function
            with the vGPU vendor capability).
          - In a vGPU guest the C(kernel_module) rule applies the vGPU rows (before Ada only the proprietary
            modules; the open ones from R550).
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
      - With O(gpufleet.nvidia.version_matrix#module:target=installed) an installed C(cuda-compat*) package counts as well.
    type: bool
    default: false
    version_added: 0.1.0
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
      - Each security floor is a rule of its own (the Container Toolkit's C(ctk_cve_2025_23266), DCGM's
        C(dcgm_cve_2026_47483), the device plugin's C(device_plugin_cve_2025_23266) and so on); only its own id
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
"""
