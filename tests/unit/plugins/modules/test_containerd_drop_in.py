# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""containerd_drop_in: changed then not changed, check mode, diff, validation and rollback.

A stand-in `containerd` answers `config default` with a real containerd's
output and `config dump` with the files it was given (failing on request);
real containerd versions run in the container_runtime Molecule scenario.
"""

from __future__ import annotations

import os
import stat
import sys
import tomllib
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"
OTHER_TOOL = Path(__file__).resolve().parents[4] / "extensions" / "molecule" / "container_runtime" / "files" / "containerd-v2-other-tool.toml"

FAKE_CONTAINERD = """#!{python}
import sys
args = sys.argv[1:]
if args == ["config", "default"]:
    sys.stdout.write(open({default!r}).read())
    sys.exit(0)
assert args[0] == "--config" and args[2:] == ["config", "dump"], args
import glob, tomllib
texts = [open(args[1]).read()]
for entry in tomllib.loads(texts[0]).get("imports", []):
    for path in sorted(glob.glob(entry)) if "*" in entry else [entry]:
        texts.append(open(path).read())
if any("FAIL_DUMP" in text for text in texts):
    sys.stderr.write("containerd: failed to load TOML: FAIL_DUMP found\\n")
    sys.exit(1)
sys.stdout.write(texts[-1])
"""


@pytest.fixture
def node(tmp_path: Path) -> dict[str, t.Any]:
    fake = tmp_path / "bin" / "containerd"
    fake.parent.mkdir()
    fake.write_text(FAKE_CONTAINERD.format(python=sys.executable, default=str(FIXTURES / "default-1.7.24.toml")))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return {"main": tmp_path / "etc" / "config.toml", "drop_in": tmp_path / "etc" / "conf.d" / "99-nvidia.toml", "containerd": str(fake)}


def args(node: dict[str, t.Any], **extra: t.Any) -> dict[str, t.Any]:
    base = {
        "config_path": str(node["main"]),
        "drop_in_path": str(node["drop_in"]),
        "config_version": 2,
        "plugin_merge": "replace",
        "containerd_path": node["containerd"],
        "enable_cdi": True,
        "runtimes": [{"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"}],
    }
    base.update(extra)
    return base


def run(node: dict[str, t.Any], check: bool = False, diff: bool = False, **extra: t.Any) -> dict[str, t.Any]:
    return module_result("containerd_drop_in", args(node, **extra), check=check, diff=diff)


def with_other_tools_config(node: dict[str, t.Any]) -> str:
    node["main"].parent.mkdir(parents=True, exist_ok=True)
    text = OTHER_TOOL.read_text()
    node["main"].write_text(text)
    return text


def test_first_run_adds_drop_in_and_one_import_second_run_changes_nothing(node: dict[str, t.Any]) -> None:
    original = with_other_tools_config(node)
    first = run(node)
    assert first["changed"] and first["config_changed"] and first["drop_in_changed"]
    main = node["main"].read_text()
    assert main.replace('imports = ["{0}"]\n'.format(node["drop_in"]), "", 1) == original
    drop_in = tomllib.loads(node["drop_in"].read_text())
    cri = drop_in["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["registry"]["mirrors"]["docker.io"]["endpoint"] == ["https://mirror.gpufleet.invalid"]
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
    assert stat.S_IMODE(os.stat(node["drop_in"]).st_mode) == 0o600
    assert Path(first["backup_file"]).read_text() == original
    assert first["effective"]["runtimes"]["nvidia"]["binary"] == "/usr/bin/nvidia-container-runtime"

    second = run(node)
    assert not second["changed"]
    assert "backup_file" not in second
    assert node["main"].read_text() == main


def test_check_mode_predicts_and_writes_nothing(node: dict[str, t.Any]) -> None:
    original = with_other_tools_config(node)
    result = run(node, check=True)
    assert result["changed"] and result["effective"] is None
    assert node["main"].read_text() == original
    assert not node["drop_in"].exists()


def test_diff_shows_only_the_top_level_of_the_main_config_and_no_credentials(node: dict[str, t.Any]) -> None:
    with_other_tools_config(node)
    with node["main"].open("a") as handle:
        handle.write('\n[plugins."io.containerd.grpc.v1.cri".registry.configs."r.example".auth]\n  auth = "c2VjcmV0"\n')
    result = run(node, check=True, diff=True)
    main_diff, drop_in_diff = result["diff"]
    assert "[plugins" not in main_diff["after"] and "imports" in main_diff["after"]
    assert "c2VjcmV0" not in drop_in_diff["after"] and "<redacted>" in drop_in_diff["after"]


def test_a_config_containerd_refuses_is_put_back(node: dict[str, t.Any]) -> None:
    original = with_other_tools_config(node)
    result = run(node, plugin_settings={"sandbox_image": "FAIL_DUMP"})
    assert result["failed"]
    assert "refused the new configuration" in result["msg"] and "FAIL_DUMP found" in result["msg"]
    assert node["main"].read_text() == original
    assert not node["drop_in"].exists()


def test_a_missing_main_config_is_created_minimal(node: dict[str, t.Any]) -> None:
    result = run(node, config_version=4, plugin_merge="deep")
    assert result["config_created"]
    assert node["main"].read_text() == 'version = 4\nimports = ["{0}"]\n'.format(node["drop_in"])
    assert stat.S_IMODE(os.stat(node["main"]).st_mode) == 0o644


def test_an_import_glob_that_covers_the_drop_in_leaves_main_alone(node: dict[str, t.Any]) -> None:
    node["main"].parent.mkdir(parents=True)
    text = 'version = 2\nimports = ["{0}/*.toml"]\n'.format(node["drop_in"].parent)
    node["main"].write_text(text)
    result = run(node)
    assert not result["config_changed"] and result["drop_in_changed"]
    assert node["main"].read_text() == text


@pytest.mark.parametrize(
    "main, extra, message",
    [
        ("[plugins.cri]\nx = 1\n", {}, "config version 1"),
        ("version = 3\n", {}, "newer than this containerd reads"),
        ("version = [\n", {}, "not valid TOML"),
        ("version = 2\n", {"default_runtime": "nvidia-cdi"}, "default_runtime: 'nvidia-cdi' is not one of the runtimes"),
        ("version = 2\n", {"runtimes": [{"name": "nvidia", "path": "/a"}, {"name": "nvidia", "path": "/b"}]}, "each runtime name may appear once"),
    ],
)
def test_refusals_touch_nothing(node: dict[str, t.Any], main: str, extra: dict[str, t.Any], message: str) -> None:
    node["main"].parent.mkdir(parents=True)
    node["main"].write_text(main)
    result = run(node, **extra)
    assert result["failed"] and message in result["msg"]
    assert node["main"].read_text() == main
    assert not node["drop_in"].exists()
