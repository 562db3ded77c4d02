# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""preflight_desired and preflight_verdict: what the preflight gate gives the
version matrix, and its verdict on one host from the matrix's result
(documented in preflight_desired.yml and preflight_verdict.yml beside this
file).

The gate (roles/preflight/tasks/gate.yml) stops a host whose findings reach
preflight_fail_on and names the variables behind them with their values; this
is that computation, kept out of the role's Jinja so it is unit-tested.
"""

from __future__ import annotations

import json
import re
import typing as t
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils._findings import fails
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.tables import SEVERITIES
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

# Rule ids that share one entry of the rule -> variables table: each site
# rule is the site's own (`custom:<id>`); each CVE floor (toolkit, DCGM, device
# plugin) is a rule of its own (so that it can be accepted by its id), and the
# floors of one component read the same variables.
_RULE_FAMILIES = (
    (re.compile(r"^custom:.*$"), "custom"),
    (re.compile(r"^ctk_cve_.*$"), "ctk_cve"),
    (re.compile(r"^dcgm_cve_.*$"), "dcgm_cve"),
    (re.compile(r"^device_plugin_cve_.*$"), "device_plugin_cve"),
)
# A finding about the CUDA versions names the preflight variable that holds them.
_SUBJECT_VARIABLES = {"cuda_versions": "preflight_cuda_versions"}


def _table_key(rule: str) -> str:
    for pattern, key in _RULE_FAMILIES:
        if pattern.match(rule):
            return key
    return rule


def _unique(items: t.Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def involved_variables(failing: t.Sequence[Mapping[str, t.Any]], rule_variables: Mapping[str, t.Sequence[str]], declared: t.Collection[str]) -> list[str]:
    """The variables behind the failing findings, in order, once each: every rule's inputs (from the
    rule -> variables table), then each subject that is itself a declared variable (declaration findings)."""
    names: list[str] = []
    for found in failing:
        # A rule missing from the table (tests/unit/playbooks/test_validate.py keeps it complete) names no
        # variable rather than hiding the finding behind an error of its own.
        names.extend(rule_variables.get(_table_key(str(found["rule"]))) or ())
    for found in failing:
        subject = _SUBJECT_VARIABLES.get(str(found["subject"]), str(found["subject"]))
        if subject in declared or subject in _SUBJECT_VARIABLES.values():
            names.append(subject)
    return _unique(names)


def effective_values(layers: Mapping[str, Mapping[str, t.Any]], extra: Mapping[str, t.Any]) -> dict[str, t.Any]:
    """Each layer's variables as its role sees them (the declared_layers answer), then `extra`; mappings (an
    inline mig_config) are left out: they are named, not printed."""
    values: dict[str, t.Any] = {}
    for layer in layers.values():
        values.update((layer or {}).get("vars") or {})
    values.update(extra)
    return {name: value for name, value in values.items() if not isinstance(value, Mapping)}


def _plain(value: t.Any) -> t.Any:
    """Plain lists and dicts, read through their own iteration (ansible-core's lazy containers template on read;
    json's C encoder would bypass that)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def named(names: t.Iterable[str], values: Mapping[str, t.Any]) -> str:
    """`name=<JSON value>` where the value is known, else the bare name; comma-separated (as to_json writes it)."""
    return ", ".join("{0}={1}".format(name, json.dumps(_plain(values[name]))) if name in values else name for name in names)


def brief(found: Mapping[str, t.Any]) -> str:
    """A finding in a few words, as the stop message lists the host's other findings: `[severity] rule: message`."""
    return "[{0}] {1}: {2}".format(found["severity"], found["rule"], found["message"])


def preflight_desired(layers: Mapping[str, Mapping[str, t.Any]], keys: t.Collection[str], mig_config: Mapping[str, t.Any] | None = None) -> dict[str, t.Any]:
    """The declared versions the matrix judges (its `desired` option): the managed layers' variables named in
    `keys`, without nulls; `mig_config` (read from mig_config_src) wins over the layers' when given."""
    if not isinstance(layers, Mapping):
        raise AnsibleFilterError("preflight_desired: the input must be the gpufleet.nvidia.declared_layers lookup's answer (layer name to its declaration)")
    values: dict[str, t.Any] = {}
    for layer in layers.values():
        if (layer or {}).get("managed"):
            values.update((layer or {}).get("vars") or {})
    if mig_config:
        values["mig_config"] = mig_config
    return {name: value for name, value in values.items() if name in keys and value is not None}


def preflight_verdict(
    result: Mapping[str, t.Any],
    fail_on: str,
    rule_variables: Mapping[str, t.Sequence[str]],
    layers: Mapping[str, Mapping[str, t.Any]],
    extra: Mapping[str, t.Any] | None = None,
    declared: t.Collection[str] = (),
) -> dict[str, t.Any]:
    """The gate's verdict on one host from gpufleet.nvidia.version_matrix's result (see preflight_verdict.yml)."""
    if fail_on not in ("error", "warning", "never"):
        raise AnsibleFilterError("preflight_verdict: preflight_fail_on must be error, warning or never, got {0!r}".format(fail_on))
    if not isinstance(result, Mapping) or not isinstance(result.get("findings"), list) or not isinstance(result.get("summary"), Mapping):
        raise AnsibleFilterError("preflight_verdict: the input must be the registered result of gpufleet.nvidia.version_matrix (with findings and summary)")
    findings = result["findings"]
    unknown = sorted({str(f.get("severity")) for f in findings} - set(SEVERITIES))
    if unknown:
        raise AnsibleFilterError("preflight_verdict: findings with unknown severity {0}".format(", ".join(unknown)))
    failing = fails(findings, fail_on)
    names = involved_variables(failing, rule_variables, declared)
    values = effective_values(layers, extra or {})
    # The rest of the host's findings, most severe first: a stopped host says them after the failing ones.
    others = sorted((f for f in findings if f not in failing), key=lambda f: -SEVERITIES.index(f["severity"]))
    return {
        "failed": bool(failing),
        "failing": failing,
        "messages": "; ".join(str(f["message"]) for f in failing),
        "others": others,
        "also": "; ".join(brief(f) for f in others),
        "variables": named(names, values),
        "fixes": "; ".join(_unique(str(f["fix"]) for f in failing)),
        # What AWX keeps per host (set_stats): `failed` as preflight_fail_on decides (the module only reports).
        "stats": {
            "status": "fail" if failing else "pass",
            "summary": dict(result["summary"], failed=bool(failing)),
            "findings": [f for f in findings if f["severity"] != "info"],
        },
    }


class FilterModule(FilterTable):
    """The preflight gate's input and verdict."""

    FILTERS = (preflight_desired, preflight_verdict)
