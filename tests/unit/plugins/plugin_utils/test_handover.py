# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU Operator's (and the DRA driver's) Helm values for host-managed
nodes: what they say for each declaration, that every key exists in the
chart it is for (the charts' own values.yaml and, for what values.yaml leaves
out, the template that reads it), and clear errors for nodes that are not
host-managed. The playbook is run on the example fleet."""

from __future__ import annotations

import re
import typing as t
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.filter.handover import operator_fleet_values, operator_values
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _handover
from ansible_collections.gpufleet.nvidia.tests.unit.playbooks.test_validate import EXAMPLES, playbook

CHARTS = Path(__file__).resolve().parents[1] / "fixtures" / "charts"


def chart_paths(values_file: str, template: str | None = None) -> set[str]:
    """Every key path the chart knows: values.yaml's (every prefix; a free map, `{}` there, as `<path>.*`) and
    `.Values.a.b` the template reads."""
    known: set[str] = set()

    def walk(node: t.Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                path = prefix + str(key)
                known.add(path)
                if value == {}:
                    known.add(path + ".*")
                walk(value, path + ".")

    walk(yaml.safe_load((CHARTS / values_file).read_text()), "")
    if template:
        for match in re.finditer(r"\.Values\.([A-Za-z0-9_.]+)", (CHARTS / template).read_text()):
            parts = match.group(1).split(".")
            known.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return known


OPERATOR_KEYS = chart_paths("gpu-operator-values.yaml", "gpu-operator-clusterpolicy.yaml.tmpl")
DRA_KEYS = chart_paths("dra-driver-nvidia-gpu-values.yaml")


def layers(**changes: t.Any) -> dict[str, t.Any]:
    """A host-managed node as declared_layers answers (the example fleet's shape)."""
    declared = {
        "driver": {"managed": True, "reason": "declared", "vars": {"driver_version": "580.95.05"}},
        "container_toolkit": {"managed": True, "reason": "declared", "vars": {"container_toolkit_version": "1.20.1"}},
        "container_runtime": {"managed": True, "reason": "declared", "vars": {"container_runtime_engine": "containerd", "container_runtime_cdi": True}},
        "cdi": {"managed": True, "reason": "declared", "vars": {}},
        "crictl": {"managed": True, "reason": "declared", "vars": {}},
        "mig": {"managed": False, "reason": "mig_label is empty", "vars": {"mig_label": ""}},
    }
    for layer, value in changes.items():
        declared[layer] = value
    return declared


MIG_ON = {"managed": True, "reason": "mig_label is 'inference'", "vars": {"mig_label": "inference"}}
SETTINGS = {"dra": "", "mig_owner": "gpufleet", "mig_strategy": "mixed", "device_plugin": True, "gfd": True, "compute_domains": False}


def values(layer_changes: dict[str, t.Any] | None = None, **settings: t.Any) -> dict[str, t.Any]:
    return operator_values(layers(**(layer_changes or {})), dict(SETTINGS, **settings))


def flat_keys(found: dict[str, t.Any]) -> list[str]:
    return _handover.key_paths(found)


def unknown(found: dict[str, t.Any], known: set[str]) -> set[str]:
    """Emitted key paths the chart does not know (a child of a free map is known)."""
    return {path for path in flat_keys(found) if path not in known and path.rsplit(".", 1)[0] + ".*" not in known}


def test_a_host_managed_node_without_mig():
    assert values()["gpu-operator"] == {
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "cdi": {"enabled": True},
        "operator": {"runtimeClass": "nvidia"},
        "devicePlugin": {"enabled": True},
        "gfd": {"enabled": True},
        "migManager": {"enabled": True},
        "validator": {"driver": {"env": [{"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION", "value": "true"}]}},
    }


def test_our_mig_turns_mig_manager_off_with_the_strategy():
    operator = values({"mig": MIG_ON})["gpu-operator"]
    assert operator["migManager"] == {"enabled": False}
    assert operator["mig"] == {"strategy": "mixed"}


def test_the_validator_creates_the_links_where_our_udev_rule_does_not():
    toolkit = {"managed": True, "reason": "declared", "vars": {"container_toolkit_dev_char_links": False}}
    assert "validator" not in values({"container_toolkit": toolkit})["gpu-operator"]


def test_the_standalone_dra_driver_replaces_the_device_plugin_and_gets_its_own_values():
    found = values({"mig": MIG_ON}, dra="driver", mig_owner="dra_driver", compute_domains=True)
    assert found["gpu-operator"]["devicePlugin"] == {"enabled": False}
    assert found["gpu-operator"]["migManager"] == {"enabled": False}
    assert "mig" not in found["gpu-operator"]  # the DRA driver's MIG, not a layout of ours
    assert found["dra-driver-nvidia-gpu"] == {
        "nvidiaDriverRoot": "/",
        "nvidiaCDIHookPath": "/usr/bin/nvidia-cdi-hook",
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": True}},
        "featureGates": {"DynamicMIG": True},
    }


def test_the_operators_dra_workflow():
    operator = values(dra="operator", compute_domains=False)["gpu-operator"]
    assert operator == {
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "cdi": {"enabled": True},
        "clusterPolicy": {"deployCR": False},
        "gpuCluster": {"deployCR": True},
        "draDriver": {"computeDomains": {"enabled": False}},
    }


@pytest.mark.parametrize(
    "layer_changes,settings",
    [
        ({}, {}),
        ({"mig": MIG_ON}, {}),
        ({"mig": MIG_ON}, {"dra": "driver", "mig_owner": "dra_driver", "compute_domains": True}),
        ({}, {"dra": "operator", "mig_owner": "dra_driver", "compute_domains": True}),
    ],
)
def test_every_emitted_key_exists_in_its_chart(layer_changes, settings):
    found = values(layer_changes, **settings)
    assert unknown(found["gpu-operator"], OPERATOR_KEYS) == set()
    assert unknown(found.get("dra-driver-nvidia-gpu", {}), DRA_KEYS) == set()


def test_the_key_check_can_fail():
    """A key the chart lacks (the old cdi.default) is caught."""
    assert unknown({"cdi": {"default": True, "enabled": True}}, OPERATOR_KEYS) == {"cdi.default"}
    assert "validator.driver.env" in OPERATOR_KEYS  # read by the ClusterPolicy template only


@pytest.mark.parametrize(
    "layer_changes,message",
    [
        (
            {"driver": {"managed": False, "reason": "no driver_* variables, no driver role in this collection", "vars": {}}},
            "driver.enabled=false needs the driver installed on the host, but the driver layer is not (no driver_* variables",
        ),
        (
            {"driver": {"managed": True, "reason": "declared", "vars": {"driver_state": "absent"}}},
            "driver.enabled=false needs the driver installed on the host, but the driver layer is not (driver_state: absent)",
        ),
        (
            {"container_toolkit": {"managed": False, "reason": "x", "vars": {}}},
            "toolkit.enabled=false needs the Container Toolkit on the host",
        ),
        (
            {"container_runtime": {"managed": True, "reason": "declared", "vars": {"container_runtime_cdi": False}}},
            "cdi.enabled=true (and the DRA driver) need CDI on in the engine, but container_runtime_cdi is false: set container_runtime_cdi: true",
        ),
    ],
)
def test_a_node_that_is_not_host_managed_is_refused(layer_changes, message):
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        values(layer_changes)


def test_bad_settings_name_the_variable():
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="gpufleet_dra 'yes' is not one of"):
        values(dra="yes")
    with pytest.raises(AnsibleFilterError, match="set device_plugin_mig_strategy"):
        values({"mig": MIG_ON}, mig_strategy="many")


