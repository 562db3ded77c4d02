# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_group: the GPU group must match a host, by Ansible's own pattern rules."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_group import FilterModule, gpu_group

GROUPS = {
    "all": ["trn-1", "trn-2", "inf-1"],
    "ungrouped": [],
    "gpu_nodes": ["trn-1", "trn-2", "inf-1"],
    "training": ["trn-1", "trn-2"],
    "inference": ["inf-1"],
    "retired": [],
}


@pytest.mark.parametrize("pattern", ["gpu_nodes", "training", "inf-1", "gpu_nodes:&inference", "gpu_nodes:!training", "train*", "~^inf", "training,inference"])
def test_a_pattern_that_matches_hosts_is_returned_unchanged(pattern):
    assert gpu_group(pattern, GROUPS) == pattern
    assert FilterModule().filters()["gpu_group"] is gpu_group


@pytest.mark.parametrize(
    "pattern,why",
    [
        ("nosuchgroup", "'nosuchgroup' is no group or host of this inventory"),
        ("gpu_nodes:&trainnig", "'trainnig' is no group or host of this inventory"),
        ("retired", "it matches no host of this inventory"),
        ("training:&inference", "it matches no host of this inventory"),
        ("xyz*", "it matches no host of this inventory"),
    ],
)
def test_a_pattern_that_matches_nothing_names_the_variable_the_groups_and_the_fix(pattern, why):
    with pytest.raises(AnsibleFilterError) as caught:
        gpu_group(pattern, GROUPS)
    message = str(caught.value)
    assert message.startswith("gpu_group: gpufleet_gpu_group is {0!r} (default gpu_nodes): {1}".format(pattern, why))
    # The groups a user can pick from, without the implicit ones.
    assert ("The inventory's groups: gpu_nodes (3 hosts), inference (1 host), retired (0 hosts), training (2 hosts).") in message
    assert "-e gpufleet_gpu_group_allow_empty=true" in message


@pytest.mark.parametrize("allow", [True, "true", "yes", 1])
def test_an_empty_group_passes_when_allowed(allow):
    assert gpu_group("retired", GROUPS, allow) == "retired"
    assert gpu_group("nosuchgroup", GROUPS, allow) == "nosuchgroup"


@pytest.mark.parametrize("allow", [False, "false", "no", 0])
def test_an_empty_group_fails_unless_allowed(allow):
    with pytest.raises(AnsibleFilterError):
        gpu_group("retired", GROUPS, allow)


@pytest.mark.parametrize(
    "pattern,groups,allow,message",
    [
        ("", GROUPS, False, "gpu_group: gpufleet_gpu_group is '': give the inventory group"),
        (["gpu_nodes"], GROUPS, False, "gpu_group: gpufleet_gpu_group is ['gpu_nodes']: give the inventory group"),
        ("gpu_nodes", ["gpu_nodes"], False, "gpu_group: give the inventory's groups (the magic variable `groups`)"),
        ("gpu_nodes", GROUPS, "maybe", "gpu_group: gpufleet_gpu_group_allow_empty is 'maybe': give true or false"),
    ],
)
def test_bad_input_is_named(pattern, groups, allow, message):
    with pytest.raises(AnsibleFilterError) as caught:
        gpu_group(pattern, groups, allow)
    assert str(caught.value).startswith(message)


def test_an_inventory_with_no_groups_says_so():
    with pytest.raises(AnsibleFilterError) as caught:
        gpu_group("gpu_nodes", {"all": [], "ungrouped": []})
    assert "The inventory's groups: none besides all." in str(caught.value)
