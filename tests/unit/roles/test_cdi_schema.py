# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The CDI schema the cdi role ships: the CDI project's files as its README says, and what real jsonschema makes of them.

Validation here is the real jsonschema package with a referencing registry
that gives schema.json its defs.json, as the cdi_spec module and the cdi
Molecule scenario do.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import typing as t
from pathlib import Path

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_DIR = ROOT / "roles" / "cdi" / "files" / "cdi-schema"
CDI = ROOT / "tests" / "unit" / "plugins" / "fixtures" / "cdi"
SPECS = sorted(CDI.glob("*.yaml")) + sorted(CDI.glob("*.json"))


def registry() -> Registry:
    defs = Resource.from_contents(json.loads((SCHEMA_DIR / "defs.json").read_text()), default_specification=DRAFT7)
    return Registry().with_resource("defs.json", defs)


def validator() -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMA_DIR / "schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=registry())


def refs_in(node: t.Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [ref for value in node.values() for ref in refs_in(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in refs_in(value)]
    return []


def load(path: Path) -> dict[str, t.Any]:
    return json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())


def test_files_are_the_ones_the_provenance_note_names() -> None:
    note = (SCHEMA_DIR / "README.md").read_text()
    for name in ("schema.json", "defs.json"):
        digest = hashlib.sha256((SCHEMA_DIR / name).read_bytes()).hexdigest()
        assert re.search(r"`{0}`: .*?sha256 {1}\.".format(re.escape(name), digest), note, re.DOTALL), name


def test_every_reference_resolves() -> None:
    """schema.json's refs into defs.json, and defs.json's own, all land (a typo would only fail on use)."""
    schema = json.loads((SCHEMA_DIR / "schema.json").read_text())
    resolver = registry().resolver()
    outer = refs_in(schema)
    assert outer and all(ref.startswith("defs.json#/definitions/") for ref in outer)
    for ref in outer:
        assert resolver.lookup(ref).contents
    defs = resolver.lookup("defs.json")
    inner = refs_in(defs.contents)
    assert inner
    for ref in inner:
        assert defs.resolver.lookup(ref).contents


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_real_nvidia_ctk_specs_match(path: Path) -> None:
    assert list(validator().iter_errors(load(path))) == []


def _spec() -> dict[str, t.Any]:
    return copy.deepcopy(load(CDI / "a100x8-ctk1.20.1.json"))


@pytest.mark.parametrize(
    "change, where, message",
    [
        (lambda s: s.pop("kind"), [], "'kind' is a required property"),
        (lambda s: s.update(devices={}), ["devices"], "is not of type 'array'"),
        (lambda s: s["devices"][0].pop("containerEdits"), ["devices", 0], "'containerEdits' is a required property"),
        # through defs.json: DeviceNode, then int64 inside defs.json
        (
            lambda s: s["devices"][0]["containerEdits"]["deviceNodes"][0].update(major="195"),
            ["devices", 0, "containerEdits", "deviceNodes", 0, "major"],
            "is not of type 'integer'",
        ),
        (lambda s: s["containerEdits"]["hooks"][0].pop("hookName"), ["containerEdits", "hooks", 0], "'hookName' is a required property"),
        (lambda s: s["containerEdits"]["hooks"][0].update(timeout=-1), ["containerEdits", "hooks", 0, "timeout"], "less than the minimum of 0"),
        (lambda s: s["containerEdits"]["mounts"][0].pop("containerPath"), ["containerEdits", "mounts", 0], "'containerPath' is a required property"),
        (lambda s: s.update(annotations={"a": 1}), ["annotations", "a"], "is not of type 'string'"),
    ],
)
def test_broken_specs_fail_at_their_place(change: t.Callable[[dict[str, t.Any]], t.Any], where: list[t.Any], message: str) -> None:
    spec = _spec()
    change(spec)
    errors = list(validator().iter_errors(spec))
    assert [list(e.absolute_path) for e in errors] == [where]
    assert message in errors[0].message
