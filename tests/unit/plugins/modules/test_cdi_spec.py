# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""cdi_spec: semantic compare, atomic replace, the checks, failures that leave the spec alone.

A stand-in nvidia-ctk writes a chosen fixture (real nvidia-ctk output, see
fixtures/cdi/README.md) to --output and, for `cdi list`, lists the devices of
the specs in --spec-dir, or refuses them as the CDI library does, or fails as
a toolkit without --spec-dir does (FAKE_CTK_LIST). Where the harness has
built the real nvidia-ctk, its `cdi list` judges a spec too; the real
nvidia-ctk generates in the cdi Molecule scenario.
"""

from __future__ import annotations

import glob
import json
import os
import stat
import sys
import typing as t
import warnings
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.modules import cdi_spec
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

ROOT = Path(__file__).resolve().parents[4]
CDI = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"
SCHEMA_DIR = ROOT / "roles" / "cdi" / "files" / "cdi-schema"
SCHEMA = json.loads((SCHEMA_DIR / "schema.json").read_text())
SCHEMA_RESOURCES = {"defs.json": json.loads((SCHEMA_DIR / "defs.json").read_text())}
# The real nvidia-ctk, where tests/harness/go-build.sh has built it.
REAL_CTKS = sorted(
    glob.glob(os.path.join(os.environ.get("GPUFLEET_CACHE", "/var/cache/gpufleet"), "go-tools", "nvidia-container-toolkit-v*", "bin", "nvidia-ctk"))
)

FAKE_CTK = """#!{python}
import glob, json, os, shutil, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CTK_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
if args[:2] == ["cdi", "list"]:
    (spec_dir,) = [a.split("=", 1)[1] for a in args if a.startswith("--spec-dir=")]
    how = os.environ.get("FAKE_CTK_LIST", "")
    if how == "real":
        os.execv(os.environ["FAKE_CTK_REAL"], [os.environ["FAKE_CTK_REAL"]] + args)
    if how == "old":
        sys.stderr.write("Incorrect Usage: flag provided but not defined: -spec-dir\\n")
        sys.exit(1)
    for path in sorted(glob.glob(os.path.join(spec_dir, "*"))):
        if how == "refuse":
            sys.stderr.write('level=warning msg="%s: [failed to load CDI Spec invalid CDI Spec]"\\n' % path)
            continue
        import yaml
        spec = yaml.safe_load(open(path))
        for device in spec["devices"]:
            print("%s=%s" % (spec["kind"], device["name"]))
    sys.exit(0)
assert args[:3] == ["--quiet", "cdi", "generate"], args
source = open(os.environ["FAKE_CTK_SPEC"]).read().strip()
if source == "FAIL":
    sys.stderr.write('level=error msg="failed to generate CDI spec: no NVML"\\n')
    sys.exit(1)
output = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
shutil.copy(source, output)
"""


@pytest.fixture
def ctk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> t.Callable[[str], None]:
    fake = tmp_path / "nvidia-ctk"
    fake.write_text(FAKE_CTK.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("FAKE_CTK_LOG", str(tmp_path / "ctk.log"))
    monkeypatch.setenv("FAKE_CTK_SPEC", str(tmp_path / "next"))
    monkeypatch.delenv("FAKE_CTK_LIST", raising=False)

    def generate(fixture: str) -> None:
        (tmp_path / "next").write_text(fixture if fixture == "FAIL" else str(CDI / fixture))

    return generate


def run(tmp_path: Path, path: str, check: bool = False, **extra: t.Any) -> dict[str, t.Any]:
    args = {"path": path, "nvidia_ctk": str(tmp_path / "nvidia-ctk"), "schema": SCHEMA, "schema_resources": SCHEMA_RESOURCES}
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
    assert first["checks"] == ["JSON schema (jsonschema)", "nvidia-ctk cdi list"]
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


@pytest.mark.parametrize(
    "old, new, reason",
    [
        ("a100x8-ctk1.20.1.json", "a100x8-mig-handmade.json", "device list changed"),
        ("a100x8-mig-handmade.json", "a100x8-ctk1.20.1.json", "device list changed"),
    ],
)
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


def broken_spec(tmp_path: Path, change: t.Callable[[dict[str, t.Any]], t.Any]) -> None:
    """Make the stand-in nvidia-ctk write the 1.20.1 fixture with `change` applied."""
    broken = tmp_path / "broken.json"
    data = json.loads((CDI / "a100x8-ctk1.20.1.json").read_text())
    change(data)
    broken.write_text(json.dumps(data))
    (tmp_path / "next").write_text(str(broken))  # a file of our own, not a fixture: set directly


def major_as_string(spec: dict[str, t.Any]) -> None:
    spec["devices"][0]["containerEdits"]["deviceNodes"][0]["major"] = "195"


@pytest.mark.usefixtures("ctk")
@pytest.mark.parametrize("resolver", ["referencing", "RefResolver"])
def test_a_spec_that_breaks_the_schema_is_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resolver: str) -> None:
    """jsonschema checks the CDI schema, its $refs into defs.json resolved either way jsonschema can."""
    if resolver == "RefResolver":  # jsonschema before 4.18, without referencing
        monkeypatch.setattr(cdi_spec, "Registry", None)
    broken_spec(tmp_path, major_as_string)
    spec = tmp_path / "cdi" / "nvidia.json"
    with warnings.catch_warnings():  # jsonschema 4.18+ deprecates RefResolver; it still resolves
        warnings.simplefilter("ignore", DeprecationWarning)
        result = run(tmp_path, str(spec))
    assert result["failed"], result
    assert result["msg"] == ("the generated spec does not match the CDI schema: /devices/0/containerEdits/deviceNodes/0/major: '195' is not of type 'integer'")
    assert not spec.parent.exists()
    assert leftovers(tmp_path) == []


def test_without_jsonschema_the_cdi_list_check_still_runs(tmp_path: Path, ctk, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cdi_spec, "jsonschema", None)
    broken_spec(tmp_path, major_as_string)  # nothing but the schema would catch this one
    result = run(tmp_path, str(tmp_path / "nvidia.json"))
    assert result["changed"] and result["checks"] == ["nvidia-ctk cdi list"]
    assert "cdi list --spec-dir=" in (tmp_path / "ctk.log").read_text()


@pytest.mark.parametrize(
    "how, message",
    [
        ("refuse", "does not list nvidia.com/gpu=0, nvidia.com/gpu=1,"),
        ("old", "nvidia-ctk cdi list failed (rc=1)"),
    ],
)
def test_a_spec_cdi_list_does_not_load_is_not_installed(tmp_path: Path, ctk, monkeypatch: pytest.MonkeyPatch, how: str, message: str) -> None:
    spec = tmp_path / "nvidia.json"
    spec.write_text((CDI / "a100x8-ctk1.17.8.json").read_text())
    before = spec.read_text()
    ctk("a100x8-ctk1.20.1.json")
    monkeypatch.setenv("FAKE_CTK_LIST", how)
    result = run(tmp_path, str(spec))
    assert result["failed"] and message in result["msg"], result["msg"]
    assert ("failed to load CDI Spec" if how == "refuse" else "-spec-dir") in result["msg"]
    assert spec.read_text() == before
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not REAL_CTKS, reason="the real nvidia-ctk is not built (tests/harness/go-build.sh)")
@pytest.mark.parametrize("real", REAL_CTKS, ids=lambda p: p.split(os.sep)[-3])
@pytest.mark.parametrize(
    "fault, refusal",
    [
        (None, None),
        (lambda s: s["devices"][1].update(name="b@d"), "invalid character '@' in device name"),
        (lambda s: s.update(kind="nvidia.com"), "invalid vendor"),
    ],
    ids=["as-generated", "bad-device-name", "kind-without-class"],
)
def test_the_real_cdi_list_judges_the_spec(tmp_path: Path, ctk, monkeypatch: pytest.MonkeyPatch, real: str, fault: t.Any, refusal: str | None) -> None:
    """The real CDI library refuses what the lax schema lets through (device names, kind)."""
    monkeypatch.setenv("FAKE_CTK_LIST", "real")
    monkeypatch.setenv("FAKE_CTK_REAL", real)
    broken_spec(tmp_path, fault or (lambda s: None))
    result = run(tmp_path, str(tmp_path / "cdi" / "nvidia.json"))
    if refusal is None:
        assert result["changed"] and result["checks"][-1] == "nvidia-ctk cdi list", result
    else:
        assert result["failed"] and refusal in result["msg"], result["msg"]
        assert not (tmp_path / "cdi").exists()


def test_yaml_without_pyyaml_fails_with_the_fix_and_runs_nothing(tmp_path: Path, ctk, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cdi_spec, "yaml", None)
    spec = tmp_path / "nvidia.yaml"
    spec.write_text((CDI / "a100x8-ctk1.20.1.yaml").read_text())
    ctk("a100x8-ctk1.20.1.yaml")
    result = run(tmp_path, str(spec))
    assert result["failed"]
    assert "is read with PyYAML" in result["msg"]
    assert "use format json (cdi_format: json in the cdi role, its default) or install python3-yaml" in result["msg"]
    assert spec.read_text() == (CDI / "a100x8-ctk1.20.1.yaml").read_text()
    assert not (tmp_path / "ctk.log").exists()


def test_generator_gets_the_names_format_and_a_hidden_output(tmp_path: Path, ctk) -> None:
    ctk("a100x8-ctk1.20.1.json")
    run(tmp_path, str(tmp_path / "nvidia.json"), device_name_strategy=["uuid", "type-index"], driver_root="/run/nvidia/driver")
    line = next(entry for entry in (tmp_path / "ctk.log").read_text().splitlines() if " generate " in entry)
    assert "--format=json" in line and "--driver-root=/run/nvidia/driver" in line
    assert "--device-name-strategy=uuid --device-name-strategy=type-index" in line
    output = next(a.split("=", 1)[1] for a in line.split() if a.startswith("--output="))
    # A private directory beside the spec directory, and a name nvidia-ctk will not extend.
    assert os.path.basename(os.path.dirname(output)).startswith(".gpufleet-cdi-")
    assert os.path.basename(output) == "nvidia.json"
    # cdi list reads that directory, which holds the new spec only.
    assert "cdi list --spec-dir=" + os.path.dirname(output) in (tmp_path / "ctk.log").read_text().splitlines()
    assert os.path.dirname(os.path.dirname(output)) == str(tmp_path.parent)


def test_a_path_cdi_consumers_would_ignore_is_refused(tmp_path: Path, ctk) -> None:
    ctk("a100x8-ctk1.20.1.json")
    result = run(tmp_path, str(tmp_path / "nvidia.conf"), format="json")
    assert result["failed"] and "only load *.yaml and *.json" in result["msg"]
