# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_read_probes: every read the roles give node_reads_info is a probe; commands that change the node are none."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import drivers as _driver_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import health as _health_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import toolkit as _toolkit_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils._read_probes import probe_of
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import imex as _imex_check
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _dra, _pinned

ROOT = Path(__file__).resolve().parents[4]
VERIFY_VARS = yaml.safe_load((ROOT / "roles" / "verify" / "vars" / "main.yml").read_text())

# The commands the roles send, as they render (the templated ones with a typical value).
READS: list[tuple[str, list[t.Any]]] = (
    [
        ("version", ["containerd", "--version"]),
        ("version", ["dockerd", "--version"]),
        ("version", ["/usr/local/bin/crictl", "--version"]),
        ("path test", ["test", "-e", "/usr/bin/nvidia-container-runtime"]),
        ("unit properties", ["systemctl", "show", "--property=ActiveEnterTimestamp", "--timestamp=unix", "--value", "containerd.service"]),
        ("unit properties", list(_health_facts.SERVICE_STATES_COMMAND["value"])),
        ("unit properties", list(_dra.IMEX_COMMAND)),
        ("file status", ["stat", "--format=%Y", "--", "/etc/containerd/config.toml"]),
        ("file status", ["stat", "--format=%n=>%F", "--", "/run/containerd/containerd.sock", "/usr/local/bin/crictl"]),
        ("dpkg package status", ["dpkg-query", "--show", "--showformat=${db:Status-Abbrev}\\n", "--", "containerd"]),
        ("dpkg package status", ["dpkg-query", "-W", "-f=${Package}\\n", "nvidia-driver"]),
        ("rpm package query", ["rpm", "-qa", "--qf", "%{NAME}\\n", "nvidia-driver"]),
        ("rpm package query", _pinned.dnf_reads({"packages": ["nvidia-container-toolkit"]})["rpm"]),
        ("dnf version locks", _pinned.dnf_reads({"packages": ["nvidia-container-toolkit"]})["locks"]),
        ("containerd plugins", ["ctr", "--address", "/run/containerd/containerd.sock", "plugins", "ls"]),
        ("crictl information", ["crictl", "--runtime-endpoint", "unix:///run/containerd/containerd.sock", "info"]),
        ("crictl information", ["/usr/local/bin/crictl", "--config", "/etc/crictl.yaml", "version"]),
        ("crictl information", ["crictl", "info"]),
        (
            "Container Toolkit configuration, printed",
            ["nvidia-ctk", "--quiet", "config", "--config-file=/etc/nvidia-container-runtime/config.toml", "--set=nvidia-container-cli.no-cgroups=false"],
        ),
        ("/dev/char listing", list(_toolkit_facts.DEV_CHAR_LISTING["value"])),
        ("DRA driver paths", _dra.paths_command()),
        ("kernel module listing", list(_driver_facts.KERNEL_MODULE_LISTING["value"])),
        ("unit properties", _imex_check.reads("")["commands"]["imex_unit"]),
        ("IMEX status", _imex_check.reads("/etc/nvidia-imex/imex_ctrl.sock")["commands"]["imex_query"]),
        ("IMEX status", _imex_check.reads("")["commands"]["imex_query"]),
        ("IMEX status", _imex_check.reads("")["commands"]["imex_domain"]),
        ("IMEX status", ["nvidia-imex-ctl", "-i", "10.0.0.1", "50005", "-N", "-H"]),
    ]
    + [("engine", list(argv)) for argv in VERIFY_VARS["__verify_engine_commands"].values()]
    + [("version", list(argv)) for argv in VERIFY_VARS["__verify_engine_version_commands"].values()]
)

CHANGES = [
    ["systemctl", "restart", "containerd"],
    ["systemctl", "--no-pager", "daemon-reload"],
    ["rpm", "-e", "nvidia-driver"],
    ["rpm", "--import", "/tmp/key"],
    ["nvidia-ctk", "config", "--in-place", "--set=a=b"],
    ["nvidia-ctk", "runtime", "configure"],
    ["containerd", "config", "default"],
    ["crictl", "rmp", "-a"],
    ["crictl", "--config", "info", "rmp"],  # --config takes "info" as its value: the verb is rmp
    ["ctr", "images", "rm", "x"],
    ["find", "/dev", "-delete"],
    ["sh", "-c", "rm -rf /etc/cdi"],
    ["sh", "-c", _driver_facts.KERNEL_MODULE_LISTING["value"][2] + "; rm -rf /boot"],
    ["docker", "rm", "-f", "x"],
    ["crio", "wipe"],
    ["apt-get", "install", "x"],
    ["dnf", "versionlock", "add", "x"],
    ["dnf", "-q", "versionlock", "delete", "x"],
    ["dnf", "install", "versionlock"],
    ["containerd"],
    # nvidia-imex-ctl: -n monitors without end; two asks at once, or an unknown option, are no probe.
    ["nvidia-imex-ctl", "-n"],
    ["nvidia-imex-ctl", "-q", "-N"],
    ["nvidia-imex-ctl", "-c", "/etc/nvidia-imex/config.cfg"],
    ["nvidia-imex-ctl", "-s", "-t", "100"],
    ["nvidia-imex-ctl", "-u"],
    [],
]


@pytest.mark.parametrize("kind,argv", READS, ids=lambda value: " ".join(map(str, value))[:60] if isinstance(value, list) else value)
def test_every_read_of_the_roles_is_a_probe(kind: str, argv: list[t.Any]) -> None:
    probe = probe_of(argv)
    assert probe is not None, argv
    if kind != "engine":
        assert probe == kind


@pytest.mark.parametrize("argv", CHANGES, ids=lambda argv: " ".join(argv) or "empty")
def test_a_command_that_changes_the_node_is_no_probe(argv: list[str]) -> None:
    assert probe_of(argv) is None
