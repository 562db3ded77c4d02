# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""declared_layers: host values over the layer role's defaults; what counts as managed."""

from __future__ import annotations

import json
import os
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.lookup import declared_layers
from ansible_collections.gpufleet.nvidia.plugins.lookup.declared_layers import declare, role_defaults
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._layers import LAYER_VARIABLES, LAYERS
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play


def test_unresolved_defaults_are_named_not_guessed():
    result = declare("driver", {}, {"driver_state": "present"}, ["driver_branch"])
    assert result["unresolved"] == ["driver_branch"]
    assert "driver_branch" not in result["vars"]


def test_host_values_win_over_role_defaults():
    defaults = {"driver_branch": "580", "driver_state": "present", "driver_private_thing": 1}
    result = declare("driver", {"driver_branch": "550"}, defaults)
    assert result["vars"] == {"driver_branch": "550", "driver_state": "present"}
    assert result["managed"] and result["role"]
    assert result["reason"] == "declared by host variables (driver_branch)"


def test_role_defaults_alone_make_a_layer_managed():
    result = declare("crictl", {}, {"crictl_version": "", "crictl_kubernetes_version": "1.33"})
    assert result["managed"] and "role's defaults" in result["reason"]


def test_no_role_and_no_variables_is_not_managed():
    result = declare("cdi", {}, None)
    assert not result["managed"] and result["vars"] == {}


def test_mig_is_managed_only_with_a_label():
    assert not declare("mig", {}, {"mig_label": ""})["managed"]
    assert declare("mig", {"mig_label": "all-1g.5gb"}, {"mig_label": ""})["managed"]


def test_mig_owned_by_the_dra_driver_is_not_managed():
    """mig_owner: dra_driver hands MIG to NVIDIA's DRA driver: verify and preflight judge no layout, even with a label."""
    handed = declare("mig", {"mig_label": "all-1g.5gb", "mig_owner": "dra_driver"}, {"mig_label": "", "mig_owner": "gpufleet"})
    assert not handed["managed"]
    assert handed["reason"] == "mig_owner is dra_driver: NVIDIA's DRA driver owns MIG"
    assert declare("mig", {"mig_label": "all-1g.5gb"}, {"mig_label": "", "mig_owner": "gpufleet"})["managed"]


@pytest.mark.parametrize(
    "layer,switch,off",
    [("device_plugin", "device_plugin_config", False), ("dcgm", "dcgm_enabled", False)],
)
def test_a_layer_with_a_switch_is_managed_only_where_the_host_turns_it_on(layer: str, switch: str, off: t.Any) -> None:
    """The device plugin and DCGM roles end at once unless their switch is on: a version declared without it
    (or the role's defaults alone) manages nothing, so preflight judges nothing of it."""
    versions = {"device_plugin": {"device_plugin_version": "v0.17.0"}, "dcgm": {"dcgm_version": "4.2.0"}}[layer]
    defaults = dict(role_defaults(layer) or {})
    assert defaults[switch] is off
    assert declare(layer, {}, defaults)["managed"] is False
    stays_off = declare(layer, dict(versions), defaults)
    assert stays_off["managed"] is False and stays_off["reason"] == "{0} is off".format(switch)
    on = declare(layer, dict(versions, **{switch: "yes"}), defaults)
    assert on["managed"] is True and on["reason"] == "{0} is on".format(switch)
    assert on["vars"].items() >= versions.items()


def test_role_defaults_are_read_from_the_collection(tmp_path: Path):
    defaults = tmp_path / "crictl" / "defaults"
    defaults.mkdir(parents=True)
    (defaults / "main.yml").write_text("---\ncrictl_version: v1.33.0\ncrictl_kubernetes_version: '1.33'\n")
    assert role_defaults("crictl", tmp_path) == {"crictl_version": "v1.33.0", "crictl_kubernetes_version": "1.33"}
    assert role_defaults("driver", tmp_path) is None


def test_role_defaults_are_parsed_once_per_file_version(tmp_path: Path, monkeypatch):
    defaults = tmp_path / "crictl" / "defaults"
    defaults.mkdir(parents=True)
    path = defaults / "main.yml"
    path.write_text("---\ncrictl_version: v1.33.0\ncrictl_checksums: {a: b}\n")
    os.utime(path, ns=(1, 1_000_000_000))
    parsed = []
    real_load = declared_layers.yaml.load
    monkeypatch.setattr(declared_layers.yaml, "load", lambda *a, **k: parsed.append(1) or real_load(*a, **k))
    first = role_defaults("crictl", tmp_path)
    # A caller's change stays its own.
    first["crictl_checksums"]["a"] = "changed"
    assert role_defaults("crictl", tmp_path) == {"crictl_version": "v1.33.0", "crictl_checksums": {"a": "b"}}
    assert len(parsed) == 1
    # An edited file (a new modification time) is read again.
    path.write_text("---\ncrictl_version: v1.34.0\n")
    os.utime(path, ns=(1, 2_000_000_000))
    assert role_defaults("crictl", tmp_path) == {"crictl_version": "v1.34.0"}
    assert len(parsed) == 2


def test_layers_are_in_site_order():
    assert LAYERS == ("driver", "container_toolkit", "container_runtime", "cdi", "crictl", "mig", "device_plugin", "dcgm", "imex")
    assert all(name.startswith(layer + "_") for layer, names in LAYER_VARIABLES.items() for name in names)


def test_lookup_templates_host_values_through_ansible(tmp_path: Path):
    """Run the lookup as a playbook does: templated inventory values, unknown layers refused."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        """
- hosts: localhost
  gather_facts: false
  vars:
    wanted_branch: "550"
    driver_branch: "{{ wanted_branch }}"
    mig_label: ""
  tasks:
    - ansible.builtin.copy:
        content: "{{ lookup('gpufleet.nvidia.declared_layers') | to_json }}"
        dest: "%s"
"""
        % (tmp_path / "out.json")
    )
    local_play(playbook)
    layers = json.loads((tmp_path / "out.json").read_text())
    assert layers["driver"]["vars"]["driver_branch"] == "550"
    assert layers["driver"]["managed"] is True
    assert layers["mig"]["managed"] is False
    assert set(layers) == set(LAYERS)


@pytest.mark.parametrize("term", ["gpu"])
def test_unknown_layer(term: str):
    from ansible.errors import AnsibleLookupError

    from ansible_collections.gpufleet.nvidia.plugins.lookup.declared_layers import LookupModule

    with pytest.raises(AnsibleLookupError, match="unknown layer"):
        LookupModule().run([term], {})
