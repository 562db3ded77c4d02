# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""systemd_unit_files: a role's units as node_files entries, one per unit, in order."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.unit_files import FilterModule, systemd_unit_files


def test_each_unit_gets_its_path_text_and_mode_in_order() -> None:
    assert FilterModule().filters()["systemd_unit_files"] is systemd_unit_files
    assert systemd_unit_files(["b.service", "a.path"], ["[Service]\n", "[Path]\n"]) == [
        {"path": "/etc/systemd/system/b.service", "content": "[Service]\n", "mode": "0644"},
        {"path": "/etc/systemd/system/a.path", "content": "[Path]\n", "mode": "0644"},
    ]
    assert systemd_unit_files(["x.timer"], ["t"], directory="/run/systemd/system", mode="0600") == [
        {"path": "/run/systemd/system/x.timer", "content": "t", "mode": "0600"}
    ]
    assert systemd_unit_files([], []) == []


@pytest.mark.parametrize(
    "units, texts, message",
    [
        (["a.service", "b.path"], ["only one"], r"give one text per unit \(2 units: a.service, b.path\), got list"),
        (["a.service"], "one text", r"give one text per unit .* got 'one text'"),
        ("a.service", ["x"], "give a list of unit names"),
        (["../a.service"], ["x"], "give a list of unit names"),
    ],
)
def test_mismatched_input_is_refused(units: object, texts: object, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match="systemd_unit_files: " + message):
        systemd_unit_files(units, texts)
    with pytest.raises(AnsibleFilterError, match="directory must be absolute"):
        systemd_unit_files(["a.service"], ["x"], directory="etc/systemd")
