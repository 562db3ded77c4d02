# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The version matrix: which driver, CUDA, GPU, toolkit, engine and crictl
versions fit together. The facts are the knowledge base's
(plugins/module_utils/_knowledge: one row per fact, each with its source and
the date it was checked); this module holds the comparison logic and the
views of those tables that the rules read.

Shared by the ``version_matrix`` module (runs on the target: Python 3.8+,
standard library only) and the controller-side filters.

Each row carries a `status` where it matters: "V" verified (an NVIDIA
document or repository), "S" secondary (a third party repeats it) or "U"
unverified. V and S facts are encoded as rules that can fail a run; U facts
only ever produce warnings (and say so).

Users extend the tables without editing the collection: ``Matrix(tables=...)``
merges extra rows (CUDA releases, driver branches, GPU models), and
``custom_rules`` adds declarative rules (see ``CustomRule``).
"""

from __future__ import annotations

import calendar
import datetime
import re
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    cuda as _cuda,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    drivers as _drivers,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    engines as _engines,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    gpus as _gpus,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    kubernetes as _kubernetes,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    toolkit as _toolkit,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge.packages import version_packages

# =============================================================================
# Views of the knowledge base (the rules' shapes; the rows live in _knowledge)
# =============================================================================

# (CUDA release, label, minimum driver or None where not verified), newest first.
CUDA_TOOLKIT_DRIVERS: tuple[tuple[str, str, str | None], ...] = tuple((row["cuda"], row["label"], row["driver"]) for row in _cuda.CUDA_DRIVERS)
CUDA_STATUS: dict[str, str] = {row["cuda"]: row.get("status", "V") for row in _cuda.CUDA_DRIVERS}
CUDA_BUILD_NUMBERED_FROM: tuple[int, ...] = tuple(int(p) for p in _cuda.BUILD_NUMBERED_FROM["value"].split("."))
CUDA_MVC_FLOORS: dict[int, str] = {row["major"]: row["driver"] for row in _cuda.MVC_FLOORS}
CUDA_MVC_FIRST_MINOR: dict[int, int] = {row["major"]: row["first_minor"] for row in _cuda.MVC_FLOORS if row["first_minor"]}
DRIVER_BRANCHES: dict[str, dict[str, t.Any]] = {
    row["branch"]: {key: row.get(key) for key in ("type", "eol", "note", "status", "source")} for row in _drivers.DRIVER_BRANCHES
}
BRANCH_TYPES: dict[str, str] = {row["type"]: row["name"] for row in _drivers.BRANCH_TYPES}
# (name, first CUDA, last driver branch), oldest -> newest.
ARCHITECTURES: tuple[tuple[str, str | None, str | None], ...] = tuple((row["name"], row["first_cuda"], row["last_branch"]) for row in _gpus.ARCHITECTURES)
ARCHITECTURE_NAMES = tuple(row[0] for row in ARCHITECTURES)
# architecture: the last CUDA major that targets it (absent: ongoing).
ARCHITECTURE_LAST_CUDA: dict[str, int] = {row["name"]: int(row["last_cuda"]) for row in _gpus.ARCHITECTURES if row.get("last_cuda")}
FORWARD_COMPAT_FIRST_CUDA: tuple[int, ...] = tuple(int(p) for p in _cuda.FORWARD_COMPAT["value"]["first_cuda"].split("."))
FORWARD_COMPAT_SAME_BRANCH: str = _cuda.FORWARD_COMPAT["value"]["same_branch"]
KERNEL_MODULE_FLAVOURS: tuple[dict[str, t.Any], ...] = _drivers.KERNEL_MODULE_FLAVOURS
OPEN_MODULES_FIRST_BRANCH: str = _drivers.OPEN_MODULES_FIRST_BRANCH["value"]
OPEN_MODULES_DEFAULT_BRANCH: str = _drivers.OPEN_MODULES_DEFAULT_BRANCH["value"]
GPU_MODELS: tuple[dict[str, t.Any], ...] = _gpus.GPU_MODELS
# (feature, first version, what it is)
CTK_FEATURES: tuple[tuple[str, str, str], ...] = tuple((row["feature"], row["first"], row["what"]) for row in _toolkit.CTK_FEATURES)
CTK_CVE_FLOORS: tuple[dict[str, t.Any], ...] = _toolkit.CTK_CVE_FLOORS
# engine: ((first version, CDI support from that version on), ...), ascending
ENGINE_CDI: dict[str, tuple[tuple[str, str], ...]] = {}
for _row in _engines.ENGINE_CDI:
    ENGINE_CDI[_row["engine"]] = ENGINE_CDI.get(_row["engine"], ()) + ((_row["first"], _row["support"]),)
ENGINES = tuple(ENGINE_CDI)
# gpufleet_dra's values: NVIDIA's DRA driver from its own chart, or through
# the GPU Operator's GPUCluster.
DRA_WORKFLOWS = ("driver", "operator")
CRICTL_GROUPS: tuple[tuple[tuple[int, ...], tuple[int, ...] | None], ...] = tuple(
    (tuple(int(p) for p in row["first"].split(".")), tuple(int(p) for p in row["last"].split(".")) if row["last"] else None)
    for row in _kubernetes.CRICTL_GROUPS
)

# Where each rule's facts come from: the knowledge tables it reads (each of
# their rows names its own source; findings made from one row carry that
# row's source).
SOURCES: dict[str, str] = {
    "cuda_driver": "_knowledge.cuda CUDA_DRIVERS, MVC_FLOORS: " + _cuda.CUDA_DRIVERS[-1]["source"] + " ; " + _cuda.MVC_FLOORS[0]["source"],
    "cuda_forward_compat": _cuda.FORWARD_COMPAT["source"],
    "branch_lifecycle": "_knowledge.drivers DRIVER_BRANCHES: " + _drivers.BRANCH_TYPES[0]["source"],
    "driver_security": "_knowledge.drivers DRIVER_SECURITY_BULLETINS (each row: its bulletin)",
    "architecture_branch": "_knowledge.gpus ARCHITECTURES, GPU_MODELS: " + _gpus.ARCHITECTURES[0]["source"],
    "kernel_module": "_knowledge.drivers KERNEL_MODULE_FLAVOURS: " + _drivers.KERNEL_MODULE_FLAVOURS[0]["source"],
    "mig_driver": "_knowledge.gpus GPU_MODELS (mig_min_driver)",
    "mig_supported": "_knowledge.gpus GPU_MODELS (mig)",
    "container_toolkit": "_knowledge.toolkit CTK_FEATURES (each row: the CHANGELOG.md of its tag)",
    "cdi_spec_version": "_knowledge.toolkit CTK_CDI_SPEC_VERSIONS, _knowledge.engines CDI_SPEC_MIN_ENGINE",
    "engine_cdi": "_knowledge.engines ENGINE_CDI: " + _engines.ENGINE_CDI[0]["source"],
    "engine_lifecycle": "_knowledge.engines ENGINE_EOL",
    "device_plugin_runtime": "_knowledge.kubernetes DEVICE_PLUGIN_STRATEGIES",
    "crictl_skew": "_knowledge.kubernetes CRICTL_GROUPS: " + _kubernetes.CRICTL_GROUPS[0]["source"],
    "dra": "_knowledge.kubernetes DRA_MINIMUMS: " + _kubernetes.DRA_MINIMUMS[0]["source"],
    "fabricmanager": "secondary: NVIDIA/gpu-operator#544, #2781",
    "declaration": "gpufleet.nvidia team interfaces (role variables)",
    "gpu_model": "_knowledge.gpus GPU_MODELS",
    "cuda_image": "_knowledge.cuda CUDA_DRIVERS, FORWARD_COMPAT ; _knowledge.gpus ARCHITECTURES (last_cuda), "
    "GPU_MODELS (data_center): " + _gpus.ARCHITECTURES[0]["source"],
}

# The verdicts of a CUDA image judged against a node (Matrix.judge_cuda_image).
CUDA_IMAGE_VERDICTS = ("native", "compat", "unsupported", "unknown")
_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")

SEVERITIES = ("info", "warning", "error")

# Every built-in rule, for `ignore_rules` and the docs. Each toolkit CVE floor
# is a rule of its own, so ignoring `container_toolkit` never silences one.
RULES: dict[str, str] = {
    "declaration": "declared versions are well-formed and agree with each other",
    "gpu_model": "declared GPU models are known to the matrix",
    "cuda_driver": "the driver runs every CUDA version the fleet's images use",
    "cuda_forward_compat": "a CUDA newer than the driver runs through the cuda-compat package (forward compatibility)",
    "branch_lifecycle": "the driver branch is supported (type and end of life)",
    "driver_security": "the driver carries its branch's fixes of NVIDIA's driver security bulletins",
    "architecture_branch": "the driver supports every GPU on the host (its architecture and its product's floor)",
    "kernel_module": "the kernel module flavour suits every GPU on the host",
    "mig_supported": "MIG is only declared for MIG-capable GPUs",
    "mig_driver": "the driver is new enough for MIG on each GPU model",
    "container_toolkit": "the Container Toolkit version has the features the node needs",
    "cdi_spec_version": "the container engine reads the CDI specification version the toolkit writes",
    "engine_cdi": "the container engine supports CDI the way it is declared",
    "engine_lifecycle": "the container engine's release is still supported",
    "device_plugin_runtime": "the device plugin's device-list strategy works with the engine's runtime setup",
    "crictl_skew": "crictl matches the cluster's Kubernetes minor",
    "dra": "Kubernetes and the driver meet NVIDIA's DRA driver's minimums where the node declares DRA (gpufleet_dra)",
    "fabricmanager": "Fabric Manager runs at exactly the driver's version",
}
for _row in CTK_CVE_FLOORS:
    RULES[_row["rule"]] = "Container Toolkit is not below the fix of {0} ({1})".format(_row["cve"], _row["fixed"])
    SOURCES[_row["rule"]] = _row["source"]


class MatrixError(ValueError):
    """Bad input to the matrix (a malformed version, an invalid extra row or rule)."""


# =============================================================================
# Versions
# =============================================================================

_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)")
_EPOCH = re.compile(r"^\d+:")


class Version(tuple):
    """A parsed version: compares as a tuple of ints, prints as it was written.

    Driver releases are written zero-padded ("580.65.06"); a plain tuple would
    print them back as "580.65.6".
    """

    text: str

    def __new__(cls, parts: t.Iterable[int], text: str) -> "Version":
        version = super().__new__(cls, parts)
        version.text = text
        return version

    def __str__(self) -> str:
        return self.text


def parse_version(text: t.Any) -> Version:
    """Leading dotted numbers of a version, package version or tag.

    "550.54.14" -> (550, 54, 14); "v1.33.0" -> (1, 33, 0);
    "1:1.17.8-1" (Debian epoch, revision) -> (1, 17, 8);
    "1.7.24~ds1-6+deb13u1" -> (1, 7, 24); "5:28.3.0-1~debian.12" -> (28, 3, 0).
    """
    value = _EPOCH.sub("", str(text).strip())
    match = _VERSION.match(value)
    if not match:
        raise MatrixError("'{0}' is not a version".format(text))
    return Version((int(part) for part in match.group(1).split(".")), match.group(1))


_OPERATORS: dict[str, t.Callable[[t.Any, t.Any], bool]] = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def version_text(version: t.Sequence[int]) -> str:
    if isinstance(version, Version):
        return version.text
    return ".".join(str(part) for part in version)


def driver_branch(version: t.Any) -> str:
    """The branch of a driver version: "550.127.05" -> "550"."""
    return str(parse_version(version)[0])


def _words(value: t.Any) -> list[str]:
    """A list option that may also be given as "a,b" text: ["a", "b"]."""
    if value in (None, ""):
        return []
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def cuda_label(release: tuple[int, ...]) -> str:
    """How NVIDIA names a CUDA release: (12, 4, 1) -> "Update 1"; (13, 4, 1) -> "GA".

    Up to 13.3 the third number counts updates (x.y.0 is GA); from
    CUDA_BUILD_NUMBERED_FROM on GA is x.y.1 and the third number is a build.
    """
    if tuple(release[:2]) >= CUDA_BUILD_NUMBERED_FROM:
        return "GA" if release[2] <= 1 else "build {0}".format(release[2])
    return "GA" if release[2] == 0 else "Update {0}".format(release[2])


def flavours_for(architecture: str, grace: bool = False) -> tuple[str, ...]:
    """The kernel-module flavours a GPU runs, preferred first; () for an unknown architecture.

    A Grace row of KERNEL_MODULE_FLAVOURS wins over its architecture's plain
    row for a GPU on a Grace superchip.
    """
    for row in KERNEL_MODULE_FLAVOURS:
        if row["architecture"] == architecture and (grace or not row.get("grace")):
            return tuple(row["flavours"])
    return ()


def gpu_kind(architecture: str, grace: bool, style: str = "key") -> str:
    """ "grace_hopper" / "Grace Hopper" where a Grace rule applies, else the architecture."""
    special = grace and any(row["architecture"] == architecture and row.get("grace") for row in KERNEL_MODULE_FLAVOURS)
    if not special:
        return architecture
    return "grace_" + architecture if style == "key" else "Grace " + architecture.capitalize()


def _month_end(year_month: str) -> datetime.date:
    year, month = (int(part) for part in year_month.split("-"))
    return datetime.date(year, month, calendar.monthrange(year, month)[1])


def _month_name(year_month: str) -> str:
    year, month = (int(part) for part in year_month.split("-"))
    return "{0} {1}".format(calendar.month_name[month], year)


# =============================================================================
# The driver being judged
# =============================================================================


class Driver:
    """A driver as declared (branch and/or exact version) or as loaded.

    A branch alone does not pin a release: comparisons against a release in
    the same branch return None ("cannot tell") instead of guessing.
    """

    def __init__(self, version: str | None = None, branch: str | None = None) -> None:
        self.version = parse_version(version) if version else None
        if branch:
            self.branch = parse_version(branch)[0]
        elif self.version:
            self.branch = self.version[0]
        else:
            raise MatrixError("a driver needs a version or a branch")

    def __str__(self) -> str:
        return version_text(self.version) if self.version else "R{0}".format(self.branch)

    @property
    def pinned(self) -> bool:
        return self.version is not None

    def at_least(self, minimum: str) -> bool | None:
        """driver >= minimum; None when a bare branch could go either way."""
        wanted = parse_version(minimum)
        if self.version is not None:
            return self.version >= wanted
        if self.branch != wanted[0]:
            return self.branch > wanted[0]
        # Every release of the branch satisfies a bare-branch minimum ("580").
        return True if len(wanted) == 1 else None

    def compare(self, operator: str, operand: str) -> bool | None:
        """`driver <operator> operand` on the operand's precision ("550" = the branch).

        None when a bare branch could go either way (R550 against 550.90.07).
        """
        right = parse_version(operand)
        if self.version is not None:
            return _OPERATORS[operator](self.version[: len(right)], right)
        if len(right) == 1 or self.branch != right[0]:
            return _OPERATORS[operator]((self.branch,), right[:1])
        return None


# =============================================================================
# GPUs
# =============================================================================


def _normalise_name(name: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", name.lower()).split())


class Gpu:
    """One GPU: from NVML facts (authoritative) or a declared model name."""

    def __init__(
        self,
        label: str,
        name: str,
        architecture: str,
        model: dict[str, t.Any] | None,
        mig_capable: bool | None,
        pci_device_id: str | None = None,
        index: int | None = None,
    ) -> None:
        self.label = label
        self.name = name
        self.architecture = architecture
        self.model = model
        self.mig_capable = mig_capable
        self.pci_device_id = pci_device_id
        self.index = index

    @property
    def grace(self) -> bool:
        return bool(self.model and self.model.get("grace"))

    @property
    def model_key(self) -> str | None:
        return self.model["model"] if self.model else None

    def as_dict(self) -> dict[str, t.Any]:
        return {
            "label": self.label,
            "name": self.name,
            "architecture": self.architecture,
            "model": self.model_key,
            "grace": self.grace,
            "mig_capable": self.mig_capable,
        }


# =============================================================================
# Findings
# =============================================================================


def finding(rule: str, severity: str, subject: str, message: str, fix: str, layer: str, source: str | None = None) -> dict[str, str]:
    return {
        "rule": rule,
        "severity": severity,
        "layer": layer,
        "subject": subject,
        "message": message,
        "fix": fix,
        "source": source if source is not None else SOURCES.get(rule, ""),
    }


def worst(findings: t.Iterable[dict[str, t.Any]]) -> str | None:
    """The highest severity among findings, or None when there are none."""
    levels = [SEVERITIES.index(f["severity"]) for f in findings]
    return SEVERITIES[max(levels)] if levels else None


def fails(findings: t.Iterable[dict[str, t.Any]], fail_on: str) -> list[dict[str, t.Any]]:
    """The findings at or above `fail_on` (error | warning | never)."""
    if fail_on == "never":
        return []
    threshold = SEVERITIES.index(fail_on)
    return [f for f in findings if SEVERITIES.index(f["severity"]) >= threshold]


# =============================================================================
# The node as the rules see it
# =============================================================================


class NodeView:
    """Everything the rules judge, normalised from declarations and facts.

    Built by ``Matrix.view()``; each attribute is None when not declared or
    not known, and the rules that need it do not fire.
    """

    def __init__(self) -> None:
        self.target = "desired"
        self.driver: Driver | None = None
        self.driver_state = "present"
        self.kernel_module: str | None = None
        self.gpus: list[Gpu] = []
        self.gpu_source = "none"
        self.cuda_versions: list[str] = []
        self.cuda_compat = False
        self.toolkit: tuple[int, ...] | None = None
        self.engine: str | None = None
        self.engine_version: tuple[int, ...] | None = None
        self.cdi_wanted = False
        self.cdi_managed = False
        self.device_name_strategies: list[str] = []
        self.device_list_strategies: list[str] = []
        self.nvidia_default_runtime: bool | None = None
        self.crictl: tuple[int, ...] | None = None
        self.kubernetes: tuple[int, ...] | None = None
        # DRA (gpufleet_dra): the Kubernetes release as declared (with its
        # patch level, when given: DRA's floor is a patch release).
        self.kubernetes_release: tuple[int, ...] | None = None
        self.dra: str | None = None
        self.dra_compute_domains = False
        self.fabricmanager: tuple[int, ...] | None = None
        self.mig_label: str | None = None
        self.mig_config: dict[str, t.Any] | None = None

    def as_dict(self) -> dict[str, t.Any]:
        def text(version: tuple[int, ...] | None) -> str | None:
            return version_text(version) if version else None

        return {
            "target": self.target,
            "driver": str(self.driver) if self.driver else None,
            "driver_branch": str(self.driver.branch) if self.driver else None,
            "driver_state": self.driver_state,
            "kernel_module": self.kernel_module,
            "gpus": [gpu.as_dict() for gpu in self.gpus],
            "gpu_source": self.gpu_source,
            "cuda_versions": list(self.cuda_versions),
            "cuda_compat": self.cuda_compat,
            "container_toolkit": text(self.toolkit),
            "engine": self.engine,
            "engine_version": text(self.engine_version),
            "cdi": self.cdi_wanted,
            "device_list_strategies": list(self.device_list_strategies),
            "crictl": text(self.crictl),
            "kubernetes": text(self.kubernetes),
            "dra": self.dra,
            "fabricmanager": text(self.fabricmanager),
            "mig_label": self.mig_label,
        }


# Package names whose versions the "installed" view reads (Debian/Ubuntu and
# RHEL spellings); a name ending in "*" is a prefix. Kept in the knowledge base.
PACKAGE_NAMES: dict[str, tuple[str, ...]] = version_packages()


def package_version(packages: dict[str, t.Any] | None, names: t.Iterable[str]) -> str | None:
    """The version of the first installed package among `names` (package_facts shape)."""
    if not packages:
        return None
    for name in names:
        if name.endswith("*"):
            matches = sorted(key for key in packages if key.startswith(name[:-1]))
        else:
            matches = [name] if name in packages else []
        for match in matches:
            entries = packages[match]
            entry = entries[0] if isinstance(entries, list) and entries else entries
            if isinstance(entry, dict) and entry.get("version"):
                return str(entry["version"])
    return None


# =============================================================================
# Declarative custom rules
# =============================================================================

_CONDITION = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\S.*)$")

# Fields a custom rule can test; "per_item" fields hold several values (one
# per GPU, per CUDA version): `when` matches if any value matches, `require`
# needs every value to match.
CUSTOM_FIELDS: dict[str, str] = {
    "driver_version": "version",
    "driver_branch": "version",
    "kernel_module": "text",
    "gpu_model": "per_item",
    "gpu_architecture": "per_item",
    "cuda_version": "per_item_version",
    "container_toolkit_version": "version",
    "engine": "text",
    "engine_version": "version",
    "crictl_version": "version",
    "kubernetes_version": "version",
}


class CustomRule:
    """A user rule: `when` all conditions hold, every `require` must hold.

    ``{id, severity, message, fix, when: {field: cond}, require: {field: cond}}``
    where a condition is a value ("hopper"), a list of values (any of them) or,
    for versions, an operator and a version (">= 550.90.07"). A bare driver
    branch that cannot be decided against a release is reported, as a warning
    at most, rather than guessed.
    """

    def __init__(self, spec: t.Any) -> None:
        if not isinstance(spec, dict):
            raise MatrixError("custom rule {0!r}: expected a mapping".format(spec))
        self.id = str(spec.get("id") or "")
        if not re.match(r"^[A-Za-z0-9_.-]+$", self.id):
            raise MatrixError("custom rule {0!r}: `id` must be a word (letters, digits, _ . -)".format(spec))
        unknown = sorted(set(spec) - {"id", "severity", "message", "fix", "when", "require", "layer"})
        if unknown:
            raise MatrixError("custom rule {0}: unknown key(s) {1}".format(self.id, ", ".join(unknown)))
        self.severity = spec.get("severity", "error")
        if self.severity not in SEVERITIES:
            raise MatrixError("custom rule {0}: severity must be one of {1}".format(self.id, ", ".join(SEVERITIES)))
        self.message = str(spec.get("message") or "custom rule {0} is not met".format(self.id))
        self.fix = str(spec.get("fix") or "")
        self.layer = str(spec.get("layer") or "fleet")
        self.when = self._conditions(spec.get("when") or {}, "when")
        self.require = self._conditions(spec.get("require") or {}, "require")
        if not self.require:
            raise MatrixError("custom rule {0}: `require` needs at least one condition".format(self.id))

    def _conditions(self, conditions: t.Any, key: str) -> list[tuple[str, list[tuple[str, t.Any]]]]:
        if not isinstance(conditions, dict):
            raise MatrixError("custom rule {0}: `{1}` must be a mapping of field: condition".format(self.id, key))
        parsed = []
        for field, raw in conditions.items():
            if field not in CUSTOM_FIELDS:
                raise MatrixError("custom rule {0}: unknown field `{1}` in `{2}` (known: {3})".format(self.id, field, key, ", ".join(sorted(CUSTOM_FIELDS))))
            values = raw if isinstance(raw, list) else [raw]
            alternatives = []
            for value in values:
                match = _CONDITION.match(str(value))
                operator, operand = (match.group(1), match.group(2).strip()) if match else ("==", str(value).strip())
                if "version" in CUSTOM_FIELDS[field]:
                    try:
                        parse_version(operand)
                    except MatrixError:
                        raise MatrixError("custom rule {0}: `{1}: {2}` is not a version condition".format(self.id, field, value)) from None
                elif operator not in ("==", "!="):
                    raise MatrixError("custom rule {0}: `{1}` compares text; use a value or a list".format(self.id, field))
                alternatives.append((operator, operand))
            parsed.append((field, alternatives))
        return parsed

    @staticmethod
    def _values(view: NodeView, field: str) -> list[t.Any] | None:
        """The view's values for a field (None: not known)."""
        if field == "driver_version":
            return [view.driver] if view.driver else None
        if field == "driver_branch":
            return [str(view.driver.branch)] if view.driver else None
        if field == "kernel_module":
            return [view.kernel_module] if view.kernel_module else None
        if field == "gpu_model":
            return [gpu.model_key or gpu.name for gpu in view.gpus] or None
        if field == "gpu_architecture":
            return [gpu.architecture for gpu in view.gpus] or None
        if field == "cuda_version":
            return list(view.cuda_versions) or None
        if field == "engine":
            return [view.engine] if view.engine else None
        versions = {
            "container_toolkit_version": view.toolkit,
            "engine_version": view.engine_version,
            "crictl_version": view.crictl,
            "kubernetes_version": view.kubernetes,
        }
        return [versions[field]] if versions.get(field) else None

    @staticmethod
    def _holds(field: str, value: t.Any, operator: str, operand: str) -> bool | None:
        if isinstance(value, Driver):
            return value.compare(operator, operand)
        if "version" in CUSTOM_FIELDS[field]:
            left = value if isinstance(value, tuple) else parse_version(value)
            right = parse_version(operand)
            # "1.33" means the whole minor: compare on the operand's precision.
            return _OPERATORS[operator](left[: len(right)], right)
        same = str(value).lower() == operand.lower()
        return same if operator == "==" else not same

    def _field_holds(self, view: NodeView, field: str, alternatives: list[tuple[str, t.Any]], every: bool) -> bool | None:
        values = self._values(view, field)
        if values is None:
            return None
        results = []
        for value in values:
            outcomes = [self._holds(field, value, op, operand) for op, operand in alternatives]
            if True in outcomes:
                results.append(True)
            elif None in outcomes:
                results.append(None)
            else:
                results.append(False)
        if every:
            if False in results:
                return False
            return None if None in results else True
        if True in results:
            return True
        return None if None in results else False

    def evaluate(self, view: NodeView) -> list[dict[str, str]]:
        for field, alternatives in self.when:
            if self._field_holds(view, field, alternatives, every=False) is not True:
                return []
        found = []
        for field, alternatives in self.require:
            holds = self._field_holds(view, field, alternatives, every=True)
            wanted = " or ".join("{0} {1}".format(op, operand) for op, operand in alternatives)
            if holds is False:
                found.append(
                    finding(
                        "custom:" + self.id,
                        self.severity,
                        field,
                        "{0} ({1} must be {2})".format(self.message, field, wanted),
                        self.fix,
                        self.layer,
                        "custom rule",
                    )
                )
            elif holds is None:
                found.append(
                    finding(
                        "custom:" + self.id,
                        "warning" if self.severity == "error" else self.severity,
                        field,
                        "{0}: cannot tell whether {1} is {2} from what is declared".format(self.message, field, wanted),
                        self.fix or "declare {0} precisely (e.g. pin driver_version)".format(field),
                        self.layer,
                        "custom rule",
                    )
                )
        return found


