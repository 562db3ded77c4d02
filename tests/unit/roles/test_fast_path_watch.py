# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fast path watches every place the roles write: a path a role names must lie under a watched path.

A file a role manages but the fingerprint does not read would let a no-op run
skip its repair. Each path the roles' vars, defaults and tasks name literally
is either under a path the layer registry watches (plugins/plugin_utils/_layers.yml) or exempt here, with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _layers

ROOT = Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"
WATCHED = _layers.watch_paths()

# Absolute paths, up to a quote, space, comma, bracket or template.
PATH = re.compile(r"(?<![\w.{-])(/(?:etc|usr|var|run|opt|lib)/[\w.@/+-]*[\w+-])")

EXEMPT = {
    # Outputs, not configuration: reports, the upgrade's state and the fingerprint itself.
    "/var/lib/gpufleet": "reports and records the roles write for people and for the next run",
    "/var/lib/prometheus/node-exporter": "verify's health metrics for node-exporter: an output, rewritten by each verify that finds the health changed",
    # Files that packages own: their versions are in the fingerprint.
    "/usr/bin": "package files the roles run or probe (nvidia-ctk, nvidia-container-runtime, the engines)",
    "/usr/sbin/slurmd": "Slurm's own program, run (not written) by the Slurm health guard to learn slurmd's GPU order",
    "/usr/lib/systemd/system/nvidia-cdi-refresh.service": "package file; the roles' drop-in is under /etc/systemd/system",
    "/lib/systemd/system/nvidia-cdi-refresh.service": "the same package file, by its other path",
    "/lib/modules": "read by the CDI refresh unit (new kernel modules); only the kernel roll, not a layer of site.yml, removes "
    "what DKMS left of a kernel it removed",
    "/usr/share/keyrings": "distribution keyrings, package files (debian-archive-keyring, ubuntu-keyring)",
    # Sockets the runtimes serve; the units' states are in the fingerprint.
    "/run/containerd/containerd.sock": "socket",
    "/var/run/crio/crio.sock": "socket",
    "/var/run/cri-dockerd.sock": "socket",
    "/run/lock/gpufleet.lock": "the node lock the boot units hold while they work (flock): no content, never configuration",
    "/var/lib/kubelet/pod-resources/kubelet.sock": "socket (the kubelet's, which dcgm-exporter reads)",
    # Data other tools fill at run time.
    "/run/dcgm-job-map": "per-job data: slurm_gres's Prolog/Epilog (slurm_gres_job_map_dir) rewrites it each job",
    # Secure Boot signing keys: made once, and the module they sign is in the fingerprint (loaded version).
    "/var/lib/dkms": "DKMS signing key, made once",
    "/var/lib/shim-signed/mok": "MOK signing key, made once",
    # Named to a person, never written: the kernel roll's message when a node boots another kernel than it staged.
    "/etc/default/grub": "named in the kernel roll's message (a boot loader pinned to another kernel), not written",
    # A directory whose one managed file is watched by its own path.
    "/usr/local/bin": "crictl's directory; /usr/local/bin/crictl is watched",
}


def under(path: str, roots: list[str] | dict[str, str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def named_paths() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for role in sorted(ROLES.iterdir()):
        if role.name in ("fast_path", "upgrade"):  # upgrade.yml is not site.yml's; fast_path is the watcher
            continue
        for source in sorted(role.glob("*/**/*.yml")) + sorted(role.glob("templates/**/*")):
            if not source.is_file() or "meta" in source.parts:
                continue
            for line in source.read_text(encoding="utf-8").splitlines():
                if line.lstrip().startswith("#"):
                    continue
                for match in PATH.findall(line):
                    found.setdefault(match, set()).add(str(source.relative_to(ROOT)))
    return found


def test_every_path_the_roles_name_is_watched_or_exempt() -> None:
    unwatched = {path: sorted(sources) for path, sources in named_paths().items() if not under(path, WATCHED) and not under(path, EXEMPT)}
    assert not unwatched, "add these to a layer's watches in plugins/plugin_utils/_layers.yml, or exempt them with a reason: {0}".format(unwatched)


def test_the_scan_sees_the_files_the_roles_write() -> None:
    paths = named_paths()
    for expected in (
        "/etc/containerd/config.toml",
        "/etc/apt/preferences.d/gpufleet-nvidia-driver",
        "/usr/local/sbin/gpufleet-mig",
        "/etc/gpufleet/verify/boot.json",
    ):
        assert expected in paths, expected


def test_exemptions_are_still_needed() -> None:
    paths = named_paths()
    stale = [root for root in EXEMPT if not any(under(path, [root]) for path in paths)]
    assert not stale, "no role names these any more; drop them from EXEMPT: {0}".format(stale)


def test_every_layer_tag_is_known_to_the_record_rule() -> None:
    """A run that skips part of a layer must not record; the rule knows a layer's tags by their prefix."""
    layers = _layers.tags()
    plays = [
        play
        for name in ("site.yml", "facts.yml")  # site.yml imports facts.yml
        for play in yaml.safe_load((ROOT / "playbooks" / name).read_text(encoding="utf-8"))
    ]
    site_tags = {tag for play in plays for tag in play.get("tags", [])} - {"always", "fast_path"}
    assert site_tags == set(layers)
    tags = set()
    for source in ROLES.glob("*/tasks/**/*.yml"):
        if source.parts[-3] in ("upgrade",) or "fast_path" in source.parts:
            continue
        for found in re.findall(r"tags: \[([^]]*)\]", source.read_text(encoding="utf-8")):
            tags.update(tag.strip() for tag in found.split(","))
    unknown = sorted(tag for tag in tags if tag != "always" and not any(tag == layer or tag.startswith(layer + "_") for layer in layers))
    assert not unknown, "tags without a layer's prefix: {0}".format(unknown)
