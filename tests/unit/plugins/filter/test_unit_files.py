# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""systemd_unit_files: a role's units as node_files entries, one per unit, in order."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.unit_files import FilterModule, systemd_env_value, systemd_exec, systemd_setting, systemd_unit_files


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


# --- values into units and env files ---------------------------------------------------------------------------------


def test_a_command_line_keeps_its_words_and_has_no_specifier_or_variable() -> None:
    assert systemd_exec(["/usr/bin/flock", "/run/lock/gpufleet.lock", "/usr/local/sbin/gpufleet-mig", "apply"]) == (
        "/usr/bin/flock /run/lock/gpufleet.lock /usr/local/sbin/gpufleet-mig apply"
    )
    assert systemd_exec(["/usr/bin/nvidia-ctk", "--output=/var/run/cdi/nvidia 50%.yaml", "--x=$HOME", 'say "hi"', "a\\b"]) == (
        '/usr/bin/nvidia-ctk "--output=/var/run/cdi/nvidia 50%%.yaml" "--x=$$HOME" "say \\"hi\\"" "a\\\\b"'
    )


@pytest.mark.parametrize("word", ["inference\nExecStartPre=/bin/sh -c id", "a\rb", "tab\there", "nul\x00"])
def test_a_control_character_is_refused_naming_the_word(word: str) -> None:
    with pytest.raises(AnsibleFilterError, match=r"systemd_exec: word 1: .* holds a control character"):
        systemd_exec(["/bin/echo", word])
    with pytest.raises(AnsibleFilterError, match=r"systemd_env_value: mig_label: .* holds a control character"):
        systemd_env_value(word, "mig_label")
    with pytest.raises(AnsibleFilterError, match=r"systemd_setting: mig_config_dir: .* holds a control character"):
        systemd_setting(word, "mig_config_dir")


def test_settings_and_env_values() -> None:
    assert systemd_setting("/etc/gpufleet/50%/mig") == "/etc/gpufleet/50%%/mig"
    assert systemd_env_value("all-balanced") == "all-balanced"
    assert systemd_env_value('a "b" #c\\') == '"a \\"b\\" #c\\\\"'
    with pytest.raises(AnsibleFilterError, match="give the command as a non-empty list"):
        systemd_exec("/bin/echo hi")


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_systemd_parses_the_command_lines(tmp_path: Path) -> None:
    """systemd-analyze verify, systemd's own parser: a quote left open or a bad escape fails the unit."""
    lines = [
        systemd_exec(["/bin/echo", "a b", "50%", "$HOME", 'un"quoted', "back\\slash", "'single'"]),
        systemd_exec(["/bin/true"]),
    ]
    for number, line in enumerate(lines):
        unit = tmp_path / "t{0}.service".format(number)
        unit.write_text("[Service]\nType=oneshot\nExecStart={0}\n".format(line))
        verified = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, check=False)
        assert verified.returncode == 0 and not verified.stderr.strip(), (line, verified.stderr)
    broken = tmp_path / "broken.service"
    broken.write_text('[Service]\nType=oneshot\nExecStart=/bin/echo "a b\n')
    assert subprocess.run(["systemd-analyze", "verify", "--man=no", str(broken)], capture_output=True, check=False).returncode != 0
