# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A boot command installed as its role installs it: the node runtime that
gpufleet.nvidia.node_runtime builds, under <prefix>/lib/gpufleet/<version>-<hash>/,
and the command in <prefix>/sbin/ with that directory written into it (the
role's `replace` of the placeholder)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gpufleet.nvidia.plugins.action.node_runtime import MANIFEST, build_runtime

PLACEHOLDER = "@GPUFLEET_NODE_RUNTIME@"


def install_runtime(prefix: Path) -> Path:
    built = build_runtime()
    version_dir = prefix / "lib" / "gpufleet" / built.name
    for rel, content in built.files.items():
        (version_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (version_dir / rel).write_bytes(content)
    (version_dir / MANIFEST).write_text(built.manifest)
    return version_dir


def install_command(prefix: Path, source: Path) -> Path:
    """The runtime and the command; returns the command's path."""
    version_dir = install_runtime(prefix)
    text = source.read_text()
    assert text.count(PLACEHOLDER) == 1, "{0}: the runtime placeholder must occur once".format(source)
    (prefix / "sbin").mkdir(parents=True, exist_ok=True)
    command = prefix / "sbin" / source.name
    command.write_text(text.replace(PLACEHOLDER, str(version_dir)))
    return command
