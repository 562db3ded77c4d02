# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Judging CUDA images: how a node runs an image that carries a given CUDA
(native, compat, unsupported, unknown), and why.
"""

from __future__ import annotations

import re
import typing as t

from .data import MatrixData
from .node import Gpu
from .tables import _DIGEST, ARCHITECTURE_LAST_CUDA, BRANCH_TYPES, FORWARD_COMPAT_FIRST_CUDA, FORWARD_COMPAT_SAME_BRANCH, MatrixError
from .versions import Driver, driver_branch, parse_version, version_text


class ImageJudge(MatrixData):
    """The verdict on CUDA images for one node's driver and GPUs."""

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
            if not re.fullmatch(r"^\d+\.\d+(\.\d+)?$", cuda):
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
