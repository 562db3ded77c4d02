# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Placement: fitting GPU instances into a GPU's non-overlapping placements.

The capacity checks that rule a layout out before any placement is tried, and
the search that keeps what exists and puts new instances where NVML's own
automatic placement would put them.
"""

from __future__ import annotations

import itertools
import typing as t
from collections import Counter
from dataclasses import dataclass

from .state import GpuInstanceState, GpuState, Profile


@dataclass(frozen=True)
class InstanceSpec:
    """One GPU instance to have: its profile and its compute instances (slice counts)."""

    profile: Profile
    compute: tuple[int, ...]  # largest first; (profile.slices,) = one full compute instance

    def device_names(self) -> list[str]:
        return [device_name(self.profile, c) for c in self.compute]


def device_name(profile: Profile, compute_slices: int) -> str:
    """A MIG device the way mig-parted and nvidia-smi name it: 3g.20gb, or 1c.3g.20gb."""
    return profile.name if compute_slices == profile.slices else "{0}c.{1}".format(compute_slices, profile.name)


def _capacity_problems(gpu: GpuState, wanted: t.Sequence[InstanceSpec]) -> list[str]:
    """What rules a layout out before any placement is tried."""
    by_profile = Counter(spec.profile for spec in wanted)
    ordered = sorted(by_profile.items(), key=lambda pc: (-pc[0].slices, -pc[0].size, pc[0].id))
    problems = []
    for profile, count in ordered:
        if count > profile.instances:
            problems.append("{0} x {1} asked for, but at most {2} fit on this GPU".format(count, profile.name, profile.instances))
        if not profile.placements:
            problems.append("{0} has no possible placement on this GPU".format(profile.name))
    breakdown = " + ".join("{0} x {1}".format(c, p.name) for p, c in ordered)
    compute = sum(spec.profile.slices for spec in wanted)
    if compute > gpu.compute_slices:
        problems.append("{0} need {1} compute slices, the GPU has {2}".format(breakdown, compute, gpu.compute_slices))
    memory = sum(spec.profile.size for spec in wanted)
    if memory > gpu.memory_slices:
        problems.append("{0} need {1} memory slices, the GPU has {2}".format(breakdown, memory, gpu.memory_slices))
    return problems


def _overlaps(spans: t.Iterable[tuple[int, int]], start: int, size: int) -> bool:
    return any(start < s + z and s < start + size for s, z in spans)


def _free_starts(profile: Profile, used: t.Sequence[tuple[int, int]]) -> list[int]:
    """Starts of the profile's placements still free, highest first."""
    return [s for s, z in sorted(profile.placements, reverse=True) if not _overlaps(used, s, z)]


def _combinations(profile: Profile, used: t.Sequence[tuple[int, int]], count: int) -> t.Iterator[tuple[int, ...]]:
    """Sets of `count` mutually free starts for `profile`, highest starts first."""
    for starts in itertools.combinations(_free_starts(profile, used), count):
        spans: list[tuple[int, int]] = []
        for start in starts:
            if _overlaps(spans, start, profile.size):
                break
            spans.append((start, profile.size))
        else:
            yield starts


Layout = t.List[t.Tuple[Profile, t.Tuple[int, ...]]]


