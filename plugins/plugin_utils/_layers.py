# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The layers of a GPU node, in site.yml order, and the variables other roles
read by name (the team interfaces). Controller side only."""

from __future__ import annotations

# Layer -> the variables preflight and verify read by these agreed names.
LAYER_VARIABLES: dict[str, tuple[str, ...]] = {
    "driver": (
        "driver_state",
        "driver_branch",
        "driver_version",
        "driver_kernel_module",
        "driver_gpu_models",
        "driver_fabricmanager",
        "driver_reboot",
        "driver_bake",
    ),
    "container_toolkit": ("container_toolkit_version", "container_toolkit_package_set", "container_toolkit_bake"),
    "container_runtime": ("container_runtime_engine", "container_runtime_cdi", "container_runtime_set_default"),
    "cdi": ("cdi_spec_dir", "cdi_format", "cdi_device_name_strategy", "cdi_bake"),
    "crictl": ("crictl_version", "crictl_kubernetes_version"),
    "mig": ("mig_config", "mig_config_src", "mig_label", "mig_bake", "mig_owner"),
    "device_plugin": ("device_plugin_config", "device_plugin_device_list_strategy", "device_plugin_version"),
    "dcgm": ("dcgm_enabled", "dcgm_version", "dcgm_exporter", "dcgm_exporter_version"),
}

# Layers that site.yml runs only when a host turns them on: the variable that
# does, as their roles' first task reads it. Their defaults alone (off) manage
# nothing, so preflight judges their versions only where they are turned on.
LAYER_SWITCHES: dict[str, str] = {
    "device_plugin": "device_plugin_config",
    "dcgm": "dcgm_enabled",
}

LAYERS = tuple(LAYER_VARIABLES)
