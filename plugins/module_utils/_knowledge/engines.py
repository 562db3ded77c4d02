# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Container engines: CDI support by version, the CDI specification versions
they read, and their end of life."""

from __future__ import annotations

_CDI = "cncf-tags/container-device-interface@05ae4b5b:README.md"
_CTK_NOTES = "NVIDIA/cloud-native-docs@52dcb7b8:container-toolkit/release-notes.md (1.19.1 known issue)"
_CONTAINERD_RELEASES = "containerd/containerd@301026e5:RELEASES.md"

# CDI support from `first` on: "none", "opt_in" (a setting enables it),
# "default" (on unless disabled), "unverified" (CRI-O's first release with CDI
# is not known; only warns). containerd 1.6 silently drops `enable_cdi` (seen
# in `containerd config dump` of Debian 12's 1.6.20).
ENGINE_CDI = (
    {"engine": "containerd", "first": "0", "support": "none", "source": _CDI, "checked": "2026-11-25"},
    {"engine": "containerd", "first": "1.7.0", "support": "opt_in", "source": _CDI + " ; containerd/containerd#9666", "checked": "2026-11-25"},
    {
        "engine": "containerd",
        "first": "2.0.0",
        "support": "default",
        "source": "containerd/containerd#9621 ; containerd/containerd#10926",
        "checked": "2026-11-25",
    },
    {"engine": "docker", "first": "0", "support": "none", "source": _CDI, "checked": "2026-11-25"},
    {"engine": "docker", "first": "25.0.0", "support": "opt_in", "source": "cncf-tags/container-device-interface#84", "checked": "2026-11-25"},
    {
        "engine": "docker",
        "first": "28.2.0",
        "support": "default",
        "source": "cncf-tags/container-device-interface#277 ; moby/moby#49963",
        "checked": "2026-11-25",
    },
    {"engine": "crio", "first": "0", "support": "unverified", "source": _CDI + " ; cri-o/cri-o#5571", "checked": "2026-11-25"},
    {"engine": "crio", "first": "1.24.0", "support": "default", "source": _CDI + " ; cri-o/cri-o#5571", "checked": "2026-11-25"},
)

# The first engine release that reads a CDI specification of `spec` (the
# toolkit's 1.19.1 known issue names the engine commits).
CDI_SPEC_MIN_ENGINE = (
    {"spec": "0.7.0", "engine": "containerd", "first": "1.7.16", "source": _CTK_NOTES, "checked": "2026-11-25"},
    {"spec": "0.7.0", "engine": "docker", "first": "26.1.0", "source": _CTK_NOTES, "checked": "2026-11-25"},
    {"spec": "0.7.0", "engine": "crio", "first": "1.30.0", "source": _CTK_NOTES, "checked": "2026-11-25"},
    {"spec": "0.7.0", "engine": "podman", "first": "5.1.0", "source": _CTK_NOTES, "checked": "2026-11-25"},
)

# End of life of an engine's release lines: `eol` ends committer support
# ("YYYY-MM-DD"); `extended` (where given) is a narrower extended support
# that follows ("YYYY-MM": to the end of that month). Dates marked tentative
# upstream are left out.
ENGINE_EOL = (
    {"engine": "containerd", "minor": "1.6", "eol": "2025-08-23", "extended": None, "source": _CONTAINERD_RELEASES, "checked": "2026-11-25"},
    {
        "engine": "containerd",
        "minor": "1.7",
        "eol": "2026-03-10",
        "extended": "2026-09",
        "note": "extended support focused on Kubernetes 1.30-1.32 on GKE",
        "source": _CONTAINERD_RELEASES,
        "checked": "2026-11-25",
    },
    {
        "engine": "containerd",
        "minor": "2.0",
        "eol": "2025-11-07",
        "extended": "2027-03",
        "note": "extended support focused on Kubernetes 1.33 on GKE",
        "source": _CONTAINERD_RELEASES,
        "checked": "2026-11-25",
    },
    {"engine": "containerd", "minor": "2.1", "eol": "2026-07-03", "extended": None, "source": _CONTAINERD_RELEASES, "checked": "2026-11-25"},
    {"engine": "containerd", "minor": "2.2", "eol": "2026-11-06", "extended": None, "source": _CONTAINERD_RELEASES, "checked": "2026-11-25"},
    {"engine": "containerd", "minor": "2.3", "eol": "2028-04-30", "extended": None, "source": _CONTAINERD_RELEASES + " (LTS)", "checked": "2026-11-25"},
)
