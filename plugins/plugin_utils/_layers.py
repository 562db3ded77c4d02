# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The layers of a GPU node, in site.yml order, from the layer registry (_layers.yml beside this file),
and the views of it the plugins read. Controller side only."""

from __future__ import annotations

import typing as t
from pathlib import Path

import yaml

REGISTRY_PATH = Path(__file__).with_suffix(".yml")
# libyaml's loader where PyYAML has it: a tenth of the pure-Python one's time, paid in every worker that imports this.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FIELDS = {"name", "play", "step", "title", "note", "playbook", "declares", "switch", "watches"}


def load_registry(path: Path = REGISTRY_PATH) -> dict[str, t.Any]:
    """The registry, checked: every layer names a role step or a playbook, and a switch is one of its declared
    variables. A registry that breaks these fails here, at import, not in a run."""
    registry = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)
    names = [layer["name"] for layer in registry["layers"]]
    if len(set(names)) != len(names):
        raise ValueError("{0}: a layer is listed twice: {1}".format(path, names))
    for layer in registry["layers"]:
        unknown = set(layer) - _FIELDS
        if unknown:
            raise ValueError("{0}: layer {1} has unknown fields {2}".format(path, layer["name"], sorted(unknown)))
        if ("step" in layer) == ("playbook" in layer):
            raise ValueError("{0}: layer {1} needs a step (its role) or a playbook, not both".format(path, layer["name"]))
        if "switch" in layer and layer["switch"] not in layer.get("declares", ()):
            raise ValueError("{0}: layer {1}'s switch {2} is not one of its declares".format(path, layer["name"], layer["switch"]))
        if "playbook" in layer and (layer.get("declares") or layer.get("watches")):
            raise ValueError("{0}: layer {1} is a playbook; it declares and writes nothing".format(path, layer["name"]))
    return registry


REGISTRY = load_registry()
# Every layer of site.yml, in order.
SITE_LAYERS: tuple[dict[str, t.Any], ...] = tuple(REGISTRY["layers"])

# Layer -> the variables preflight and verify read by these agreed names (the layers that declare any).
LAYER_VARIABLES: dict[str, tuple[str, ...]] = {layer["name"]: tuple(layer["declares"]) for layer in SITE_LAYERS if layer.get("declares")}

# Layers that site.yml runs only when a host turns them on: the variable that
# does, as their roles' first task reads it. Their defaults alone (off) manage
# nothing, so preflight judges their versions only where they are turned on.
LAYER_SWITCHES: dict[str, str] = {layer["name"]: layer["switch"] for layer in SITE_LAYERS if "switch" in layer}

LAYERS = tuple(LAYER_VARIABLES)


def tags() -> list[str]:
    """site.yml's layer tags: every finer tag in the roles starts with one of them and an underscore."""
    return [layer["name"] for layer in SITE_LAYERS]


def prefixes() -> list[str]:
    """The prefixes of the variables that make up a host's declaration: the collection-wide switches' and each
    role layer's."""
    return ["gpufleet_"] + [layer["name"] + "_" for layer in SITE_LAYERS if "step" in layer]


def watch_paths() -> list[str]:
    """Every place the fast path reads whole: the node's, then each layer's."""
    paths = list(REGISTRY["node_watches"])
    for layer in SITE_LAYERS:
        paths.extend(path for path in layer.get("watches", ()) if path not in paths)
    return paths
