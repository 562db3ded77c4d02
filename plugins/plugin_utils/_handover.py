# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Host-managed handover: the Helm values of NVIDIA's GPU Operator (and of
its DRA driver's chart) that fit what a node already has from this
collection - the driver and the Container Toolkit on the host, CDI on in the
engine, MIG ours or the DRA driver's.

Sources (each value below names its own):
- GPU Operator, "Pre-Installed NVIDIA GPU Drivers and NVIDIA Container
  Toolkit": driver.enabled=false, toolkit.enabled=false
  (NVIDIA/cloud-native-docs@52dcb7b8:gpu-operator/getting-started.rst).
- GPU Operator's DRA workflow with a pre-installed driver:
  clusterPolicy.deployCR=false, gpuCluster.deployCR=true,
  driver.enabled=false, draDriver.computeDomains.enabled
  (NVIDIA/cloud-native-docs@52dcb7b8:gpu-operator/dra-intro-install.rst).
- The validator: it finds a pre-installed driver by chrooting into the host
  and running its nvidia-smi, writes /run/nvidia/validations/driver-ready
  with IS_HOST_DRIVER=true, and creates the /dev/char links unless
  DISABLE_DEV_CHAR_SYMLINK_CREATION is set
  (NVIDIA/gpu-operator@a22dbf67:cmd/nvidia-validator/main.go).
- DRA driver chart: nvidiaDriverRoot, nvidiaCDIHookPath,
  resources.computeDomains.enabled, gpuResourcesEnabledOverride
  (NVIDIA/k8s-dra-driver-gpu@22407113:deployments/helm/dra-driver-nvidia-gpu/values.yaml,
  docs/install.md).

Every key emitted exists in those charts (tests/unit/plugins/plugin_utils/
test_handover.py checks them against the charts' values.yaml and templates).
Controller side.
"""

from __future__ import annotations

import typing as t

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import kubernetes as _kubernetes

# The runtime handler our container_runtime layer configures (verify's RUNTIME_NAME).
RUNTIME_HANDLER = "nvidia"
DRA_WORKFLOWS = ("", "driver", "operator")
MIG_OWNERS = ("gpufleet", "dra_driver")
MIG_STRATEGIES = ("single", "mixed")


class HandoverError(ValueError):
    """A declaration the values cannot be made for: the message names the variable and the fix."""


def _layer(layers: t.Mapping[str, t.Any], name: str) -> tuple[bool, dict[str, t.Any], str]:
    layer = layers.get(name) or {}
    return bool(layer.get("managed")), dict(layer.get("vars") or {}), str(layer.get("reason") or "")


def _problems(layers: t.Mapping[str, t.Any]) -> list[str]:
    """What the node lacks for a host-managed Operator: each names the variable and the fix."""
    problems = []
    driver, driver_vars, why = _layer(layers, "driver")
    if driver and driver_vars.get("driver_state", "present") == "absent":
        driver, why = False, "driver_state: absent"
    if not driver:
        problems.append(
            "driver.enabled=false needs the driver installed on the host, but the driver layer is not ({0}): "
            "declare driver_branch or driver_version and run the driver layer".format(why)
        )
    toolkit, why = _layer(layers, "container_toolkit")[0::2]
    if not toolkit:
        problems.append(
            "toolkit.enabled=false needs the Container Toolkit on the host, but the container_toolkit layer is not "
            "managed ({0}): declare container_toolkit_version and run the container_toolkit layer".format(why)
        )
    runtime, runtime_vars, why = _layer(layers, "container_runtime")
    if not runtime:
        problems.append(
            "the Operator's pods run with runtimeClassName {0}, but the container_runtime layer is not managed ({1}): "
            "declare container_runtime_engine and run the container_runtime layer".format(RUNTIME_HANDLER, why)
        )
    elif not boolean(runtime_vars.get("container_runtime_cdi", False), strict=False):
        problems.append("cdi.enabled=true (and the DRA driver) need CDI on in the engine, but container_runtime_cdi is false: set container_runtime_cdi: true")
    return problems


def _check_settings(settings: t.Mapping[str, t.Any]) -> list[str]:
    problems = []
    if settings.get("dra", "") not in DRA_WORKFLOWS:
        problems.append('gpufleet_dra {0!r} is not one of "", driver, operator: set it to "" (no DRA), driver or operator'.format(settings.get("dra")))
    if settings.get("mig_owner", "gpufleet") not in MIG_OWNERS:
        problems.append("mig_owner {0!r} is not gpufleet or dra_driver".format(settings.get("mig_owner")))
    if settings.get("mig_strategy") not in (None, "", "none") + MIG_STRATEGIES:
        problems.append("the MIG strategy {0!r} is not single or mixed: set device_plugin_mig_strategy".format(settings.get("mig_strategy")))
    for name in ("device_plugin", "gfd", "compute_domains"):
        if not isinstance(settings.get(name, False), bool):
            problems.append("operator_values_{0} must be true or false, got {1!r}".format(name, settings.get(name)))
    return problems


def operator_values(layers: t.Mapping[str, t.Any], settings: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The Helm values for one node: {"gpu-operator": {...}} and, for NVIDIA's DRA driver chart,
    {"dra-driver-nvidia-gpu": {...}} (gpufleet_dra: driver).

    layers: the gpufleet.nvidia.declared_layers answer. settings: {dra ("" | driver | operator), compute_domains,
    mig_owner (gpufleet | dra_driver), mig_strategy (single | mixed, for the device plugin), device_plugin, gfd
    (whether the Operator deploys them)}.
    """
    problems = _check_settings(settings) + _problems(layers)
    if problems:
        raise HandoverError("; ".join(problems))
    dra = settings.get("dra") or ""
    mig_owner = settings.get("mig_owner") or "gpufleet"
    compute_domains = bool(settings.get("compute_domains"))
    toolkit_vars = _layer(layers, "container_toolkit")[1]
    we_own_mig = _layer(layers, "mig")[0] and mig_owner == "gpufleet"

    operator: dict[str, t.Any] = {
        # Host-installed driver and toolkit (the Operator's "pre-installed" scenario).
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        # CDI: the engine reads the specs our cdi layer writes, and those the DRA driver writes in /var/run/cdi.
        "cdi": {"enabled": True},
    }
    if dra == "operator":
        # The Operator's DRA workflow: one GPUCluster, no ClusterPolicy (never both).
        operator["clusterPolicy"] = {"deployCR": False}
        operator["gpuCluster"] = {"deployCR": True}
        dra_driver: dict[str, t.Any] = {"computeDomains": {"enabled": compute_domains}}
        if mig_owner == "dra_driver":
            dra_driver["featureGates"] = {"DynamicMIG": True}
        operator["draDriver"] = dra_driver
    else:
        # ClusterPolicy: its operand pods run through the runtime handler our container_runtime layer configured.
        operator["operator"] = {"runtimeClass": RUNTIME_HANDLER}
        # The standalone DRA driver replaces the device plugin.
        operator["devicePlugin"] = {"enabled": bool(settings.get("device_plugin", True)) and dra != "driver"}
        operator["gfd"] = {"enabled": bool(settings.get("gfd", True))}
        # MIG Manager would re-partition the GPUs under our layout (or under the DRA driver's).
        operator["migManager"] = {"enabled": not (we_own_mig or mig_owner == "dra_driver")}
        if we_own_mig and settings.get("mig_strategy") in MIG_STRATEGIES:
            operator["mig"] = {"strategy": settings["mig_strategy"]}
        # Our udev rule (container_toolkit_dev_char_links) owns the /dev/char links; the validator leaves them be.
        if boolean(toolkit_vars.get("container_toolkit_dev_char_links", True), strict=False):
            operator["validator"] = {"driver": {"env": [{"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION", "value": "true"}]}}
    values: dict[str, t.Any] = {"gpu-operator": operator}
    if dra == "driver":
        values["dra-driver-nvidia-gpu"] = {
            "nvidiaDriverRoot": _kubernetes.DRA_DRIVER_ROOT["value"]["root"],
            "nvidiaCDIHookPath": _kubernetes.DRA_CDI_HOOK_PATHS["value"][0],
            # GPU allocation is behind this switch in the chart (docs/install.md sets it).
            "gpuResourcesEnabledOverride": True,
            "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": compute_domains}},
        }
        if mig_owner == "dra_driver":
            values["dra-driver-nvidia-gpu"]["featureGates"] = {"DynamicMIG": True}
    return values


