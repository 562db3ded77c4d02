# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""containerd_drop_in: a null in plugin_settings is a clear failure, not a traceback and not a dropped key.

The drop-in is merged over the main config, so a key left out keeps the
main config's value; writing nothing for `sandbox_image: null` would keep a
setting the user meant to change. The module refuses and names the key.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.test_containerd_drop_in import (
    FAKE_CONTAINERD,
    FIXTURES,
)


@pytest.mark.parametrize(
    "version, merge, plugin",
    [
        (2, "replace", 'plugins."io.containerd.grpc.v1.cri"'),
        (3, "deep", 'plugins."io.containerd.cri.v1.runtime"'),
    ],
)
@pytest.mark.parametrize(
    "settings, key",
    [
        ({"sandbox_image": None}, "sandbox_image"),
        ({"containerd": {"runtimes": {"runc": {"options": {"SystemdCgroup": None}}}}}, "containerd.runtimes.runc.options.SystemdCgroup"),
        ({"cdi_spec_dirs": ["/etc/cdi", None]}, "cdi_spec_dirs[1]"),
    ],
)
def test_null_plugin_setting_fails_naming_the_key_and_writes_nothing(tmp_path: Path, version: int, merge: str, plugin: str, settings: dict, key: str) -> None:
    fake = tmp_path / "bin" / "containerd"
    fake.parent.mkdir()
    fake.write_text(FAKE_CONTAINERD.format(python=sys.executable, default=str(FIXTURES / "default-1.7.24.toml")))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    main = tmp_path / "etc" / "config.toml"
    main.parent.mkdir()
    main.write_text("version = {0}\n".format(version))
    drop_in = tmp_path / "etc" / "conf.d" / "99-nvidia.toml"
    result = module_result(
        "containerd_drop_in",
        {
            "config_path": str(main),
            "drop_in_path": str(drop_in),
            "config_version": version,
            "plugin_merge": merge,
            "containerd_path": str(fake),
            "runtimes": [{"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"}],
            "plugin_settings": settings,
        },
    )
    assert result["failed"]
    assert result["msg"].startswith("plugin_settings: {0}.{1} is null, and TOML has no null".format(plugin, key))
    assert "give it a value, or remove the key" in result["msg"]
    assert "Traceback" not in str(result)
    assert main.read_text() == "version = {0}\n".format(version)
    assert not drop_in.exists()
