# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The cdi check: the spec on the node names exactly the GPUs and MIG devices NVML reports.

The names a spec must hold come from _cdi_names (nvidia-ctk's rules per
naming strategy). A spec is read as JSON with the standard library, else as
YAML with PyYAML: the controller always has it, a node not always, and there a
YAML spec without PyYAML is a finding, not a guess.
"""

from __future__ import annotations

import json
import re
import sys
import typing as t

from .._cdi_names import expected_cdi_devices
from .remedies import Remedies
from .result import finding, judged

try:
    import yaml
except ImportError:  # not on every node; a JSON spec (the cdi role's default) needs only the standard library
    yaml = None

KIND = "nvidia.com/gpu"
# nvidia-ctk's default when no strategy is given (toolkit >= 1.15).
DEFAULT_STRATEGIES = ("index", "uuid")
NO_PYYAML_FIX = "set cdi_format: json (the cdi role's default) and run the cdi layer, or install python3-yaml on the node"
# An index name of a MIG device: "0:1" (index) or "mig0:1" (type-index).
INDEX_MIG_NAME = re.compile(r"(?:mig)?(\d+):(\d+)")


class SpecError(ValueError):
    """The text is not a CDI spec that can be read here."""


def strategies(value: t.Any) -> tuple[str, ...]:
    """cdi_device_name_strategy (one or a list) as a tuple; nvidia-ctk's default when empty."""
    if not value:
        return DEFAULT_STRATEGIES
    items = value if isinstance(value, list) else [value]
    return tuple(str(item) for item in items)


def parse_spec(text: str, path: str) -> dict[str, t.Any]:
    """A spec's text as a mapping; SpecError saying why not."""
    try:
        spec = json.loads(text)
    except ValueError:
        if yaml is None:
            why = "{0} is not JSON, and reading it as YAML needs PyYAML (python3-yaml), which {1} cannot import"
            raise SpecError(why.format(path, sys.executable)) from None
        try:
            spec = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SpecError("{0} is not a CDI spec: {1}".format(path, exc)) from None
    if not isinstance(spec, dict):
        raise SpecError("{0} is not a CDI spec (expected a mapping)".format(path))
    return spec


def check_spec(text: str | None, nvml: dict[str, t.Any], wanted_strategies: t.Sequence[str], path: str, remedies: Remedies) -> dict[str, t.Any]:
    """The cdi check of the spec's text (None: no spec at `path`) against NVML facts in nvml_info's shape."""
    expected: dict[str, t.Any] = {"path": path, "kind": KIND, "strategies": list(wanted_strategies)}
    if text is None:
        return judged("cdi", "", expected, {}, [finding("cdi", path, "no CDI spec at {0}".format(path), remedies.cdi)])
    try:
        spec = parse_spec(text, path)
    except SpecError as exc:
        fix = NO_PYYAML_FIX if yaml is None else remedies.cdi
        return judged("cdi", "", expected, {}, [finding("cdi", path, str(exc), fix)])
    names = [str(device.get("name")) for device in spec.get("devices") or [] if isinstance(device, dict)]
    observed = {"kind": spec.get("kind"), "cdi_version": spec.get("cdiVersion"), "devices": sorted(names)}
    found = []
    if spec.get("kind") != KIND:
        found.append(finding("cdi", "kind", "{0} declares kind {1}, expected {2}".format(path, spec.get("kind"), KIND), remedies.cdi))
    want, mig_counts = expected_cdi_devices(nvml, wanted_strategies)
    have, mig_seen = set(), {}  # type: set[str], dict[int, int]
    for name in set(names) - {"all"}:
        match = INDEX_MIG_NAME.fullmatch(name)
        if match:
            mig_seen[int(match.group(1))] = mig_seen.get(int(match.group(1)), 0) + 1
        else:
            have.add(name)
    uuids = {gpu.get("uuid"): gpu.get("index") for gpu in nvml.get("gpus") or []}
    for name in sorted(want - have):
        what = "GPU {0} ({1})".format(uuids[name], name) if name in uuids else name
        found.append(finding("cdi", name, "CDI spec is stale: {0} is missing from {1}".format(what, path), remedies.cdi))
    for name in sorted(have - want):
        found.append(finding("cdi", name, "CDI spec is stale: it lists {0}, which NVML does not report".format(name), remedies.cdi))
    if any(s in ("index", "type-index") for s in wanted_strategies):
        for gpu, count in sorted(mig_counts.items()):
            if mig_seen.get(gpu, 0) != count:
                found.append(
                    finding(
                        "cdi",
                        "GPU {0} MIG devices".format(gpu),
                        "CDI spec is stale: GPU {0} has {1} MIG device(s), the spec names {2}".format(gpu, count, mig_seen.get(gpu, 0)),
                        remedies.cdi,
                    )
                )
    if "all" not in names:
        found.append(finding("cdi", "all", "{0} has no `all` device".format(path), "regenerate the spec without --no-all-device", "warning"))
    return judged("cdi", "{0}: {1} device name(s) match NVML".format(path, len(names)), expected, observed, found)