def fleet_values(per_host: t.Mapping[str, t.Mapping[str, t.Any]]) -> dict[str, t.Any]:
    """One set of values for the nodes of one Helm release (one cluster).

    MIG is per node: MIG Manager is off if it is off for any node (it would re-partition that node's GPUs; on
    the others it has nothing to do), and the MIG nodes must agree on one strategy. Every other value must be
    the same for all; else the error names the keys and who differs.
    """
    if not per_host:
        raise HandoverError("no host to make values for: run the playbook against the GPU nodes of one cluster")
    rest: dict[str, dict[str, t.Any]] = {}
    manager: list[bool] = []
    strategies: dict[str, list[str]] = {}
    for host, values in sorted(per_host.items()):
        chart = {key: dict(value) if isinstance(value, t.Mapping) else value for key, value in (values.get("gpu-operator") or {}).items()}
        if "migManager" in chart:
            manager.append(bool(chart.pop("migManager").get("enabled")))
        if "mig" in chart:
            strategies.setdefault(str(chart.pop("mig").get("strategy")), []).append(host)
        rest[host] = dict(values, **{"gpu-operator": chart})
    if len(strategies) > 1:
        raise HandoverError(
            "the MIG nodes need different MIG strategies ({0}); one Helm release has one mig.strategy: give "
            "operator_values_mig_strategy one value for the cluster".format(
                "; ".join("{0}: {1}".format(k, ", ".join(v)) for k, v in sorted(strategies.items()))
            )
        )
    groups: dict[str, list[str]] = {}
    for host, values in rest.items():
        groups.setdefault(repr(sorted(_flatten(values).items())), []).append(host)
    if len(groups) > 1:
        flats = [_flatten(values) for values in rest.values()]
        differing = sorted({key for flat in flats for key in flat if any(other.get(key) != flat.get(key) for other in flats)})
        raise HandoverError(
            "the hosts need different values ({0}: {1}); one Helm release serves them all: run the playbook per "
            "cluster (--limit) or make their declarations agree".format(", ".join(differing), " | ".join(", ".join(hosts) for hosts in groups.values()))
        )
    merged = dict(next(iter(rest.values())))
    operator = dict(merged["gpu-operator"])
    if manager:
        operator["migManager"] = {"enabled": all(manager)}
    if strategies:
        operator["mig"] = {"strategy": next(iter(strategies))}
    merged["gpu-operator"] = operator
    return merged


def _flatten(values: t.Mapping[str, t.Any], prefix: str = "") -> dict[str, t.Any]:
    flat: dict[str, t.Any] = {}
    for key, value in values.items():
        path = prefix + str(key)
        if isinstance(value, t.Mapping) and value:
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value if not isinstance(value, list) else repr(value)
    return flat


def key_paths(values: t.Mapping[str, t.Any]) -> list[str]:
    """Every key path a values mapping sets (a.b.c), leaves only."""
    return sorted(_flatten(values))
