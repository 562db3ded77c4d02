# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Versions as the matrix compares them: parsing and printing versions, driver
branches, CUDA release labels, kernel-module flavours by architecture, and
Driver (a declared or installed driver, pinned or by branch).
"""

from __future__ import annotations

import calendar
import datetime
import re
import typing as t

from .tables import CUDA_BUILD_NUMBERED_FROM, KERNEL_MODULE_FLAVOURS, OPEN_MODULES_FIRST_BRANCH, OPEN_MODULES_VGPU_FIRST_BRANCH, MatrixError

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


def flavours_for(architecture: str, grace: bool = False, vgpu_guest: bool = False) -> tuple[str, ...]:
    """The kernel-module flavours a GPU runs, preferred first; () for an unknown architecture.

    A Grace row of KERNEL_MODULE_FLAVOURS wins over its architecture's plain
    row for a GPU on a Grace superchip, a vGPU row for a vGPU of a vGPU guest.
    """
    for row in KERNEL_MODULE_FLAVOURS:
        if row["architecture"] == architecture and (grace or not row.get("grace")) and (vgpu_guest or not row.get("vgpu")):
            return tuple(row["flavours"])
    return ()


def open_modules_first_branch(vgpu_guest: bool = False) -> int:
    """The first driver branch whose open modules serve the node: R515, or R550 in a vGPU guest."""
    return int(OPEN_MODULES_VGPU_FIRST_BRANCH if vgpu_guest else OPEN_MODULES_FIRST_BRANCH)


class FlavourChoice(t.NamedTuple):
    """The kernel-module flavour rule's answer for one node's GPUs.

    flavour: "open" or "proprietary"; None when none serves them (problem says why).
    problem: None; "open_too_old" (open is needed or asked for, but the branch
    predates the open modules); "refused" (the requested flavour cannot drive
    some GPUs); "mixed" (the GPUs need different flavours); "unknown" (auto,
    but some GPU's architecture is unknown); "no_gpus" (auto with no GPU).
    concerned: the positions, in the list given, of the GPUs the problem is about.
    """

    flavour: str | None
    problem: str | None = None
    concerned: tuple[int, ...] = ()


KERNEL_MODULE_REQUESTS = ("auto", "open", "proprietary")


def kernel_module_flavour(flavours: t.Sequence[t.Sequence[str]], requested: str = "auto", branch: int | None = None, vgpu_guest: bool = False) -> FlavourChoice:
    """The one kernel-module flavour rule: the driver role, preflight and verify all ask it.

    flavours: each GPU's flavours_for(), () where its architecture is unknown;
    requested: driver_kernel_module; branch: the driver branch, None when not
    known (no branch rule applies then); vgpu_guest: the node is a vGPU guest
    (flavours then come from flavours_for(..., vgpu_guest=True), and the open
    modules serve vGPUs from a later branch). The facts and their sources are
    _knowledge.drivers' KERNEL_MODULE_FLAVOURS, OPEN_MODULES_FIRST_BRANCH and
    OPEN_MODULES_VGPU_FIRST_BRANCH.
    auto takes the open modules wherever every GPU runs them and the branch
    ships them, else the proprietary ones: NVIDIA's choice from R560 on
    (OPEN_MODULES_DEFAULT_BRANCH), and the collection's from R515 on, where
    NVIDIA calls them production-ready for data-center GPUs.
    """
    if requested not in KERNEL_MODULE_REQUESTS:
        raise MatrixError("unknown kernel module flavour {0!r} (known: {1})".format(requested, ", ".join(KERNEL_MODULE_REQUESTS)))
    open_shipped = branch is None or branch >= open_modules_first_branch(vgpu_guest)
    if requested == "open" and not open_shipped:
        return FlavourChoice(None, "open_too_old")
    known = [i for i, offered in enumerate(flavours) if offered]
    if requested != "auto":
        refused = tuple(i for i in known if requested not in flavours[i])
        return FlavourChoice(None, "refused", refused) if refused else FlavourChoice(requested)
    if not flavours:
        return FlavourChoice(None, "no_gpus")
    unknown = tuple(i for i, offered in enumerate(flavours) if not offered)
    if unknown:
        return FlavourChoice(None, "unknown", unknown)
    common = [flavour for flavour in ("open", "proprietary") if all(flavour in flavours[i] for i in known)]
    if not common:
        return FlavourChoice(None, "mixed", tuple(known))
    if common[0] == "open" and not open_shipped:
        if "proprietary" in common:
            return FlavourChoice("proprietary")
        return FlavourChoice(None, "open_too_old", tuple(known))
    return FlavourChoice(common[0])


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


def driver_branch_int(driver: Driver) -> int:
    return int(driver.branch)
