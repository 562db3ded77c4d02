# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The recorded real-GPU readings' tests share the check script (loaded from tests/device) and a reader."""

from __future__ import annotations

import importlib.util
import json
import os
import typing as t

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="session")
def check() -> t.Any:
    """tests/device/nvml_real_check.py as a module."""
    spec = importlib.util.spec_from_file_location("nvml_real_check", os.path.join(ROOT, "tests/device/nvml_real_check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def load_reading(name: str) -> dict[str, t.Any]:
    with open(os.path.join(ROOT, "tests", "device", name), encoding="utf-8") as f:
        return json.load(f)
