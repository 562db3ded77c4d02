# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""device_plugin_problems: the device plugin role's declaration checks, each problem with its fix."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.device_plugin import FilterModule, device_plugin_problems

ROLE_VARS = yaml.safe_load((Path(__file__).parents[4] / "roles" / "device_plugin" / "vars" / "main.yml").read_text())

SPLIT = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
HALF = [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}, {"devices": [2, 3], "mig-enabled": False}]
MIXED_PROFILES = [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}, {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]


def problems(time_slicing: list[t.Any], **settings: t.Any) -> list[str]:
    """The filter as the role calls it, with the role's own name rules."""
    arguments = {
        "config_path": "/etc/gpufleet/device-plugin/config.yaml",
        "mig_strategy": "none",
        "name_pattern": ROLE_VARS["__device_plugin_name_pattern"],
        "name_max": ROLE_VARS["__device_plugin_name_max"],
        **settings,
    }
    return device_plugin_problems(time_slicing, **arguments)


def test_a_sound_declaration_has_no_problems() -> None:
    assert FilterModule().filters()["device_plugin_problems"] is device_plugin_problems
    assert problems([]) == []
    assert problems([{"name": "nvidia.com/gpu", "replicas": 4}]) == []
    assert (
        problems(
            [
                {"name": "nvidia.com/mig-1g.10gb", "replicas": "2", "devices": "all"},
                {"name": "nvidia.com/gpu", "replicas": 3},
            ],
            mig_strategy="mixed",
            mig_label="split",
            mig_layout=SPLIT,
        )
        == []
    )


def test_a_relative_config_path_is_named() -> None:
    assert problems([], config_path="etc/config.yaml") == ['device_plugin_config_path must be an absolute path, got "etc/config.yaml"']


@pytest.mark.parametrize(
    "strategy, layout, expected",
    [
        (
            "none",
            SPLIT,
            'device_plugin_mig_strategy is none, but mig_label "lbl" turns MIG on: the plugin would offer '
            "those GPUs whole and cannot hand them out; set mixed (or single when every GPU has MIG on with "
            "the same devices), or leave it unset to follow the layout",
        ),
        (
            "single",
            HALF,
            "device_plugin_mig_strategy is single, which needs MIG on every GPU with the same MIG devices, "
            'but mig_label "lbl" does not declare that; set mixed, or declare a uniform layout',
        ),
        (
            "single",
            MIXED_PROFILES,
            "device_plugin_mig_strategy is single, which needs MIG on every GPU with the same MIG "
            'devices, but mig_label "lbl" does not declare that; set mixed, or declare a uniform '
            "layout",
        ),
    ],
)
def test_a_strategy_against_the_mig_layout_is_named(strategy: str, layout: list, expected: str) -> None:
    assert problems([], mig_strategy=strategy, mig_label="lbl", mig_layout=layout) == [expected]


@pytest.mark.parametrize(
    "strategy, layout",
    [
        ("single", SPLIT),
        ("single", []),
        ("mixed", HALF),
        ("none", [{"devices": "all", "mig-enabled": False}]),
        # The same MIG devices in another key order are the same devices.
        (
            "single",
            [
                {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1}},
                {"devices": [1], "mig-enabled": True, "mig-devices": {"2g.20gb": 1, "1g.10gb": 2}},
            ],
        ),
    ],
)
def test_a_strategy_that_fits_the_layout_passes(strategy: str, layout: list) -> None:
    assert problems([], mig_strategy=strategy, mig_label="lbl", mig_layout=layout) == []


