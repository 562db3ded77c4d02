# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_jsonschema with the CDI schema the cdi role ships: real specs pass, broken ones fail by name."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils._jsonschema import SchemaError, validate

ROOT = Path(__file__).resolve().parents[4]
SCHEMA = json.loads((ROOT / "roles" / "cdi" / "files" / "cdi-spec.schema.json").read_text())
CDI = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"
SPECS = sorted(CDI.glob("*.yaml")) + sorted(CDI.glob("*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_real_specs_match(path: Path) -> None:
    validate(load(path), SCHEMA)


def _spec() -> dict:
    return load(Path(__file__).resolve().parents[1] / "fixtures" / "cdi" / "a100x8-ctk1.20.1.json")


@pytest.mark.parametrize("change, where", [
    (lambda s: s.pop("kind"), "missing required field 'kind'"),
    (lambda s: s.update(kind="nvidia.com"), "/kind"),
    (lambda s: s.update(extra=1), "unknown field 'extra'"),
    (lambda s: s.update(devices=[]), "/devices: needs at least 1"),
    (lambda s: s["devices"][0].update(name="-bad"), "/devices/0/name"),
    (lambda s: s["devices"][0]["containerEdits"]["deviceNodes"][0].update(path="dev/nvidia0"),
     "/devices/0/containerEdits/deviceNodes/0/path"),
    (lambda s: s["containerEdits"]["env"].append("NO_EQUALS_SIGN"), "/containerEdits/env/"),
    (lambda s: s["containerEdits"]["hooks"][0].update(timeout=0), "/containerEdits/hooks/0/timeout"),
    (lambda s: s["devices"][0]["containerEdits"]["deviceNodes"][0].update(major="1"), "expected integer"),
])
def test_broken_specs_fail_naming_the_place(change, where: str) -> None:
    spec = copy.deepcopy(_spec())
    change(spec)
    with pytest.raises(SchemaError, match=where.replace("(", r"\(")):
        validate(spec, SCHEMA)


def test_unknown_schema_keywords_are_refused() -> None:
    with pytest.raises(SchemaError, match="unsupported keyword"):
        validate({}, {"type": "object", "patternProperties": {}})