def test_the_fleet_merges_mig_per_node_and_refuses_other_differences():
    plain, mig = values(), values({"mig": MIG_ON})
    merged = operator_fleet_values({"a": plain, "b": mig})["gpu-operator"]
    assert merged["migManager"] == {"enabled": False} and merged["mig"] == {"strategy": "mixed"}
    assert operator_fleet_values({"a": plain, "b": plain})["gpu-operator"]["migManager"] == {"enabled": True}

    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match=r"different values \(gpu-operator.devicePlugin.enabled: a \| b\)"):
        operator_fleet_values({"a": plain, "b": values(device_plugin=False)})
    with pytest.raises(AnsibleFilterError, match="different MIG strategies"):
        operator_fleet_values({"a": mig, "b": values({"mig": MIG_ON}, mig_strategy="single")})


def test_the_playbook_writes_the_example_fleets_values(tmp_path):
    """The whole example fleet (MIG on the inference nodes), then only the training nodes, then a refusal."""
    out = tmp_path / "values.yaml"
    run = playbook("-i", str(EXAMPLES / "fleet"), "playbooks/operator_values.yml", "-e", "operator_values_path={0}".format(out))
    assert run.returncode == 0, run.stdout
    fleet = yaml.safe_load(out.read_text())
    assert fleet["driver"] == {"enabled": False} and fleet["toolkit"] == {"enabled": False} and fleet["cdi"] == {"enabled": True}
    assert fleet["migManager"] == {"enabled": False} and fleet["mig"] == {"strategy": "mixed"}
    assert unknown(fleet, OPERATOR_KEYS) == set()

    run = playbook("-i", str(EXAMPLES / "fleet"), "playbooks/operator_values.yml", "--limit", "training", "-e", "operator_values_path={0}".format(out))
    assert run.returncode == 0, run.stdout
    assert yaml.safe_load(out.read_text())["migManager"] == {"enabled": True}

    run = playbook(
        "-i", str(EXAMPLES / "fleet"), "playbooks/operator_values.yml", "--limit", "training",
        "-e", "operator_values_path={0}".format(tmp_path / "refused.yaml"), "-e", "container_runtime_cdi=false",
    )  # fmt: skip
    assert run.returncode != 0
    assert "set container_runtime_cdi: true" in run.stdout
    assert not (tmp_path / "refused.yaml").exists()
