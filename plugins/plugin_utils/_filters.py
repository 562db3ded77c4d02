# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The base of the collection's filter plugins' FilterModule classes."""

from __future__ import annotations

import typing as t


class FilterTable:
    """A FilterModule whose filters are the functions in FILTERS, each under its own name (the name its
    documentation file beside the plugin carries), so that no name is written twice."""

    FILTERS: tuple[t.Callable[..., t.Any], ...] = ()

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {function.__name__: function for function in self.FILTERS}
