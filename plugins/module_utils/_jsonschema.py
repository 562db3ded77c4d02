# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A small JSON Schema (draft-07) validator for the schemas this collection ships.

Targets have no jsonschema package. This covers the keywords our schemas use
and refuses any other keyword, so a schema cannot silently check less than
it says.
"""

from __future__ import annotations

import re
import typing as t

__all__ = ["SchemaError", "validate"]

_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "definitions", "examples", "default"})
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "pattern", "minItems",
                       "minimum", "maximum", "enum", "$ref", "minLength"})
_TYPES: dict[str, t.Callable[[t.Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class SchemaError(ValueError):
    """The instance does not match; the message names where (a JSON pointer) and why."""


def validate(instance: t.Any, schema: t.Mapping[str, t.Any]) -> None:
    """Raise SchemaError for the first place `instance` breaks `schema`."""
    _Validator(schema).check(instance, schema, "")


class _Validator:
    def __init__(self, root: t.Mapping[str, t.Any]) -> None:
        self.root = root

    def resolve(self, ref: str) -> t.Mapping[str, t.Any]:
        if not ref.startswith("#/"):
            raise SchemaError("schema: only local references are supported, got {0}".format(ref))
        node: t.Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise SchemaError("schema: unresolvable reference {0}".format(ref))
            node = node[part]
        return node

    def check(self, value: t.Any, schema: t.Mapping[str, t.Any], where: str) -> None:
        unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
        if unknown:
            raise SchemaError("schema: unsupported keyword(s) {0} at {1}".format(sorted(unknown), where or "/"))
        here = where or "/"
        if "$ref" in schema:
            self.check(value, self.resolve(schema["$ref"]), where)
        if "type" in schema:
            types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_TYPES[name](value) for name in types):
                raise SchemaError("{0}: expected {1}, got {2}".format(here, " or ".join(types), type(value).__name__))
        if "enum" in schema and value not in schema["enum"]:
            raise SchemaError("{0}: {1!r} is not one of {2}".format(here, value, schema["enum"]))
        if isinstance(value, str):
            if "pattern" in schema and not re.search(schema["pattern"], value):
                raise SchemaError("{0}: {1!r} does not match {2}".format(here, value, schema["pattern"]))
            if len(value) < schema.get("minLength", 0):
                raise SchemaError("{0}: shorter than {1} characters".format(here, schema["minLength"]))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                raise SchemaError("{0}: {1} is below {2}".format(here, value, schema["minimum"]))
            if "maximum" in schema and value > schema["maximum"]:
                raise SchemaError("{0}: {1} is above {2}".format(here, value, schema["maximum"]))
        if isinstance(value, list):
            if len(value) < schema.get("minItems", 0):
                raise SchemaError("{0}: needs at least {1} item(s)".format(here, schema["minItems"]))
            if "items" in schema:
                for index, item in enumerate(value):
                    self.check(item, schema["items"], "{0}/{1}".format(where, index))
        if isinstance(value, dict):
            for name in schema.get("required", []):
                if name not in value:
                    raise SchemaError("{0}: missing required field '{1}'".format(here, name))
            properties = schema.get("properties", {})
            extra = schema.get("additionalProperties", True)
            for name, item in value.items():
                path = "{0}/{1}".format(where, str(name).replace("~", "~0").replace("/", "~1"))
                if name in properties:
                    self.check(item, properties[name], path)
                elif extra is False:
                    raise SchemaError("{0}: unknown field '{1}'".format(here, name))
                elif isinstance(extra, dict):
                    self.check(item, extra, path)
