# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The base of the action plugins that judge with the version matrix on the controller (version_matrix,
preflight_gate): what they share, kept once.

They only compute from their options, so they open no connection (a host is judged without being contacted,
whatever its ansible_connection, and neither delegate_to nor the host's Python is needed) and run in check mode
as in a normal run. Importing this module parses the built-in matrix tables: the strategy loads the action
plugins in the controller's process before it forks its workers, so every worker inherits parsed tables.
"""

from __future__ import annotations

import typing as t

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.judge import prime_builtin_matrix

prime_builtin_matrix()


class MatrixAction(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def validated_params(self, spec: dict[str, dict[str, t.Any]]) -> dict[str, t.Any]:
        """The task's options checked against `spec` as AnsibleModule checks them (unknown options, types and
        choices fail here naming the field, also in check mode); only the validated options, with their defaults."""
        return dict(self.validate_argument_spec(argument_spec=spec)[0].validated_parameters)
