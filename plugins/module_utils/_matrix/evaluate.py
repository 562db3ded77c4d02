# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Matrix: every rule over one node, and the findings ordered most severe first.

Shared by the version_matrix and preflight_gate action plugins, the
controller-side filters and plugin_utils. Users extend the tables without
editing the collection: ``Matrix(tables=...)`` merges extra rows (CUDA
releases, driver branches, GPU models), and ``custom_rules`` adds declarative
rules (see _matrix/custom.py).
"""

from __future__ import annotations

import typing as t

from .images import ImageJudge
from .node import NodeView
from .rules_cuda import CudaRules
from .rules_driver import DriverRules
from .rules_stack import StackRules
from .tables import SEVERITIES
from .view import ViewBuilder


class Matrix(ViewBuilder, CudaRules, DriverRules, StackRules, ImageJudge):
    """The tables (built in, plus user rows) and the rules over them."""

    def evaluate(self, *view_args: t.Any, **view_kwargs: t.Any) -> tuple[NodeView, list[dict[str, str]]]:
        """All findings for one node, most severe first.

        The arguments are view()'s (desired, installed, cuda_versions, target,
        cuda_compat): the rules judge the view it builds.
        """
        view, found = self.view(*view_args, **view_kwargs)
        for rule in (
            self._cuda_driver,
            self._branch_lifecycle,
            self._driver_security,
            self._architecture_branch,
            self._kernel_module,
            self._mig,
            self._container_toolkit,
            self._toolkit_cves,
            self._dcgm_cves,
            self._device_plugin_cves,
            self._cdi_spec_version,
            self._engine_cdi,
            self._engine_lifecycle,
            self._device_plugin_runtime,
            self._device_plugin_cdi_cri,
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
