# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Fixtures shared by the plugin unit tests: the simulated NVML library."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import session as nvml_session
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import nvml_sim


@pytest.fixture(scope="session")
def sim_library() -> Path:
    """Path of the freshly built simulated libnvidia-ml.so.1."""
    return nvml_sim.build()


@pytest.fixture
def sim_node(sim_library: Path, tmp_path: Path) -> t.Callable[..., nvml_sim.SimNode]:
    """Factory: sim_node("dgx-a100-mig-mixed") renders that fixture into tmp_path."""
    counter = [0]

    def make(fixture: str | Path, booted: bool = True) -> nvml_sim.SimNode:
        counter[0] += 1
        return nvml_sim.SimNode(tmp_path / "node{0}".format(counter[0]), fixture, booted=booted)

    return make


@pytest.fixture
def open_session(sim_library: Path, monkeypatch: pytest.MonkeyPatch) -> t.Callable[..., nvml_session.NvmlSession]:
    """open_session(node, **env): an un-initialized session on `node`'s state, in this process."""
    monkeypatch.delenv("NVML_SIM_EUID", raising=False)

    def make(node: nvml_sim.SimNode, **env: str) -> nvml_session.NvmlSession:
        for key, value in dict(node.env, **env).items():
            monkeypatch.setenv(key, value)
        return nvml_session.NvmlSession(str(sim_library))

    return make
