# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""cdi_spec: semantic compare, atomic replace, schema check, failures that leave the spec alone.

A stand-in nvidia-ctk writes a chosen fixture (real nvidia-ctk output, see
fixtures/cdi/README.md) to --output; the real nvidia-ctk runs in the cdi
Molecule scenario.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import typing as t
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

ROOT = Path(__file__).resolve().parents[4]
CDI = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"
SCHEMA = json.loads((ROOT / "roles" / "cdi" / "files" / "cdi-spec.schema.json").read_text())

FAKE_CTK = '''#!{python}
import os, shutil, sys
args = sys.argv[1:]
assert args[:3] == ["--quiet", "cdi", "generate"], args
with open(os.environ["FAKE_CTK_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
source = open(os.environ["FAKE_CTK_SPEC"]).read().strip()
if source == "FAIL":
    sys.stderr.write('level=error msg="failed to generate CDI spec: no NVML"\\n')
    sys.exit(1)
output = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
shutil.copy(source, output)
'''


@pytest.fixture
def ctk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> t.Callable[[str], None]:
    fake = tmp_path / "nvidia-ctk"
    fake.write_text(FAKE_CTK.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("FAKE_CTK_LOG", str(tmp_path / "ctk.log"))
    monkeypatch.setenv("FAKE_CTK_SPEC", str(tmp_path / "next"))

    def generate(fixture: str) -> None:
        (tmp_path / "next").write_text(fixture if fixture == "FAIL" else str(CDI / fixture))

    return generate


def run(tmp_path: Path, path: str, check: bool = False, **extra: t.Any) -> dict[str, t.Any]:
    args = {"path": path, "nvidia_ctk": str(tmp_path / "nvidia-ctk"), "schema": SCHEMA}
    args.update(extra)
    return module_result("cdi_spec", args, check=check, diff=True)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("fixture", ["a100x8-ctk1.20.1.yaml", "a100x8-ctk1.17.8.yaml", "a100x8-ctk1.20.1.json"])
def test_writes_then_leaves_an_equal_spec_alone(tmp_path: Path, ctk, fixture: str) -> None:
    ctk(fixture)
    spec = tmp_path / "cdi" / ("nvidia." + fixture.rsplit(".", 1)[1])
    first = run(tmp_path, str(spec))
    assert first["changed"] and first["reason"] == "no spec before"
    assert spec.read_bytes() == (CDI / fixture).read_bytes()
    assert stat.S_IMODE(os.stat(spec).st_mode) == 0o644
    assert "all" in first["devices"] and first["kind"] == "nvidia.com/gpu"
    second = run(tmp_path, str(spec))
    assert not second["changed"] and second["reason"] == "spec unchanged"
    assert leftovers(spec.parent) == [] and leftovers(tmp_path) == []


def test_same_content_in_another_layout_and_device_order_is_no_change(tmp_path: Path, ctk) -> None:
    ctk("a100x8-ctk1.20.1.yaml")
    spec = tmp_path / "nvidia.yaml"
    data = yaml.safe_load((CDI / "a100x8-ctk1.20.1.yaml").read_text())
    data["devices"].reverse()
    spec.write_text(json.dumps(data, sort_keys=True))  # JSON is YAML too
    before = spec.read_text()
    result = run(tmp_path, str(spec))
    assert not result["changed"]
    assert spec.read_text() == before


@pytest.mark.parametrize("old, new, reason", [
    ("a100x8-ctk1.20.1.json", "a100x8-mig-handmade.json", "device list changed"),
    ("a100x8-mig-handmade.json", "a100x8-ctk1.20.1.json", "device list changed"),
])
def test_a_mig_change_replaces_the_spec(tmp_path: Path, ctk, old: str, new: str, reason: str) -> None:
    spec = tmp_path / "nvidia.json"
    spec.write_text((CDI / old).read_text())
    ctk(new)
    result = run(tmp_path, str(spec))
    assert result["changed"] and result["reason"] == reason
    assert json.loads(spec.read_text()) == json.loads((CDI / new).read_text())
    names = set(result["devices"])
    assert ("0:0" in names) == ("mig" in new)


def test_check_mode_predicts_without_writing(tmp_path: Path, ctk) -> None:
    ctk("a100x8-ctk1.20.1.yaml")
    spec = tmp_path / "absent-dir" / "nvidia.yaml"
    result = run(tmp_path, str(spec), check=True)
    assert result["changed"] and "diff" in result
    assert not spec.parent.exists()


def test_an_unreadable_spec_is_replaced(tmp_path: Path, ctk) -> None:
    ctk("a100x8-ctk1.20.1.yaml")
    spec = tmp_path / "nvidia.yaml"
    spec.write_text("devices: [unclosed\n")
    result = run(tmp_path, str(spec))
    assert result["changed"] and result["reason"] == "the spec on disk cannot be read"


def test_a_failed_generation_leaves_the_spec_and_no_temporary_file(tmp_path: Path, ctk) -> None:
    spec = tmp_path / "nvidia.yaml"
    spec.write_text((CDI / "a100x8-ctk1.20.1.yaml").read_text())
    ctk("FAIL")
    result = run(tmp_path, str(spec))
    assert result["failed"] and "no NVML" in result["msg"]
    assert spec.read_text() == (CDI / "a100x8-ctk1.20.1.yaml").read_text()
    assert leftovers(tmp_path) == []


@pytest.mark.usefixtures("ctk")
def test_a_spec_that_breaks_the_schema_is_not_installed(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    data = json.loads((CDI / "a100x8-ctk1.20.1.json").read_text())
    data["devices"][0]["name"] = "not/valid"
    broken.write_text(json.dumps(data))
    (tmp_path / "next").write_text(str(broken))  # a file of our own, not a fixture: set directly
    spec = tmp_path / "cdi" / "nvidia.json"
    result = run(tmp_path, str(spec))
    assert result["failed"] and "/devices/0/name" in result["msg"]
    assert not spec.parent.exists()
    assert leftovers(tmp_path) == []


def test_generator_gets_the_names_format_and_a_hidden_output(tmp_path: Path, ctk) -> None:
    ctk("a100x8-ctk1.20.1.json")
    run(tmp_path, str(tmp_path / "nvidia.json"), device_name_strategy=["uuid", "type-index"],
        driver_root="/run/nvidia/driver")
    line = (tmp_path / "ctk.log").read_text().splitlines()[-1]
    assert "--format=json" in line and "--driver-root=/run/nvidia/driver" in line
    assert "--device-name-strategy=uuid --device-name-strategy=type-index" in line
    output = next(a.split("=", 1)[1] for a in line.split() if a.startswith("--output="))
    # A private directory beside the spec directory, and a name nvidia-ctk will not extend.
    assert os.path.basename(os.path.dirname(output)).startswith(".gpufleet-cdi-")
    assert os.path.basename(output) == "nvidia.json"
    assert os.path.dirname(os.path.dirname(output)) == str(tmp_path.parent)


def test_a_path_cdi_consumers_would_ignore_is_refused(tmp_path: Path, ctk) -> None:
    ctk("a100x8-ctk1.20.1.json")
    result = run(tmp_path, str(tmp_path / "nvidia.conf"), format="json")
    assert result["failed"] and "only load *.yaml and *.json" in result["msg"]