def test_every_problem_of_every_entry_is_listed_in_order() -> None:
    found = problems(
        [
            {"name": "gpu", "replicas": 1},
            {"name": "nvidia.com/mig-1g.10gb", "replicas": 2},
            {"name": "nvidia.com/gpu", "replicas": "two", "rename": "shared", "devices": "some"},
            {"name": "nvidia.com/gpu", "replicas": 2, "devices": 0},
            {"name": "nvidia.com/" + "a" * 60, "replicas": True, "devices": []},
            {"name": "nvidia.com/gpu.x", "replicas": 2, "devices": {"a": 1}},
            {"name": "nvidia.com/gpu.y", "replicas": 2, "devices": True},
        ]
    )
    assert found == [
        "device_plugin_time_slicing[0] (gpu): the name is not a resource of the device plugin; use nvidia.com/gpu, "
        "or nvidia.com/mig-<profile> (e.g. nvidia.com/mig-1g.10gb) with device_plugin_mig_strategy: mixed (lower "
        "case, at most 63 characters)",
        "device_plugin_time_slicing[0] (gpu): replicas is 1; time-slicing needs replicas >= 2 (one replica is the whole GPU: remove the entry instead)",
        "device_plugin_time_slicing[1] (nvidia.com/mig-1g.10gb): MIG resources are advertised by name only with "
        "device_plugin_mig_strategy: mixed (it is none); with single they are nvidia.com/gpu",
        "device_plugin_time_slicing[2] (nvidia.com/gpu): the resource is named more than once; give it one entry",
        'device_plugin_time_slicing[2] (nvidia.com/gpu): replicas is "two"; time-slicing needs replicas >= 2 (one '
        "replica is the whole GPU: remove the entry instead)",
        'device_plugin_time_slicing[2] (nvidia.com/gpu): rename "shared" would be ignored: the device plugin drops a custom '
        "rename (it logs 'Setting the rename field ... is not yet supported'); remove it, and set "
        "device_plugin_rename_by_default: true to advertise nvidia.com/gpu.shared",
        'device_plugin_time_slicing[2] (nvidia.com/gpu): devices must be "all", a count >= 1 or a list of GPU indexes or UUIDs, got "some"',
        'device_plugin_time_slicing[3] (nvidia.com/gpu): devices must be "all", a count >= 1 or a list of GPU indexes or UUIDs, got 0',
        "device_plugin_time_slicing[4] (nvidia.com/" + "a" * 60 + "): the name is not a resource of the device "
        "plugin; use nvidia.com/gpu, or nvidia.com/mig-<profile> (e.g. nvidia.com/mig-1g.10gb) with "
        "device_plugin_mig_strategy: mixed (lower case, at most 63 characters)",
        "device_plugin_time_slicing[4] (nvidia.com/" + "a" * 60 + "): replicas is true; time-slicing needs replicas "
        ">= 2 (one replica is the whole GPU: remove the entry instead)",
        "device_plugin_time_slicing[4] (nvidia.com/" + "a" * 60 + '): devices must be "all", a count >= 1 or a list of GPU indexes or UUIDs, got []',
        'device_plugin_time_slicing[5] (nvidia.com/gpu.x): devices must be "all", a count >= 1 or a list of GPU indexes or UUIDs, got {"a": 1}',
        'device_plugin_time_slicing[6] (nvidia.com/gpu.y): devices must be "all", a count >= 1 or a list of GPU indexes or UUIDs, got true',
    ]


@pytest.mark.parametrize(
    "entry,message",
    [
        # The device plugin's DisableResourceNamingInConfig (api/config/v1) rewrites these at start-up.
        ({"name": "nvidia.com/gpu", "replicas": 2, "rename": "nvidia.com/gpu.dev"}, 'rename "nvidia.com/gpu.dev" would be ignored'),
        ({"name": "nvidia.com/gpu", "replicas": 2, "rename": "nvidia.com/gpu.shared"}, 'rename "nvidia.com/gpu.shared" would be ignored'),
        ({"name": "nvidia.com/gpu", "replicas": 2, "devices": [0, 1]}, "devices [0, 1] would be ignored: the device plugin shares every GPU"),
        ({"name": "nvidia.com/gpu", "replicas": 2, "devices": 2}, "devices 2 would be ignored"),
    ],
)
def test_what_the_plugin_would_rewrite_is_refused_with_the_fix(entry: dict, message: str) -> None:
    found = problems([entry])
    assert len(found) == 1 and message in found[0], found


def test_not_a_list_is_refused_naming_the_variable() -> None:
    with pytest.raises(AnsibleFilterError, match="device_plugin_problems: device_plugin_time_slicing must be a list"):
        problems({"name": "nvidia.com/gpu"})  # type: ignore[arg-type]
