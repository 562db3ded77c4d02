# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Rules: CUDA against the driver (minimum driver, minor version compatibility,
forward compatibility through cuda-compat).
"""

from __future__ import annotations

from .data import MatrixData
from .node import NodeView, finding
from .tables import CUDA_MVC_FIRST_MINOR, CUDA_MVC_FLOORS, CUDA_STATUS
from .versions import driver_branch, parse_version, version_text


class CudaRules(MatrixData):
    """The rules between CUDA and the driver."""

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
