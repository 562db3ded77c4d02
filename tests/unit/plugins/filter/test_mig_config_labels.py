# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""mig_config_labels: the controller-side check of a mig-parted config."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.mig_config_labels import FilterModule, mig_config_labels


def test_labels_are_sorted() -> None:
    config = {
        "version": "v1",
        "mig-configs": {
            "b": [{"devices": "all", "mig-enabled": False}],
            "a": [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
        },
    }
    assert mig_config_labels(config) == ["a", "b"]
    assert FilterModule().filters()["mig_config_labels"] is mig_config_labels


def test_invalid_config_names_the_field() -> None:
    config = {"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True, "mig-device": {}}]}}
    with pytest.raises(AnsibleFilterError) as caught:
        mig_config_labels(config)
    assert str(caught.value).startswith("mig_config_labels: invalid MIG config: mig-configs.a[0]: unknown key 'mig-device' (did you mean 'mig-devices'?)")