# =============================================================================
# The matrix
# =============================================================================


_BUILTIN: dict[str, t.Any] = {}


def _builtin_cuda_rows() -> dict[tuple[int, ...], tuple[str, tuple[int, ...] | None]]:
    """The knowledge base's CUDA rows, parsed once per process: every host's Matrix starts from them, and the
    controller parses them before it forks its workers (the action plugin builds a Matrix at import)."""
    if "cuda" not in _BUILTIN:
        _BUILTIN["cuda"] = {parse_version(cuda): (label, parse_version(driver) if driver else None) for cuda, label, driver in CUDA_TOOLKIT_DRIVERS}
    return _BUILTIN["cuda"]


class Matrix:
    """The tables (built in, plus user rows) and the rules over them."""

    def __init__(
        self,
        tables: dict[str, t.Any] | None = None,
        custom_rules: t.Iterable[t.Any] = (),
        today: datetime.date | None = None,
        eol_warning_days: int = 180,
        ignore_rules: t.Iterable[str] = (),
    ) -> None:
        tables = tables or {}
        unknown = sorted(set(tables) - {"cuda_drivers", "branches", "gpu_models"})
        if unknown:
            raise MatrixError("tables: unknown table(s) {0} (known: branches, cuda_drivers, gpu_models)".format(", ".join(unknown)))
        self.cuda_drivers = self._cuda_rows(tables.get("cuda_drivers") or [])
        self.branches = self._branch_rows(tables.get("branches") or [])
        self.gpu_models = self._gpu_rows(tables.get("gpu_models") or [])
        self.custom_rules = [CustomRule(spec) for spec in custom_rules or []]
        self.today = today or datetime.date.today()
        self.eol_warning_days = int(eol_warning_days)
        self.ignore_rules = set(ignore_rules or [])

    # -- tables -------------------------------------------------------------------
    @staticmethod
    def _cuda_rows(extra: list[t.Any]) -> dict[tuple[int, ...], tuple[str, tuple[int, ...] | None]]:
        rows = dict(_builtin_cuda_rows())
        for row in extra:
            if not isinstance(row, dict) or not row.get("cuda") or not row.get("driver"):
                raise MatrixError("tables.cuda_drivers: each row needs `cuda` and `driver`, got {0!r}".format(row))
            cuda = parse_version(row["cuda"])
            if len(cuda) < 2:
                raise MatrixError("tables.cuda_drivers: `cuda` must be major.minor[.patch], got {0!r}".format(row["cuda"]))
            if len(cuda) == 2:
                # "13.4" names the GA release: 13.4.1 from the build-numbered releases on.
                cuda = cuda + ((1,) if cuda >= CUDA_BUILD_NUMBERED_FROM else (0,))
            cuda = cuda[:3]
            rows[cuda] = (str(row.get("label") or cuda_label(cuda)), parse_version(row["driver"]))
        return rows

    @staticmethod
    def _branch_rows(extra: list[t.Any]) -> dict[str, dict[str, t.Any]]:
        rows = {branch: dict(info) for branch, info in DRIVER_BRANCHES.items()}
        for row in extra:
            if not isinstance(row, dict) or not row.get("branch"):
                raise MatrixError("tables.branches: each row needs `branch`, got {0!r}".format(row))
            eol = row.get("eol")
            if eol not in (None, "ended") and not re.match(r"^\d{4}-\d{2}$", str(eol)):
                raise MatrixError("tables.branches: `eol` of R{0} must be YYYY-MM, 'ended' or null".format(row["branch"]))
            if row.get("type", "PB") not in BRANCH_TYPES:
                raise MatrixError("tables.branches: `type` of R{0} must be one of {1}".format(row["branch"], ", ".join(BRANCH_TYPES)))
            rows[driver_branch(row["branch"])] = {
                "type": row.get("type", "PB"),
                "eol": eol,
                "note": row.get("note"),
                "status": "V",
                "source": "tables.branches",
            }
        return rows

    @staticmethod
    def _gpu_rows(extra: list[t.Any]) -> tuple[dict[str, t.Any], ...]:
        rows = []
        for row in extra:
            if not isinstance(row, dict) or not row.get("model") or not row.get("architecture"):
                raise MatrixError("tables.gpu_models: each row needs `model` and `architecture`, got {0!r}".format(row))
            if row["architecture"] not in ARCHITECTURE_NAMES:
                raise MatrixError("tables.gpu_models: architecture of {0} must be one of {1}".format(row["model"], ", ".join(ARCHITECTURE_NAMES)))
            pattern = row.get("match") or r"\b{0}\b".format(re.escape(_normalise_name(str(row["model"]))))
            try:
                re.compile(pattern)
            except re.error as exc:
                raise MatrixError("tables.gpu_models: `match` of {0} is not a regular expression: {1}".format(row["model"], exc)) from None
            merged = {"grace": False, "data_center": None, "mig": None, "mig_min_driver": None, "mig_units": None, "source": "tables.gpu_models"}
            merged.update(row)
            merged["match"] = pattern
            rows.append(merged)
        # User rows first: they refine or replace built-in ones.
        return tuple(rows) + GPU_MODELS

    def model_for(self, name: str) -> dict[str, t.Any] | None:
        normalised = _normalise_name(name)
        for row in self.gpu_models:
            if re.search(row["match"], normalised):
                return row
        return None

    # -- lookups used by rules and filters --------------------------------------
    def cuda_release(self, cuda: str) -> tuple[tuple[int, ...], tuple[int, ...] | None, str]:
        """(requested release, its minimum driver or None, note) for a CUDA version.

        "12.4" is the GA release, "12.4.1" Update 1. A release newer than the
        newest known one of its minor gets the newest known floor and a note
        (the real minimum may be higher); an unknown minor gets None.
        """
        parts = parse_version(cuda)
        if len(parts) < 2:
            raise MatrixError("CUDA version '{0}' needs major.minor (e.g. 12.4)".format(cuda))
        same_minor = sorted(release for release in self.cuda_drivers if release[:2] == parts[:2])
        if not same_minor:
            return parts, None, "CUDA {0} is not in the matrix".format(version_text(parts[:2]))
        if len(parts) == 2:
            ga = [r for r in same_minor if self.cuda_drivers[r][0] == "GA"] or same_minor
            return ga[0], self.cuda_drivers[ga[0]][1], self._unread(ga[0])
        release = (parts + (0,))[:3]
        if release in self.cuda_drivers:
            return release, self.cuda_drivers[release][1], self._unread(release)
        older = [r for r in same_minor if r < release and self.cuda_drivers[r][1] is not None] or [r for r in same_minor if r < release]
        if not older:
            return release, self.cuda_drivers[same_minor[0]][1], ""
        note = ""
        if release[:2] >= CUDA_BUILD_NUMBERED_FROM:
            # A build of a known release, not an update: the floor of the
            # newest known release at or below it holds.
            note = "CUDA {0} is not in the matrix: from CUDA {1} the third number is a build number, not an update; the floor of CUDA {2} ({3}) is used".format(
                version_text(release), version_text(CUDA_BUILD_NUMBERED_FROM), version_text(older[-1]), self.cuda_drivers[older[-1]][0]
            )
        elif release > same_minor[-1]:
            note = "CUDA {0} is newer than the newest {1} release in the matrix ({2}); its driver floor may be higher".format(
                version_text(release), version_text(parts[:2]), version_text(same_minor[-1])
            )
        return release, self.cuda_drivers[older[-1]][1], note

    def _unread(self, release: tuple[int, ...]) -> str:
        """The note for a known release whose minimum driver was not read ("" otherwise)."""
        if self.cuda_drivers[release][1] is not None:
            return ""
        return "the minimum driver of CUDA {0} ({1}) is not verified yet".format(version_text(release), self.cuda_drivers[release][0])

    def min_driver(self, cuda: str, compat: str = "full") -> str | None:
        """Minimum driver for a CUDA version: full support, or `minor` (MVC floor)."""
        if compat == "minor":
            parts = parse_version(cuda)
            if len(parts) < 2:
                raise MatrixError("CUDA version '{0}' needs major.minor (e.g. 12.4)".format(cuda))
            floor = CUDA_MVC_FLOORS.get(parts[0])
            if floor and parts[1] >= CUDA_MVC_FIRST_MINOR.get(parts[0], 0):
                return floor
            return self.min_driver(cuda, "full")
        if compat != "full":
            raise MatrixError("compat must be 'full' or 'minor', got '{0}'".format(compat))
        driver = self.cuda_release(cuda)[1]
        return version_text(driver) if driver else None

    def max_cuda(self, driver: str) -> str | None:
        """The newest CUDA major.minor whose release driver the given driver satisfies."""
        version = parse_version(driver)
        satisfied = [release for release, (_label, minimum) in self.cuda_drivers.items() if minimum is not None and version >= minimum]
        return version_text(max(satisfied)[:2]) if satisfied else None

    def branch_status(self, branch: str) -> dict[str, t.Any]:
        """Type and lifecycle of a branch as of `today`."""
        key = driver_branch(branch)
        info = self.branches.get(key)
        result: dict[str, t.Any] = {"branch": key, "type": None, "eol": None, "status": "unknown", "days_left": None, "note": None}
        if info is None:
            return result
        result.update(type=info["type"], eol=info["eol"], note=info.get("note"))
        eol = info["eol"]
        if eol == "ended":
            result["status"] = "eol"
        elif eol:
            end = _month_end(eol)
            days_left = (end - self.today).days
            result["days_left"] = days_left
            if days_left < 0:
                result["status"] = "eol"
            elif days_left <= self.eol_warning_days:
                result["status"] = "near_eol"
            else:
                result["status"] = "supported"
        return result

    @staticmethod
    def architecture_index(architecture: str) -> int:
        return ARCHITECTURE_NAMES.index(architecture)

    def architecture_support(self, architecture: str) -> tuple[str | None, str | None]:
        """(first driver, last branch) for an architecture; None where not bounded."""
        for name, first_cuda, last_branch in ARCHITECTURES:
            if name == architecture:
                first = None
                if first_cuda and parse_version(first_cuda) >= (11, 0):
                    first = self.min_driver(first_cuda)
                return first, last_branch
        raise MatrixError("unknown architecture '{0}' (known: {1})".format(architecture, ", ".join(ARCHITECTURE_NAMES)))

    def supports_architecture(self, driver: Driver, architecture: str) -> bool | None:
        first, last = self.architecture_support(architecture)
        if last is not None and driver.branch > int(last):
            return False
        if first is not None:
            return driver.at_least(first)
        return True

    @staticmethod
    def ctk_features(version: str) -> dict[str, bool]:
        current = parse_version(version)
        return {name: current >= parse_version(first) for name, first, _what in CTK_FEATURES}

    @staticmethod
    def engine_cdi(engine: str, version: tuple[int, ...]) -> str:
        if engine not in ENGINE_CDI:
            raise MatrixError("unknown container engine '{0}' (known: {1})".format(engine, ", ".join(ENGINES)))
        support = "none"
        for first, level in ENGINE_CDI[engine]:
            if version >= parse_version(first):
                support = level
        return support

    @staticmethod
    def kernel_module_for(gpus: t.Iterable[Gpu], requested: str = "auto") -> tuple[str | None, list[str]]:
        """(flavour, reasons): what `auto` resolves to, or why `requested` cannot work.

        Returns (None, reasons) when no flavour suits every GPU.
        """
        need_open, need_proprietary = [], []
        for gpu in gpus:
            flavours = flavours_for(gpu.architecture, gpu.grace)
            if "open" not in flavours and flavours:
                need_proprietary.append("{0} ({1}) needs the proprietary modules".format(gpu.label, gpu.architecture))
            elif "proprietary" not in flavours and flavours:
                kind = gpu_kind(gpu.architecture, gpu.grace, "text")
                need_open.append("{0} ({1}) needs the open modules".format(gpu.label, kind))
        if need_open and need_proprietary:
            return None, need_open + need_proprietary
        if requested == "open":
            return ("open", []) if not need_proprietary else (None, need_proprietary)
        if requested == "proprietary":
            return ("proprietary", []) if not need_open else (None, need_open)
        return ("proprietary" if need_proprietary else "open"), []

    # -- building the view --------------------------------------------------------
    def gpu_from_name(self, name: str, label: str) -> Gpu:
        text = str(name).strip()
        if text.lower() in ARCHITECTURE_NAMES:
            return Gpu(label, text, text.lower(), None, None)
        model = self.model_for(text)
        if model is None:
            return Gpu(label, text, "unknown", None, None)
        return Gpu(label, text, model["architecture"], model, model.get("mig"))

    def gpus_from_nvml(self, nvml: dict[str, t.Any]) -> list[Gpu]:
        gpus = []
        for fact in nvml.get("gpus") or []:
            name = fact.get("name") or "GPU {0}".format(fact.get("index"))
            model = self.model_for(name)
            architecture = fact.get("architecture") or "unknown"
            if architecture not in ARCHITECTURE_NAMES and model:
                architecture = model["architecture"]
            mig = fact.get("mig") or {}
            pci = fact.get("pci") or {}
            gpus.append(
                Gpu(
                    "GPU {0} ({1})".format(fact.get("index"), name),
                    name,
                    architecture,
                    model,
                    bool(mig.get("capable")),
                    pci.get("device_id"),
                    fact.get("index"),
                )
            )
        return gpus

    def view(
        self,
        desired: dict[str, t.Any] | None = None,
        installed: dict[str, t.Any] | None = None,
        cuda_versions: t.Iterable[str] = (),
        target: str = "desired",
        cuda_compat: bool = False,
    ) -> tuple[NodeView, list[dict[str, str]]]:
        """Normalise declarations and facts; return the view and declaration findings."""
        desired = desired or {}
        installed = installed or {}
        nvml = installed.get("nvml") or {}
        packages = installed.get("packages") or {}
        versions = installed.get("versions") or {}
        view = NodeView()
        view.target = target
        # Declared, or (judging a node) a cuda-compat package is installed.
        view.cuda_compat = bool(cuda_compat) or (target == "installed" and bool(package_version(packages, PACKAGE_NAMES["cuda_compat"])))
        found: list[dict[str, str]] = []

        def bad(subject: str, message: str, fix: str, layer: str) -> None:
            found.append(finding("declaration", "error", subject, message, fix, layer))

        def version_of(subject: str, value: t.Any, fix: str, layer: str) -> tuple[int, ...] | None:
            if value in (None, ""):
                return None
            try:
                return parse_version(value)
            except MatrixError:
                bad(subject, "{0} '{1}' is not a version".format(subject, value), fix, layer)
                return None

        # GPUs: NVML facts when a driver answers, else the declared models.
        if nvml.get("status") == "ok" and nvml.get("gpus"):
            view.gpus = self.gpus_from_nvml(nvml)
            view.gpu_source = "nvml"
        elif desired.get("driver_gpu_models"):
            view.gpus = [self.gpu_from_name(name, "declared GPU '{0}'".format(name)) for name in desired["driver_gpu_models"]]
            view.gpu_source = "declared"
        for gpu in view.gpus:
            if gpu.architecture == "unknown":
                found.append(
                    finding(
                        "gpu_model",
                        "warning",
                        gpu.label,
                        "{0}: the matrix does not know this GPU's architecture, so no architecture rule checks it".format(gpu.label),
                        "add it to the matrix tables (gpu_models: [{{model: ..., architecture: ...}}]) or name an architecture ({0})".format(
                            ", ".join(ARCHITECTURE_NAMES)
                        ),
                        "driver",
                    )
                )

        for cuda in cuda_versions or []:
            if not re.match(r"^\d+\.\d+(\.\d+)?$", str(cuda).strip()):
                bad(
                    "cuda_versions",
                    "CUDA version '{0}' is not major.minor[.patch]".format(cuda),
                    'list the CUDA versions of your images like "12.4" or "12.4.1"',
                    "driver",
                )
            else:
                view.cuda_versions.append(str(cuda).strip())

        if target == "desired":
            self._desired_driver(view, desired, bad)
            view.toolkit = version_of(
                "container_toolkit_version",
                desired.get("container_toolkit_version"),
                'set container_toolkit_version to a release such as "1.20.1"',
                "container_toolkit",
            )
            view.crictl = version_of(
                "crictl_version",
                desired.get("crictl_version"),
                'set crictl_version like "v1.33.0", or "" to derive it from crictl_kubernetes_version',
                "crictl",
            )
        else:
            loaded = nvml.get("driver_version") if nvml.get("status") == "ok" else None
            loaded = loaded or versions.get("driver")
            if loaded:
                view.driver = Driver(version=loaded)
            view.driver_state = "present" if view.driver else "absent"
            view.kernel_module = versions.get("kernel_module") or None
            view.toolkit = version_of(
                "container_toolkit", versions.get("container_toolkit") or package_version(packages, PACKAGE_NAMES["container_toolkit"]), "", "container_toolkit"
            )
            view.crictl = version_of("crictl", versions.get("crictl") or package_version(packages, PACKAGE_NAMES["crictl"]), "", "crictl")
            view.fabricmanager = version_of(
                "fabricmanager", versions.get("fabricmanager") or package_version(packages, PACKAGE_NAMES["fabricmanager"]), "", "driver"
            )

        engine = desired.get("container_runtime_engine")
        if engine:
            if engine not in ENGINES:
                bad(
                    "container_runtime_engine",
                    "container_runtime_engine '{0}' is not one of {1}".format(engine, ", ".join(ENGINES)),
                    "use containerd, docker or crio",
                    "container_runtime",
                )
            else:
                view.engine = engine
                view.engine_version = version_of(engine, versions.get(engine) or package_version(packages, PACKAGE_NAMES[engine]), "", "container_runtime")
        view.cdi_wanted = bool(desired.get("container_runtime_cdi"))
        view.cdi_managed = bool(desired.get("cdi_spec_dir"))
        view.device_name_strategies = _words(desired.get("cdi_device_name_strategy"))
        view.device_list_strategies = _words(desired.get("device_plugin_device_list_strategy"))
        if desired.get("container_runtime_set_default") is not None:
            view.nvidia_default_runtime = bool(desired["container_runtime_set_default"])

        kubernetes = desired.get("crictl_kubernetes_version")
        if kubernetes not in (None, ""):
            parts = version_of("crictl_kubernetes_version", kubernetes, 'set crictl_kubernetes_version to the cluster\'s minor, e.g. "1.33"', "crictl")
            if parts is not None:
                if len(parts) < 2 or parts[0] != 1:
                    bad(
                        "crictl_kubernetes_version",
                        "crictl_kubernetes_version '{0}' is not a Kubernetes 1.x minor".format(kubernetes),
                        'set crictl_kubernetes_version to the cluster\'s minor, e.g. "1.33"',
                        "crictl",
                    )
                else:
                    view.kubernetes = parts[:2]
                    view.kubernetes_release = parts

        dra = desired.get("gpufleet_dra")
        if dra not in (None, ""):
            if dra not in DRA_WORKFLOWS:
                bad(
                    "gpufleet_dra",
                    "gpufleet_dra '{0}' is not one of {1}".format(dra, ", ".join(DRA_WORKFLOWS)),
                    'set gpufleet_dra to "driver" (NVIDIA\'s DRA driver chart), "operator" (the GPU Operator\'s GPUCluster) or "" (no DRA)',
                    "driver",
                )
            else:
                view.dra = str(dra)
                view.dra_compute_domains = bool(desired.get("gpufleet_dra_compute_domains"))

        if desired.get("mig_label"):
            view.mig_label = str(desired["mig_label"])
            config = desired.get("mig_config")
            view.mig_config = config if isinstance(config, dict) and config else None
        return view, found

    @staticmethod
    def _desired_driver(view: NodeView, desired: dict[str, t.Any], bad: t.Callable[..., None]) -> None:
        view.driver_state = desired.get("driver_state") or "present"
        if view.driver_state not in ("present", "absent"):
            bad("driver_state", "driver_state '{0}' is not present or absent".format(view.driver_state), "set driver_state to present or absent", "driver")
        module = desired.get("driver_kernel_module")
        if module:
            if module not in ("auto", "open", "proprietary"):
                bad(
                    "driver_kernel_module",
                    "driver_kernel_module '{0}' is not auto, open or proprietary".format(module),
                    "set driver_kernel_module to auto, open or proprietary",
                    "driver",
                )
            else:
                view.kernel_module = module
        version = str(desired.get("driver_version") or "").strip()
        branch = str(desired.get("driver_branch") or "").strip()
        fix_version = 'set driver_version to a full release such as "580.95.05", or "" to follow driver_branch'
        fix_branch = 'set driver_branch to a branch number such as "580"'
        ok = True
        if version and not re.match(r"^\d{3}\.\d+(\.\d+)?$", version):
            bad("driver_version", "driver_version '{0}' is not a driver release (NNN.NN[.NN])".format(version), fix_version, "driver")
            ok = False
        if branch and not re.match(r"^\d{3}$", branch):
            bad("driver_branch", "driver_branch '{0}' is not a branch number (three digits)".format(branch), fix_branch, "driver")
            ok = False
        # As in the driver role, an exact driver_version decides the branch;
        # driver_branch (often just the role default) then plays no part.
        if ok and view.driver_state == "present" and (version or branch):
            view.driver = Driver(version=version or None, branch=driver_branch(version) if version else branch)

    # -- evaluation ---------------------------------------------------------------
    def evaluate(
        self,
        desired: dict[str, t.Any] | None = None,
        installed: dict[str, t.Any] | None = None,
        cuda_versions: t.Iterable[str] = (),
        target: str = "desired",
        cuda_compat: bool = False,
    ) -> tuple[NodeView, list[dict[str, str]]]:
        """All findings for one node, most severe first.

        cuda_compat: the images (or the node) carry NVIDIA's cuda-compat
        package, so a CUDA newer than the driver may run by forward
        compatibility.
        """
        view, found = self.view(desired, installed, cuda_versions, target, cuda_compat)
        for rule in (
            self._cuda_driver,
            self._branch_lifecycle,
            self._driver_security,
            self._architecture_branch,
            self._kernel_module,
            self._mig,
            self._container_toolkit,
            self._toolkit_cves,
            self._cdi_spec_version,
            self._engine_cdi,
            self._engine_lifecycle,
            self._device_plugin_runtime,
            self._crictl_skew,
            self._dra,
            self._fabricmanager,
        ):
            found.extend(rule(view))
        for custom in self.custom_rules:
            found.extend(custom.evaluate(view))
        found = [f for f in found if f["rule"] not in self.ignore_rules and f["rule"].split(":", 1)[-1] not in self.ignore_rules]
        unique = {(f["rule"], f["subject"], f["message"]): f for f in found}
        ordered = sorted(unique.values(), key=lambda f: (-SEVERITIES.index(f["severity"]), f["layer"], f["rule"], f["subject"]))
        return view, ordered

    def _cuda_driver(self, view: NodeView) -> list[dict[str, str]]:
        driver = view.driver
        if driver is None:
            return []
        found: list[dict[str, str]] = []
        for cuda in view.cuda_versions:
            subject = "CUDA {0}".format(cuda)
            full, note = self.cuda_release(cuda)[1:]
            parts = parse_version(cuda)
            floor = None
            if parts[1] >= CUDA_MVC_FIRST_MINOR.get(parts[0], 0):
                floor = CUDA_MVC_FLOORS.get(parts[0])
            if full is None and floor is None:
                found.append(
                    finding(
                        "cuda_driver",
                        "warning",
                        subject,
                        "{0}, and CUDA {1}.x has no known compatibility floor: the driver cannot be checked".format(note, parts[0]),
                        'add a row to the matrix tables (cuda_drivers: [{cuda: "' + cuda + '", driver: ...}])',
                        "driver",
                    )
                )
                continue
            if note:
                found.append(
                    finding(
                        "cuda_driver",
                        "warning",
                        subject,
                        note,
                        "add the release's driver to the matrix tables (cuda_drivers) once NVIDIA publishes it",
                        "driver",
                    )
                )
            need = version_text(full) if full else None
            full_ok = driver.at_least(need) if need else False
            floor_ok = driver.at_least(floor) if floor else False
            if full_ok or (need is None and floor_ok and self.cuda_release(cuda)[0] in self.cuda_drivers):
                # Without a verified floor of its own, meeting the major's
                # compatibility floor is all that can be said (the note warns).
                continue
            if full_ok is None:
                found.append(
                    finding(
                        "cuda_driver",
                        "info",
                        subject,
                        "{0} needs driver {1} or newer; only {2} releases from {1} on qualify".format(subject, need, driver),
                        "pin driver_version to {0} or newer to be sure".format(need),
                        "driver",
                    )
                )
            elif floor_ok is not False:
                maybe = "" if floor_ok else " (only {0} releases from {1} on)".format(driver, floor)
                candidate = " (an unverified floor)" if CUDA_STATUS.get(version_text(self.cuda_release(cuda)[0])) == "U" else ""
                found.append(
                    finding(
                        "cuda_driver",
                        "warning",
                        subject,
                        "driver {0} runs {1} only through minor version compatibility{2}: a limited feature set{3}".format(
                            driver, subject, maybe, "; full support needs {0} or newer{1}".format(need, candidate) if need else ""
                        ),
                        "use driver {0} or newer".format(need) if need else "use a newer driver",
                        "driver",
                    )
                )
            else:
                forward, why_not = self._forward_compat(view)
                if forward:
                    found.append(
                        finding(
                            "cuda_forward_compat",
                            "info",
                            subject,
                            "driver {0} runs {1} through forward compatibility (the cuda-compat package of {1}; natively it needs {2} or newer)".format(
                                driver, subject, need or floor
                            ),
                            "nothing to do while the images or the node carry cuda-compat for {0}; a driver of branch {1} or newer runs it natively".format(
                                subject, driver_branch(floor or need)
                            ),
                            "driver",
                        )
                    )
                    continue
                floor_note = ""
                if floor and need and parse_version(floor) < parse_version(need):
                    floor_note = " ({0} or newer runs it with a limited feature set)".format(floor)
                # An unverified release floor only warns; the major's
                # compatibility floor (verified) still makes this an error.
                unverified = CUDA_STATUS.get(version_text(self.cuda_release(cuda)[0])) == "U" and floor is None
                found.append(
                    finding(
                        "cuda_driver",
                        "warning" if unverified else "error",
                        subject,
                        "driver {0} cannot run {1}: it needs {2} or newer{3}{4}{5}".format(
                            driver, subject, need or floor, floor_note, why_not, " (unverified floor: a warning only)" if unverified else ""
                        ),
                        "use a driver of branch {0} or newer, or build the images with an older CUDA{1}".format(
                            driver_branch(floor or need),
                            ""
                            if view.cuda_compat
                            else ", or on data-center GPUs ship NVIDIA's cuda-compat package (forward compatibility; declare it with cuda_compat)",
                        ),
                        "driver",
                    )
                )
        return found

    @staticmethod
    def _forward_compat(view: NodeView) -> tuple[bool, str]:
        """(usable, why not): forward compatibility needs the cuda-compat package and data-center GPUs."""
        if not view.cuda_compat:
            return False, ""
        if not view.gpus:
            return False, "; forward compatibility (cuda-compat) needs data-center GPUs, and no GPU is known"
        other = [gpu.label for gpu in view.gpus if not (gpu.model and gpu.model.get("data_center"))]
        if other:
            return False, (
                "; forward compatibility (cuda-compat) is declared, but it runs on data-center GPUs only and {0} {1} not one".format(
                    ", ".join(other), "is" if len(other) == 1 else "are"
                )
            )
        return True, ""

    # -- CUDA images ----------------------------------------------------------------
    def judge_cuda_image(self, cuda: str, driver: Driver | None, gpus: list[Gpu], compat_installed: t.Iterable[str] = ()) -> dict[str, t.Any]:
        """How a node runs an image that carries CUDA `cuda`.

        verdict: native (the driver meets the release's minimum driver),
        compat (only through the forward-compatibility package
        `compat_package`: data-center GPUs on a data-center branch),
        unsupported (`needs_driver`: the driver it needs; None where an
        architecture is past the CUDA major, which no driver fixes) or
        unknown (the matrix cannot tell).
        `compat_installed`: the cuda-compat-* packages installed on the node.
        Minor version compatibility does not count as native: it runs with a
        limited feature set, and the image check is about running fully.
        """
        parts = parse_version(cuda)
        if len(parts) < 2:
            raise MatrixError("CUDA version '{0}' needs major.minor (e.g. 12.4)".format(cuda))
        release, floor, note = self.cuda_release(cuda)
        need = version_text(floor) if floor else None
        package = "cuda-compat-{0}-{1}".format(parts[0], parts[1])
        result: dict[str, t.Any] = {
            "verdict": "unknown",
            "min_driver": need,
            "needs_driver": None,
            "compat_package": None,
            "compat_installed": False,
            "reason": "",
        }

        def verdict(kind: str, reason: str, **extra: t.Any) -> dict[str, t.Any]:
            result.update(extra, verdict=kind, reason=reason)
            return result

        # An architecture the CUDA major no longer targets: no driver fixes that.
        too_new = [gpu for gpu in gpus if parts[0] > ARCHITECTURE_LAST_CUDA.get(gpu.architecture, parts[0])]
        if too_new:
            architecture = too_new[0].architecture
            return verdict(
                "unsupported",
                "CUDA {0} does not target {1} GPUs ({2}): the last CUDA for {1} is {3}.x".format(
                    version_text(parts[:2]), architecture.capitalize(), ", ".join(sorted({gpu.name for gpu in too_new})), ARCHITECTURE_LAST_CUDA[architecture]
                ),
            )
        if driver is None:
            return verdict(
                "unsupported", "no NVIDIA driver is loaded" + (": CUDA {0} needs {1} or newer".format(cuda, need) if need else ""), needs_driver=need
            )
        if need is None:
            # No verified floor: a driver that fully supports a later known
            # release supports this one too.
            later = [
                r
                for r, (_label, minimum) in self.cuda_drivers.items()
                if r > release and minimum is not None and driver.at_least(version_text(minimum)) is True
            ]
            if later:
                return verdict(
                    "native",
                    "driver {0} fully supports CUDA {1}, newer than {2} ({3})".format(
                        driver, version_text(min(later)), cuda, note or "its own floor is not known"
                    ),
                )
            return verdict(
                "unknown", "{0}: whether driver {1} runs it cannot be told".format(note or "CUDA {0} has no minimum driver in the matrix".format(cuda), driver)
            )
        ok = driver.at_least(need)
        if ok:
            return verdict("native", "driver {0} meets CUDA {1}'s minimum driver {2}{3}".format(driver, cuda, need, " ({0})".format(note) if note else ""))
        if ok is None:
            return verdict("unknown", "CUDA {0} needs driver {1} or newer; only {2} releases from {1} on qualify".format(cuda, need, driver))
        why_not = self._forward_compat_blocker(parts, need, driver, gpus)
        if why_not:
            return verdict("unsupported", "driver {0} is below CUDA {1}'s minimum driver {2}; {3}".format(driver, cuda, need, why_not), needs_driver=need)
        installed = package in set(compat_installed or ())
        return verdict(
            "compat",
            "driver {0} is below CUDA {1}'s minimum driver {2}; these data-center GPUs run it "
            "through the forward-compatibility package {3}, which is {4}installed on the node".format(driver, cuda, need, package, "" if installed else "not "),
            compat_package=package,
            compat_installed=installed,
        )

    def _forward_compat_blocker(self, cuda: tuple[int, ...], need: str, driver: Driver, gpus: list[Gpu]) -> str:
        """Why forward compatibility cannot run this CUDA here ("" when it can)."""
        if cuda[:2] < FORWARD_COMPAT_FIRST_CUDA:
            return "forward compatibility starts with CUDA {0}".format(version_text(FORWARD_COMPAT_FIRST_CUDA))
        branch = self.branches.get(str(driver.branch))
        if branch is None:
            return "forward compatibility needs a data-center driver branch, and R{0} is not in the data-center lifecycle table".format(driver.branch)
        if driver_branch(need) == str(driver.branch) and branch.get("type") != FORWARD_COMPAT_SAME_BRANCH:
            return "within one branch forward compatibility is supported only on a {0}, and R{1} is a {2}".format(
                BRANCH_TYPES[FORWARD_COMPAT_SAME_BRANCH], driver.branch, BRANCH_TYPES.get(branch.get("type"), branch.get("type"))
            )
        if not gpus:
            return "forward compatibility runs on data-center GPUs only, and no GPU is known"
        other = [gpu.label for gpu in gpus if not (gpu.model and gpu.model.get("data_center"))]
        if other:
            return "forward compatibility runs on data-center GPUs only, and {0} {1} not one{2}".format(
                ", ".join(other), "is" if len(other) == 1 else "are", "" if all(gpu.model for gpu in gpus) else " (or not known to the matrix)"
            )
        return ""

    def judge_cuda_images(
        self, images: t.Any, driver: Driver | None, gpus: list[Gpu], packages: dict[str, t.Any] | None = None, variable: str = "verify_cuda_images"
    ) -> list[dict[str, t.Any]]:
        """Judge a list of images ({name, cuda, run?}); `run` says whether to run each one.

        `run`: the image's own `run` where it sets one; else true when native,
        or compat with the cuda-compat package installed on the node.
        """
        if images in (None, ""):
            return []
        if not isinstance(images, list):
            raise MatrixError("{0} must be a list of {{name, cuda}}, got {1}".format(variable, type(images).__name__))
        compat = sorted(key for key in packages or {} if key.startswith("cuda-compat-"))
        judged = []
        for index, image in enumerate(images):
            where = "{0}[{1}]".format(variable, index)
            if not isinstance(image, dict):
                raise MatrixError("{0} must be a mapping {{name, cuda, run}}, got {1!r}".format(where, image))
            unknown = sorted(set(image) - {"name", "cuda", "run"})
            if unknown:
                raise MatrixError("{0}: unknown key(s) {1} (known: name, cuda, run)".format(where, ", ".join(unknown)))
            name = str(image.get("name") or "").strip()
            if not _DIGEST.match(name):
                raise MatrixError(
                    "{0}.name '{1}' is not pinned by digest: write it as <image>@sha256:<64 hex digits> (add the tag before the @ if you like)".format(
                        where, name
                    )
                )
            cuda = str(image.get("cuda") or "").strip()
            if not re.match(r"^\d+\.\d+(\.\d+)?$", cuda):
                raise MatrixError(
                    "{0}.cuda '{1}' is not a CUDA version: give the image's CUDA as major.minor[.patch], e.g. \"12.4\"".format(where, image.get("cuda"))
                )
            run = image.get("run")
            if run is not None and not isinstance(run, bool):
                raise MatrixError("{0}.run must be true or false, got {1!r}".format(where, run))
            verdict = self.judge_cuda_image(cuda, driver, gpus, compat)
            decided = verdict["verdict"] == "native" or (verdict["verdict"] == "compat" and verdict["compat_installed"])
            judged.append(dict({"name": name, "cuda": cuda}, **verdict, run=decided if run is None else run, run_forced=run is not None))
        return judged

    def _branch_lifecycle(self, view: NodeView) -> list[dict[str, str]]:
        if view.driver is None:
            return []
        branch = str(view.driver.branch)
        status = self.branch_status(branch)
        subject = "R{0}".format(branch)
        if status["type"] is None:
            return [
                finding(
                    "branch_lifecycle",
                    "warning",
                    subject,
                    "driver branch R{0} is not in the lifecycle table, so its support status is unknown".format(branch),
                    "check https://docs.nvidia.com/datacenter/tesla/drivers/ and add it to the matrix tables "
                    '(branches: [{branch: "' + branch + '", type: ..., eol: ...}]), or use a listed branch',
                    "driver",
                )
            ]
        found = []
        kind = BRANCH_TYPES.get(status["type"], status["type"])
        supported = self._supported_branches()
        move = "move to a supported branch ({0})".format(", ".join(supported)) if supported else "move to a supported branch"
        if status["status"] == "eol":
            when = " in {0}".format(_month_name(status["eol"])) if status["eol"] not in (None, "ended") else ""
            found.append(
                finding(
                    "branch_lifecycle",
                    "warning",
                    subject,
                    "driver branch R{0} ({1}) reached end of life{2}: no more bug or security fixes".format(branch, kind, when),
                    move,
                    "driver",
                )
            )
        elif status["status"] == "near_eol":
            found.append(
                finding(
                    "branch_lifecycle",
                    "warning",
                    subject,
                    "driver branch R{0} ({1}) reaches end of life in {2} ({3} days left)".format(branch, kind, _month_name(status["eol"]), status["days_left"]),
                    "plan the upgrade: " + move,
                    "driver",
                )
            )
        elif status["status"] == "unknown":
            found.append(
                finding(
                    "branch_lifecycle",
                    "warning",
                    subject,
                    "driver branch R{0} ({1}): end of life not verified; {2}".format(branch, kind, status["note"] or "no support matrix read lists its date"),
                    "check https://docs.nvidia.com/datacenter/tesla/drivers/ ; " + move,
                    "driver",
                )
            )
        if status["type"] == "NFB" and status["status"] != "eol":
            found.append(
                finding(
                    "branch_lifecycle",
                    "info",
                    subject,
                    "driver branch R{0} is a {1} (about a quarter of support); production fleets usually run a Production or Long Term Support branch".format(
                        branch, kind
                    ),
                    "use a Production or Long Term Support branch unless you need this branch's features",
                    "driver",
                )
            )
        return found

    def _driver_security(self, view: NodeView) -> list[dict[str, str]]:
        """A warning when the driver lacks a security fix its own branch has had since.

        A warning, not an error: fleets pin drivers they have validated, and
        the fix is a patch release of the same branch. Branch-only
        declarations install the branch's newest release and pass.
        """
        if view.driver is None or view.driver.version is None:
            return []
        branch = str(view.driver.branch)
        open_rows = [row for row in _drivers.DRIVER_SECURITY_BULLETINS if branch in row["fixed"] and view.driver.version < parse_version(row["fixed"][branch])]
        if not open_rows:
            return []
        target = max((row["fixed"][branch] for row in open_rows), key=parse_version)
        driver = version_text(view.driver.version)
        subject = "driver_version" if view.target == "desired" else "driver {0}".format(driver)
        bulletins = ", ".join("{0} ({1})".format(row["bulletin"], row["published"]) for row in open_rows)
        return [
            finding(
                "driver_security",
                "warning",
                subject,
                "driver {0} lacks the fixes of NVIDIA security bulletin(s) {1} for R{2}; the newest fixed R{2} release is {3}".format(
                    driver, bulletins, branch, target
                ),
                "set driver_version to {0} or newer (or leave it empty to take the branch's newest)".format(target),
                "driver",
                open_rows[-1]["source"],
            )
        ]

    def _supported_branches(self) -> list[str]:
        names = []
        for branch in sorted(self.branches, key=int):
            status = self.branch_status(branch)
            if status["status"] == "supported" and status["type"] in ("PB", "LTSB"):
                names.append("R{0} {1}".format(branch, status["type"]))
        return names

    def _architecture_branch(self, view: NodeView) -> list[dict[str, str]]:
        driver = view.driver
        if driver is None:
            return []
        found = []
        for architecture in sorted({gpu.architecture for gpu in view.gpus if gpu.architecture in ARCHITECTURE_NAMES}, key=self.architecture_index):
            labels = ", ".join(gpu.label for gpu in view.gpus if gpu.architecture == architecture)
            first, last = self.architecture_support(architecture)
            if last is not None and driver.branch > int(last):
                found.append(
                    finding(
                        "architecture_branch",
                        "error",
                        architecture,
                        "driver {0} does not support {1} GPUs ({2}): R{3} is the last branch for {1}".format(driver, architecture.capitalize(), labels, last),
                        'use driver branch R{0} (set driver_branch: "{0}")'.format(last),
                        "driver",
                    )
                )
            elif first is not None:
                ok = driver.at_least(first)
                if ok is False:
                    found.append(
                        finding(
                            "architecture_branch",
                            "error",
                            architecture,
                            "driver {0} predates {1} GPUs ({2}): they need {3} or newer".format(driver, architecture.capitalize(), labels, first),
                            "use a driver of branch {0} or newer".format(driver_branch(first)),
                            "driver",
                        )
                    )
                elif ok is None:
                    found.append(
                        finding(
                            "architecture_branch",
                            "info",
                            architecture,
                            "{0} GPUs need driver {1} or newer; only {2} releases from {1} on qualify".format(architecture.capitalize(), first, driver),
                            "pin driver_version to {0} or newer to be sure".format(first),
                            "driver",
                        )
                    )
        found.extend(self._product_floors(view))
        return found

    def product_floor(self, model: dict[str, t.Any]) -> str | None:
        """A GPU product's own driver floor, above its architecture's (None where it has none)."""
        floors = [model["min_driver"]] if model.get("min_driver") else []
        if model.get("first_cuda"):
            floor = self.min_driver(model["first_cuda"])
            if floor:
                floors.append(floor)
        return max(floors, key=parse_version) if floors else None

    def _product_floors(self, view: NodeView) -> list[dict[str, str]]:
        driver = view.driver
        found = []
        seen = set()
        for gpu in view.gpus:
            if not gpu.model or gpu.model_key in seen:
                continue
            seen.add(gpu.model_key)
            floor = self.product_floor(gpu.model)
            if floor is None:
                continue
            labels = ", ".join(g.label for g in view.gpus if g.model_key == gpu.model_key)
            ok = driver.at_least(floor)
            unverified = gpu.model.get("floor_status") == "U"
            if ok is False:
                found.append(
                    finding(
                        "architecture_branch",
                        "warning" if unverified else "error",
                        gpu.model_key,
                        "driver {0} predates {1} ({2}): it needs {3} or newer{4}".format(
                            driver, gpu.model_key.upper(), labels, floor, " (unverified floor: a warning only)" if unverified else ""
                        ),
                        "use driver {0} or newer (branch {1} or newer)".format(floor, driver_branch(floor)),
                        "driver",
                        gpu.model.get("source"),
                    )
                )
            elif ok is None:
                found.append(
                    finding(
                        "architecture_branch",
                        "info",
                        gpu.model_key,
                        "{0} needs driver {1} or newer; only {2} releases from {1} on qualify".format(gpu.model_key.upper(), floor, driver),
                        "pin driver_version to {0} or newer to be sure".format(floor),
                        "driver",
                        gpu.model.get("source"),
                    )
                )
        return found

    def _kernel_module(self, view: NodeView) -> list[dict[str, str]]:
        if view.driver is None or not view.gpus:
            return []
        requested = view.kernel_module or "auto"
        flavour, reasons = self.kernel_module_for(view.gpus, requested)
        found = []
        if flavour is None:
            if requested == "auto":
                found.append(
                    finding(
                        "kernel_module",
                        "error",
                        "driver_kernel_module",
                        "no kernel module flavour suits every GPU on this host: {0}".format("; ".join(reasons)),
                        "split these GPUs across hosts; one driver cannot serve both",
                        "driver",
                    )
                )
            else:
                other = "open" if requested == "proprietary" else "proprietary"
                found.append(
                    finding(
                        "kernel_module",
                        "error",
                        "driver_kernel_module",
                        "driver_kernel_module is {0}, but {1}".format(requested, "; ".join(reasons)),
                        "set driver_kernel_module: {0} (or auto)".format(other),
                        "driver",
                    )
                )
            return found
        if flavour == "open" and driver_branch_int(view.driver) < int(OPEN_MODULES_FIRST_BRANCH):
            found.append(
                finding(
                    "kernel_module",
                    "error",
                    "driver_kernel_module",
                    "open kernel modules ship from R{0} on; driver {1} has none{2}".format(
                        OPEN_MODULES_FIRST_BRANCH, view.driver, "" if requested == "open" else " and these GPUs need them"
                    ),
                    "use driver branch R{0} or newer, or driver_kernel_module: proprietary where the GPUs allow it".format(OPEN_MODULES_FIRST_BRANCH),
                    "driver",
                )
            )
        elif (
            requested == "proprietary" and driver_branch_int(view.driver) >= int(OPEN_MODULES_DEFAULT_BRANCH) and self.kernel_module_for(view.gpus)[0] == "open"
        ):
            found.append(
                finding(
                    "kernel_module",
                    "info",
                    "driver_kernel_module",
                    "from R{0} on the open modules are NVIDIA's default and suggested flavour for these GPUs".format(OPEN_MODULES_DEFAULT_BRANCH),
                    "consider driver_kernel_module: open (or auto)",
                    "driver",
                )
            )
        return found

    def _mig_gpus(self, view: NodeView) -> list[Gpu]:
        """GPUs the declared MIG label enables MIG on (all GPUs if the config is not at hand)."""
        if not view.mig_label:
            return []
        config = view.mig_config
        entries = None
        if config:
            entries = (config.get("mig-configs") or {}).get(view.mig_label)
        if not isinstance(entries, list):
            return list(view.gpus)
        chosen = []
        for gpu in view.gpus:
            for entry in entries:
                if not isinstance(entry, dict) or not entry.get("mig-enabled"):
                    continue
                devices = entry.get("devices", "all")
                if devices != "all" and gpu.index is not None and gpu.index not in (devices or []):
                    continue
                filters = entry.get("device-filter")
                if filters and gpu.pci_device_id:
                    wanted = [str(f).upper() for f in (filters if isinstance(filters, list) else [filters])]
                    if gpu.pci_device_id.upper() not in wanted:
                        continue
                chosen.append(gpu)
                break
        return chosen

    def _mig(self, view: NodeView) -> list[dict[str, str]]:
        found = []
        for gpu in self._mig_gpus(view):
            if gpu.mig_capable is False:
                found.append(
                    finding(
                        "mig_supported",
                        "error",
                        gpu.label,
                        "MIG label '{0}' enables MIG on {1}, which does not support MIG".format(view.mig_label, gpu.label),
                        'select these GPUs out of the label (devices / device-filter) or set mig_label: ""',
                        "mig",
                    )
                )
                continue
            minimum = gpu.model.get("mig_min_driver") if gpu.model else None
            if not minimum or view.driver is None:
                continue
            ok = view.driver.at_least(minimum)
            if ok is False:
                found.append(
                    finding(
                        "mig_driver",
                        "error",
                        gpu.label,
                        "MIG on {0} needs driver {1} or newer; the driver is {2}".format(gpu.label, minimum, view.driver),
                        "use driver {0} or newer".format(minimum),
                        "mig",
                    )
                )
            elif ok is None:
                found.append(
                    finding(
                        "mig_driver",
                        "info",
                        gpu.label,
                        "MIG on {0} needs driver {1} or newer; only {2} releases from {1} on qualify".format(gpu.label, minimum, view.driver),
                        "pin driver_version to {0} or newer to be sure".format(minimum),
                        "mig",
                    )
                )
        return found

    def _container_toolkit(self, view: NodeView) -> list[dict[str, str]]:
        if view.toolkit is None:
            return []
        found = []
        toolkit = version_text(view.toolkit)
        features = self.ctk_features(toolkit)
        if (view.cdi_wanted or view.cdi_managed) and not features["cdi_generate"]:
            found.append(
                finding(
                    "container_toolkit",
                    "error",
                    "cdi_generate",
                    "Container Toolkit {0} cannot generate CDI specifications (from 1.12.0)".format(toolkit),
                    "set container_toolkit_version to 1.12.0 or newer",
                    "container_toolkit",
                )
            )
        if view.engine == "containerd" and view.engine_version and view.engine_version >= (2,) and not features["containerd_config_v3"]:
            found.append(
                finding(
                    "container_toolkit",
                    "error",
                    "containerd_config_v3",
                    "containerd {0} uses config version 3, which Container Toolkit {1} does not support (from 1.17.4)".format(
                        version_text(view.engine_version), toolkit
                    ),
                    "set container_toolkit_version to 1.17.4 or newer",
                    "container_toolkit",
                )
            )
        if len(view.device_name_strategies) > 1 and (view.cdi_wanted or view.cdi_managed) and not features["device_name_strategies"]:
            first = [row[1] for row in CTK_FEATURES if row[0] == "device_name_strategies"][0]
            found.append(
                finding(
                    "container_toolkit",
                    "error",
                    "cdi_device_name_strategy",
                    "Container Toolkit {0} takes one --device-name-strategy; cdi_device_name_strategy lists {1} (several at once from {2})".format(
                        toolkit, ", ".join(view.device_name_strategies), first
                    ),
                    "set container_toolkit_version to {0} or newer, or give cdi_device_name_strategy one value".format(first),
                    "cdi",
                )
            )
        if view.cdi_managed and not features["cdi_refresh_units"]:
            found.append(
                finding(
                    "container_toolkit",
                    "info",
                    "cdi_refresh_units",
                    "Container Toolkit {0} has no nvidia-cdi-refresh units (from 1.18.0): the cdi role installs gpufleet-cdi-refresh.service instead".format(
                        toolkit
                    ),
                    "nothing to do; 1.18.0 or newer uses NVIDIA's own units",
                    "cdi",
                )
            )
        if view.engine in ("containerd", "crio") and not features["drop_in_configs"]:
            found.append(
                finding(
                    "container_toolkit",
                    "info",
                    "drop_in_configs",
                    "Container Toolkit {0} writes no {1} drop-in configs (from 1.18.0)".format(toolkit, view.engine),
                    "nothing to do: gpufleet writes its own drop-in",
                    "container_runtime",
                )
            )
        return found

    def _toolkit_cves(self, view: NodeView) -> list[dict[str, str]]:
        """One error per CVE the toolkit is below the fix of; each its own rule id."""
        if view.toolkit is None:
            return []
        toolkit = version_text(view.toolkit)
        open_cves = [row for row in CTK_CVE_FLOORS if view.toolkit < parse_version(row["fixed"])]
        if not open_cves:
            return []
        # One upgrade that closes every open CVE.
        target = max((row["fixed"] for row in open_cves), key=parse_version)
        subject = "container_toolkit_version" if view.target == "desired" else "Container Toolkit {0}".format(toolkit)
        return [
            finding(
                row["rule"],
                "error",
                subject,
                "Container Toolkit {0} is vulnerable to {1} ({2}); it is fixed in {3}".format(toolkit, row["cve"], row["what"], row["fixed"]),
                "set container_toolkit_version to {0} or newer; to accept this risk knowingly, add {1} to preflight_ignore_rules".format(target, row["rule"]),
                "container_toolkit",
                row["source"],
            )
            for row in open_cves
        ]

    def cdi_spec_version(self, toolkit: tuple[int, ...]) -> str | None:
        """The CDI specification version a toolkit writes by default (None: older than the table)."""
        spec = None
        for row in _toolkit.CTK_CDI_SPEC_VERSIONS:
            if toolkit >= parse_version(row["first"]):
                spec = row["spec"]
        return spec

    def _cdi_spec_version(self, view: NodeView) -> list[dict[str, str]]:
        if view.toolkit is None or not view.engine or view.engine_version is None:
            return []
        if not (view.cdi_wanted or view.cdi_managed):
            return []
        if self.engine_cdi(view.engine, view.engine_version) == "none":
            # No CDI at all: engine_cdi says so, and the nvidia runtime still injects GPUs.
            return []
        spec = self.cdi_spec_version(view.toolkit)
        rows = [row for row in _engines.CDI_SPEC_MIN_ENGINE if row["spec"] == spec and row["engine"] == view.engine]
        if not rows or view.engine_version >= parse_version(rows[0]["first"]):
            return []
        row = rows[0]
        writer = [r for r in _toolkit.CTK_CDI_SPEC_VERSIONS if r["spec"] == spec][0]
        floor = max((r["fixed"] for r in CTK_CVE_FLOORS), key=parse_version)
        # An older toolkit is a fix only while it is not below a security floor.
        older = (
            ", or set container_toolkit_version below {0} (and at least {1}, the security floor)".format(writer["first"], floor)
            if parse_version(floor) < parse_version(writer["first"])
            else ""
        )
        return [
            finding(
                "cdi_spec_version",
                "error",
                "{0} {1}".format(view.engine, version_text(view.engine_version)),
                "Container Toolkit {0} writes CDI specification {1}, which {2} {3} cannot read (from {4}); GPU containers would fail to start".format(
                    version_text(view.toolkit), spec, view.engine, version_text(view.engine_version), row["first"]
                ),
                "upgrade {0} to {1} or newer{2}, or have the spec written in the older version ({3})".format(
                    view.engine, row["first"], older, writer["workaround"]
                ),
                "container_runtime",
                row["source"],
            )
        ]

    def _engine_lifecycle(self, view: NodeView) -> list[dict[str, str]]:
        if not view.engine or view.engine_version is None:
            return []
        minor = version_text(view.engine_version[:2])
        lines = [row for row in _engines.ENGINE_EOL if row["engine"] == view.engine]
        rows = [row for row in lines if row["minor"] == minor]
        if not rows:
            return []
        row = rows[0]
        end = datetime.datetime.strptime(row["eol"], "%Y-%m-%d").date()
        extended = _month_end(row["extended"]) if row.get("extended") else None
        if (end - self.today).days > self.eol_warning_days:
            return []
        supported = [r["minor"] for r in lines if datetime.datetime.strptime(r["eol"], "%Y-%m-%d").date() > self.today]
        subject = "{0} {1}".format(view.engine, version_text(view.engine_version))
        fix = "upgrade {0} to a supported release line{1}".format(view.engine, " ({0})".format(", ".join(supported)) if supported else "")
        if end >= self.today:
            message = "{0} {1} reaches end of life on {2} ({3} days left)".format(view.engine, minor, row["eol"], (end - self.today).days)
            fix = "plan the upgrade: " + fix
        elif extended and extended >= self.today:
            message = "{0} {1} reached the end of its regular support on {2}; only a narrow extended support ({3}) runs until {4}".format(
                view.engine, minor, row["eol"], row.get("note") or "upstream", _month_name(row["extended"])
            )
        else:
            message = "{0} {1} reached end of life on {2}{3}: no more bug or security fixes".format(
                view.engine, minor, row["eol"], " (extended support ended in {0})".format(_month_name(row["extended"])) if extended else ""
            )
        return [finding("engine_lifecycle", "warning", subject, message, fix, "container_runtime", row["source"])]

    def _device_plugin_runtime(self, view: NodeView) -> list[dict[str, str]]:
        if view.nvidia_default_runtime is not False:
            return []
        found = []
        for row in _kubernetes.DEVICE_PLUGIN_STRATEGIES:
            if row["needs"] == "nvidia_runtime" and row["strategy"] in view.device_list_strategies:
                found.append(
                    finding(
                        "device_plugin_runtime",
                        "warning",
                        "device_plugin_device_list_strategy",
                        "device_plugin_device_list_strategy {0} hands GPUs over through NVIDIA_VISIBLE_DEVICES, which "
                        "only the nvidia runtime acts on, and container_runtime_set_default is false: GPU pods get no "
                        "GPU unless they select an nvidia RuntimeClass".format(row["strategy"]),
                        "set container_runtime_set_default: true, give the GPU pods runtimeClassName: nvidia, or use "
                        "device_plugin_device_list_strategy: cdi-cri with container_runtime_cdi: true",
                        "container_runtime",
                        row["source"],
                    )
                )
        return found

    def _engine_cdi(self, view: NodeView) -> list[dict[str, str]]:
        if not view.engine or view.engine_version is None or not view.cdi_wanted:
            return []
        version = version_text(view.engine_version)
        support = self.engine_cdi(view.engine, view.engine_version)
        subject = "{0} {1}".format(view.engine, version)
        if support == "none":
            first = [v for v, level in ENGINE_CDI[view.engine] if level == "opt_in"][0]
            return [
                finding(
                    "engine_cdi",
                    "warning",
                    subject,
                    "{0} has no CDI support (from {1}); only the nvidia runtime can inject GPUs".format(subject, first),
                    "upgrade {0} to {1} or newer, or set container_runtime_cdi: false".format(view.engine, first),
                    "container_runtime",
                )
            ]
        if support == "unverified":
            return [
                finding(
                    "engine_cdi",
                    "warning",
                    subject,
                    "CDI support of {0} is unverified (CRI-O's first release with CDI is not confirmed; 1.24 is likely)".format(subject),
                    "use CRI-O 1.24 or newer",
                    "container_runtime",
                )
            ]
        if support == "opt_in":
            return [
                finding(
                    "engine_cdi",
                    "info",
                    subject,
                    "{0} supports CDI as an opt-in setting; it is on only where the runtime config enables it".format(subject),
                    "nothing to do: container_runtime_cdi enables it",
                    "container_runtime",
                )
            ]
        return []

    @staticmethod
    def crictl_group(minor: tuple[int, ...]) -> int | None:
        """The index of the CRICTL_GROUPS row a 1.x minor falls in; None below every group."""
        for index, (first, last) in enumerate(CRICTL_GROUPS):
            if minor >= first and (last is None or minor <= last):
                return index
        return None

    def _crictl_skew(self, view: NodeView) -> list[dict[str, str]]:
        if view.crictl is None or view.kubernetes is None:
            return []
        crictl, kubernetes = view.crictl[:2], view.kubernetes[:2]
        if crictl == kubernetes:
            return []
        subject = "crictl {0}".format(version_text(view.crictl))
        wanted = "v{0}.x".format(version_text(kubernetes))
        fix = 'use crictl {0} (or set crictl_version: "" to derive it)'.format(wanted)
        group = self.crictl_group(kubernetes)
        if group is not None and group == self.crictl_group(crictl):
            return [
                finding(
                    "crictl_skew",
                    "warning",
                    subject,
                    "crictl {0} works with Kubernetes {1}, but cri-tools recommends the same minor: CRI features of the newer one may not be supported".format(
                        version_text(view.crictl), version_text(kubernetes)
                    ),
                    fix,
                    "crictl",
                    _kubernetes.CRICTL_GROUPS[group]["source"],
                )
            ]
        if group is None:
            why = "Kubernetes {0} works only with its own cri-tools minor".format(version_text(kubernetes))
        else:
            first, last = CRICTL_GROUPS[group]
            why = "Kubernetes {0} works with cri-tools {1}".format(
                version_text(kubernetes),
                "{0} or newer".format(version_text(first)) if last is None else "{0} to {1}".format(version_text(first), version_text(last)),
            )
        return [
            finding(
                "crictl_skew",
                "error",
                subject,
                "crictl {0} is not compatible with Kubernetes {1}: {2}".format(version_text(view.crictl), version_text(kubernetes), why),
                fix,
                "crictl",
            )
        ]

    def _dra(self, view: NodeView) -> list[dict[str, str]]:
        """DRA_MINIMUMS rows that apply to the declared workflow, against the declared Kubernetes and driver."""
        if view.dra is None:
            return []
        wanted = {"gpus"} | ({"compute_domains"} if view.dra_compute_domains else set()) | ({"operator"} if view.dra == "operator" else set())
        found: list[dict[str, str]] = []
        for row in _kubernetes.DRA_MINIMUMS:
            if row["for"] not in wanted:
                continue
            if row["component"] == "kubernetes":
                found.extend(self._dra_kubernetes(view, row))
            elif view.driver is not None:
                found.extend(self._dra_driver(view.driver, row))
        return found

    @staticmethod
    def _dra_kubernetes(view: NodeView, row: dict[str, t.Any]) -> list[dict[str, str]]:
        minimum = parse_version(row["minimum"])
        release = view.kubernetes_release
        if release is None:
            return [
                finding(
                    "dra",
                    "warning",
                    "kubernetes",
                    "DRA needs Kubernetes {0} or later, and no Kubernetes version is declared to check".format(row["minimum"]),
                    'declare the cluster\'s release in crictl_kubernetes_version (e.g. "1.34.2")',
                    "crictl",
                    row["source"],
                )
            ]
        shown = version_text(release)
        if release[: len(minimum)] >= minimum:
            return []
        gates = parse_version(row["gates"]) if row["gates"] else None
        fix = "upgrade the cluster to Kubernetes {0} or later".format(row["minimum"])
        if len(release) < len(minimum) and release == minimum[: len(release)]:
            return [
                finding(
                    "dra",
                    "warning",
                    "kubernetes",
                    "Kubernetes {0}: DRA needs {1} or later ({2}); the patch level is not declared".format(shown, row["minimum"], row["what"]),
                    'declare the full release in crictl_kubernetes_version (e.g. "{0}") or {1}'.format(row["minimum"], fix),
                    "crictl",
                    row["source"],
                )
            ]
        # Gates rescue the release lines below the minimum's (1.32, 1.33), not 1.34.0/1.34.1.
        if gates is not None and gates <= release[:2] < minimum[:2]:
            return [
                finding(
                    "dra",
                    "warning",
                    "kubernetes",
                    "Kubernetes {0} is below {1}: DRA works only with feature gates set by hand ({2})".format(shown, row["minimum"], row["what"]),
                    "{0}, or enable the DynamicResourceAllocation feature gate and the resource.k8s.io beta APIs on every component".format(fix),
                    "crictl",
                    row["source"],
                )
            ]
        return [
            finding(
                "dra",
                "error",
                "kubernetes",
                "Kubernetes {0} is below {1}, the minimum of {2}".format(shown, row["minimum"], row["what"]),
                fix,
                "crictl",
                row["source"],
            )
        ]

    @staticmethod
    def _dra_driver(driver: Driver, row: dict[str, t.Any]) -> list[dict[str, str]]:
        meets = driver.at_least(row["minimum"])
        if meets is True:
            return []
        fix = "pin driver_version to {0} or later (or driver_branch to a newer branch)".format(row["minimum"])
        if meets is None:
            return [
                finding(
                    "dra",
                    "warning",
                    "driver {0}".format(driver),
                    "driver branch {0} may be below {1}, the minimum {2}: the branch alone does not say which release".format(
                        driver, row["minimum"], row["what"]
                    ),
                    fix,
                    "driver",
                    row["source"],
                )
            ]
        return [
            finding(
                "dra",
                "error",
                "driver {0}".format(driver),
                "driver {0} is below {1}, the minimum {2}".format(driver, row["minimum"], row["what"]),
                fix,
                "driver",
                row["source"],
            )
        ]

    def _fabricmanager(self, view: NodeView) -> list[dict[str, str]]:
        if view.fabricmanager is None or view.driver is None or not view.driver.pinned:
            return []
        if view.fabricmanager == view.driver.version:
            return []
        return [
            finding(
                "fabricmanager",
                "error",
                "fabricmanager",
                "Fabric Manager {0} differs from driver {1}: Fabric Manager only starts at exactly the driver's version".format(
                    version_text(view.fabricmanager), view.driver
                ),
                "install Fabric Manager {0} (the driver role pins both together)".format(view.driver),
                "driver",
            )
        ]


def driver_branch_int(driver: Driver) -> int:
    return int(driver.branch)
