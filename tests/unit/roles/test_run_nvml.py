# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The run's NVML read (gpufleet_run_nvml): read once, shared by the layers, dropped before what changes it.

Read from the roles' own task files, as Ansible loads them: every nvml_info task either reads only when no read
holds and publishes what it read, or is one of the reads that must stay the caller's own; and the changes that alter
what NVML reports (the driver's packages and services, a MIG layout) drop the read before they run. The Molecule
scenarios check the same on live nodes (cdi: a shared read is used and a dropped one read again; driver and mig:
after the role the read is dropped or still what NVML reports).
"""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
NVML = "gpufleet.nvidia.nvml_info"
SET_FACT = "ansible.builtin.set_fact"
GUARD = "gpufleet_run_nvml | default(none) is none"

# Reads that must not come from the run's: verify judges the node after every layer (with MIG placements), the
# upgrade role plans and polls for idle GPUs, and the driver reads the node it rebooted (and publishes that read).
OWN_READS = {
    "roles/verify/tasks/declared.yml",
    "roles/upgrade/tasks/plan.yml",
    "roles/upgrade/tasks/wait.yml",
    "roles/driver/tasks/reboot-now.yml",
}
# Shares the run's read once its plan.yml takes the change given with this one; then this set is empty and the
# test below says so.
NOT_YET_SHARED: set[str] = set()


def tasks(items: t.Any) -> t.Iterator[dict[str, t.Any]]:
    """Every task of a task list, blocks (and their rescue and always) included, in order."""
    for item in items or []:
        yield item
        for key in ("block", "rescue", "always"):
            yield from tasks(item.get(key))


def load(path: Path) -> list[dict[str, t.Any]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    if data and "hosts" in data[0]:  # a playbook: its plays' tasks
        return [task for play in data for task in tasks(play.get("tasks"))]
    return list(tasks(data))


def conditions(task: dict[str, t.Any]) -> list[str]:
    when = task.get("when", [])
    return [when] if isinstance(when, str) else list(when)


def task_files() -> list[Path]:
    return sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(ROOT.glob("playbooks/*.yml"))


def nvml_reads() -> list[tuple[str, dict[str, t.Any], list[dict[str, t.Any]]]]:
    found = []
    for path in task_files():
        every = load(path)
        found += [(str(path.relative_to(ROOT)), task, every) for task in every if NVML in task]
    return found


def test_every_nvml_read_is_found() -> None:
    names = {name for name, _task, _every in nvml_reads()}
    assert OWN_READS | NOT_YET_SHARED <= names
    for role in ("preflight", "driver", "cdi", "slurm_gres", "dcgm"):
        assert any(name.startswith("roles/{0}/".format(role)) for name in names - OWN_READS), role
    assert "playbooks/facts.yml" in names


@pytest.mark.parametrize("name,task,every", [r for r in nvml_reads() if r[0] not in OWN_READS | NOT_YET_SHARED], ids=lambda v: v if isinstance(v, str) else "")
def test_a_layer_reads_only_when_no_read_holds_and_shares_what_it_read(name: str, task: dict[str, t.Any], every: list[dict[str, t.Any]]) -> None:
    # The run's read is the module's default one (health included, no MIG placements): every layer can use it.
    assert not task[NVML], (name, task[NVML])
    assert GUARD in conditions(task), (name, task.get("when"))
    registered = task["register"]
    published = [
        other[SET_FACT]["gpufleet_run_nvml"] for other in every[every.index(task) + 1 :] if SET_FACT in other and "gpufleet_run_nvml" in other[SET_FACT]
    ]
    assert published and registered + ".nvml" in published[0], (name, published)


def test_the_driver_shares_the_read_of_the_node_it_rebooted() -> None:
    every = load(ROOT / "roles/driver/tasks/reboot-now.yml")
    read = next(i for i, task in enumerate(every) if NVML in task)
    published = [i for i, task in enumerate(every) if SET_FACT in task and "gpufleet_run_nvml" in task[SET_FACT]]
    assert published and published[0] > read
    assert every[read]["register"] + ".nvml" in every[published[0]][SET_FACT]["gpufleet_run_nvml"]


def drops(every: list[dict[str, t.Any]]) -> list[int]:
    return [i for i, task in enumerate(every) if SET_FACT in task and "gpufleet_run_nvml" in task[SET_FACT] and task[SET_FACT]["gpufleet_run_nvml"] is None]


def first(every: list[dict[str, t.Any]], predicate: t.Callable[[dict[str, t.Any]], bool]) -> int:
    return next(i for i, task in enumerate(every) if predicate(task))


def test_the_driver_drops_the_read_before_its_packages_change() -> None:
    every = load(ROOT / "roles/driver/tasks/present.yml")
    packages = first(every, lambda task: "packages-{{ __driver_plan.backend }}.yml" in str(task.get("ansible.builtin.include_tasks")))
    (drop,) = drops(every)
    assert drop < packages
    # Whenever the selection installs, upgrades or removes a package of the driver.
    assert conditions(every[drop]) == ["__driver_selection.changing | length > 0 or __driver_selection.remove_other_flavour"]
    for backend in ("apt", "dnf"):
        install = load(ROOT / "roles/driver/tasks/packages-{0}.yml".format(backend))
        block = first(install, lambda task: "block" in task)
        assert conditions(install[block]) == ["__driver_selection.changing | length > 0"], backend

    every = load(ROOT / "roles/driver/tasks/absent.yml")
    remove = first(every, lambda task: task.get("ansible.builtin.package", {}).get("state") == "absent")
    (drop,) = drops(every)
    assert drop < remove and conditions(every[drop]) == conditions(every[remove])


def test_the_driver_drops_the_read_once_its_services_changed() -> None:
    every = load(ROOT / "roles/driver/tasks/configure.yml")
    services = first(every, lambda task: "ansible.builtin.systemd_service" in task)
    (drop,) = drops(every)
    assert drop > services and conditions(every[drop]) == ["{0} is changed".format(every[services]["register"])]


def test_mig_drops_the_read_before_it_applies_a_layout() -> None:
    every = load(ROOT / "roles/mig/tasks/apply.yml")
    apply = first(every, lambda task: "gpufleet.nvidia.mig_config" in task)
    (drop,) = drops(every)
    assert drop == 0 < apply and conditions(every[drop]) == []
    main = load(ROOT / "roles/mig/tasks/main.yml")
    assert [task for task in main if "apply.yml" in str(task.get("ansible.builtin.include_tasks"))]


def test_nothing_else_publishes_or_drops_the_read() -> None:
    writers = set()
    for path in task_files():
        if any(SET_FACT in task and "gpufleet_run_nvml" in task[SET_FACT] for task in load(path)):
            writers.add(str(path.relative_to(ROOT)))
    readers = {name for name, _task, _every in nvml_reads()} - OWN_READS - NOT_YET_SHARED
    assert writers == readers | {
        "roles/driver/tasks/present.yml",
        "roles/driver/tasks/absent.yml",
        "roles/driver/tasks/configure.yml",
        "roles/driver/tasks/reboot-now.yml",
        "roles/mig/tasks/apply.yml",
    }


def test_the_roles_still_to_share_the_read_read_on_their_own() -> None:
    """Once node_labels takes the shared read, move it out of NOT_YET_SHARED (the test above then checks it)."""
    for name in NOT_YET_SHARED:
        (task,) = [task for task in load(ROOT / name) if NVML in task]
        assert GUARD not in conditions(task), "{0} shares the read now: remove it from NOT_YET_SHARED".format(name)
