# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""apt's sources, as apt reads them: which repository (URI and suite) each
enabled entry names, and with which Signed-By.

apt refuses the whole source list when two entries name one repository with
different Signed-By values ("Conflicting values set for option Signed-By
regarding source ..."), and then every apt call on the node fails. A writer of
a sources file asks here first. Both formats: one-line (.list, with
[signed-by=...] options) and deb822 (.sources, where Signed-By is a path or
an inline key). Standard library only.
"""

from __future__ import annotations

import os
import platform
import re
import typing as t

# deb [options] URI suite [component...]
_ONE_LINE = re.compile(r"^deb(?:-src)?\s*(?:\[([^\]]*)\])?\s*(\S+)\s+(\S+)")


class Entry(t.NamedTuple):
    path: str  # the file that holds it
    uri: str  # without trailing slashes, as apt compares them
    suite: str
    signed_by: str  # "" where the entry names no key: the node's trusted keys


# dpkg's architecture names for the kernel's machine names; apt expands $(ARCH) in a URI to the first.
_DPKG_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el", "s390x": "s390x", "i686": "i386"}


def dpkg_architecture(machine: str | None = None) -> str:
    """The node's dpkg architecture, from the kernel's machine name (no subprocess)."""
    machine = machine or platform.machine()
    return _DPKG_ARCH.get(machine, machine)


def _uri(uri: str, arch: str) -> str:
    """A URI as apt compares it: $(ARCH) expanded (NVIDIA's install guide writes it), trailing slashes dropped."""
    return uri.replace("$(ARCH)", arch).rstrip("/")


def _one_line(path: str, text: str, arch: str) -> list[Entry]:
    entries = []
    for line in text.splitlines():
        match = _ONE_LINE.match(line.split("#", 1)[0].strip())
        if not match:
            continue
        signed_by = ""
        for option in (match.group(1) or "").split():
            name, equals, value = option.partition("=")
            if name == "signed-by" and equals:
                signed_by = value
        entries.append(Entry(path, _uri(match.group(2), arch), match.group(3).replace("$(ARCH)", arch), signed_by))
    return entries


def _deb822(path: str, text: str, arch: str) -> list[Entry]:
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        name = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and name:
                fields[name] += "\n" + line.strip()
                continue
            name, value = (line.split(":", 1) + [""])[:2]
            name = name.strip().lower()
            fields[name] = value.strip()
        if not fields.get("uris") or fields.get("enabled", "yes").lower() == "no":
            continue
        signed_by = fields.get("signed-by", "")
        if "\n" in signed_by or "BEGIN PGP" in signed_by:
            signed_by = "(an inline key)"
        for uri in fields["uris"].split():
            for suite in fields.get("suites", "").split():
                entries.append(Entry(path, _uri(uri, arch), suite.replace("$(ARCH)", arch), signed_by))
    return entries


def parse(path: str, text: str, arch: str | None = None) -> list[Entry]:
    """The enabled entries of one sources file (.sources: deb822, else one-line); arch: $(ARCH)'s value."""
    arch = arch or dpkg_architecture()
    return _deb822(path, text, arch) if path.endswith(".sources") else _one_line(path, text, arch)


def node_entries(sources_dir: str, main_list: str = "/etc/apt/sources.list", arch: str | None = None) -> list[Entry]:
    """Every enabled entry of the node's sources: the main list and the directory's .list and .sources files."""
    paths = [main_list] if os.path.isfile(main_list) else []
    if os.path.isdir(sources_dir):
        paths += [os.path.join(sources_dir, name) for name in sorted(os.listdir(sources_dir)) if name.endswith((".list", ".sources"))]
    entries = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                entries += parse(path, handle.read(), arch)
        except OSError:
            continue
    return entries


def conflicts(ours: t.Iterable[Entry], others: t.Iterable[Entry]) -> list[tuple[Entry, Entry]]:
    """(ours, theirs) for each repository both name with different Signed-By, where theirs is in another file."""
    found = []
    mine = list(ours)
    for other in others:
        for entry in mine:
            if other.path != entry.path and (other.uri, other.suite) == (entry.uri, entry.suite) and other.signed_by != entry.signed_by:
                found.append((entry, other))
    return found