class _LayoutSearch:
    """Fit GPU instances into non-overlapping placements, keeping what exists.

    Instances of one profile are interchangeable, so the search picks a
    *combination* of placements per profile: largest profiles first, highest
    start first -- where NVML's own automatic placement would put them. Of all
    layouts that fit, it keeps the first that retains the most existing GPU
    instances that processes are using (so running work is not disturbed when
    the layout allows it), then the most existing instances, then the most
    with the right compute instances: the smallest change. Deterministic: the
    same input always gives the same layout.
    """

    def __init__(self, gpu: GpuState, wanted: t.Sequence[InstanceSpec]) -> None:
        groups: dict[Profile, list[InstanceSpec]] = {}
        for spec in wanted:
            groups.setdefault(spec.profile, []).append(spec)
        self.groups = sorted(groups.items(), key=lambda g: (-g[0].size, -g[0].slices, g[0].id))
        self.existing = {(gi.profile_id, gi.start): gi for gi in gpu.gpu_instances}
        self.busy = {p.gpu_instance_id for p in gpu.processes if p.gpu_instance_id is not None}
        self.best: Layout | None = None
        self.best_score = (-1, -1, -1)
        self.ceiling = self._ceiling(gpu)

    def _ceiling(self, gpu: GpuState) -> tuple[int, int, int]:
        """A score no layout can beat; reaching it ends the search early."""
        busy = kept = exact = 0
        for profile, specs in self.groups:
            existing = [gi for gi in gpu.gpu_instances if gi.profile_id == profile.id]
            wanted = Counter(spec.compute for spec in specs)
            have = Counter(gi.compute for gi in existing)
            have_busy = Counter(gi.compute for gi in existing if gi.id in self.busy)
            kept += min(len(existing), len(specs))
            exact += sum(min(have[c], n) for c, n in wanted.items())
            busy += sum(min(have_busy[c], n) for c, n in wanted.items())
        return busy, kept, exact

    def kept(self, profile: Profile, starts: t.Sequence[int]) -> list[GpuInstanceState]:
        return [self.existing[(profile.id, s)] for s in starts if (profile.id, s) in self.existing]

    def _score(self, layout: Layout) -> tuple[int, int, int]:
        busy = kept = exact = 0
        for profile, starts in layout:
            remaining = [spec.compute for spec in dict(self.groups)[profile]]
            # Busy instances take a matching compute layout first.
            here = sorted(self.kept(profile, starts), key=lambda gi: gi.id not in self.busy)
            kept += len(here)
            for gi in here:
                if gi.compute in remaining:
                    remaining.remove(gi.compute)
                    exact += 1
                    busy += gi.id in self.busy
        return busy, kept, exact

    def run(self) -> Layout | None:
        self._walk(0, [], [])
        return self.best

    def _walk(self, depth: int, layout: Layout, used: list[tuple[int, int]]) -> bool:
        """Depth-first over the profile groups; True once no better layout can exist."""
        if depth == len(self.groups):
            score = self._score(layout)
            if score > self.best_score:
                self.best, self.best_score = list(layout), score
            return self.best_score >= self.ceiling
        profile, specs = self.groups[depth]
        for starts in _combinations(profile, used, len(specs)):
            spans = used + [(s, profile.size) for s in starts]
            if self._walk(depth + 1, layout + [(profile, starts)], spans):
                return True
        return False

    def most_that_fit(self) -> list[tuple[Profile, int]]:
        """The largest subset of the wanted instances that fits at once (for explanations)."""
        best: list[tuple[Profile, int]] = []

        def walk(depth: int, placed: list[tuple[Profile, int]], used: list[tuple[int, int]]) -> None:
            nonlocal best
            if len(placed) + sum(len(specs) for _p, specs in self.groups[depth:]) <= len(best):
                return
            if depth == len(self.groups):
                best = list(placed)
                return
            profile, specs = self.groups[depth]
            for count in range(len(specs), -1, -1):
                for starts in _combinations(profile, used, count):
                    walk(depth + 1, placed + [(profile, s) for s in starts], used + [(s, profile.size) for s in starts])

        walk(0, [], [])
        return best


def _no_fit_message(wanted: t.Sequence[InstanceSpec], search: _LayoutSearch) -> str:
    fitted = search.most_that_fit()
    left = Counter(spec.profile for spec in wanted) - Counter(p for p, _s in fitted)
    together = ", ".join("{0} at {1}".format(p.name, s) for p, s in sorted(fitted, key=lambda ps: (ps[1], ps[0].id)))
    missing = ", ".join("{0} x {1} (placements {2})".format(c, p.name, p.starts_text()) for p, c in sorted(left.items(), key=lambda pc: pc[0].id))
    return "the instances cannot be placed without overlapping: at most {0} of {1} fit together ({2}), leaving no free placement for {3}".format(
        len(fitted), len(wanted), together or "none", missing
    )
