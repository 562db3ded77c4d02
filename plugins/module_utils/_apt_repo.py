# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""apt repository indexes as data: Packages and Release files, dpkg version
order, dependency relations, and the closure of a pinned package set.

Pure functions over text; fetching, signatures and files are the caller's
(plugins/modules/bundle_apt_repository.py). Standard library only.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import lzma
import posixpath
import re
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._version_order import dpkg_compare, dpkg_parse

# Compressed variants of an index, in the order they are preferred (apt's own
# preference; every repository we read offers at least one).
INDEX_VARIANTS = (".xz", ".gz", "")

_RELATION = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9+.\-]*)(?::[a-z0-9-]+)?\s*(?:\(\s*(<<|<=|=|>=|>>|<|>)\s*([^)\s]+)\s*\))?\s*$")


class IndexError_(ValueError):
    """An index that cannot be read as apt reads it (the caller names the file)."""


# --- deb822 -----------------------------------------------------------------


class Stanza:
    """One paragraph of a Packages file, kept verbatim for re-publishing."""

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self.fields = fields
        self._map = {name.lower(): value for name, value in fields}

    def get(self, name: str, default: str = "") -> str:
        return self._map.get(name.lower(), default)

    @property
    def package(self) -> str:
        return self.get("Package")

    @property
    def version(self) -> str:
        return self.get("Version")

    @property
    def filename(self) -> str:
        return self.get("Filename")

    @property
    def sha256(self) -> str:
        return self.get("SHA256")

    def text(self) -> str:
        return "".join("{0}:{1}\n".format(name, (" " + value) if value and not value.startswith("\n") else value) for name, value in self.fields)

    def __repr__(self) -> str:
        return "Stanza({0}={1})".format(self.package, self.version)


def parse_deb822(text: str) -> list[Stanza]:
    """Paragraphs of `Field: value` lines; continuation lines start with a space."""
    stanzas: list[Stanza] = []
    fields: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            if fields:
                stanzas.append(Stanza(fields))
                fields = []
            continue
        if line[0] in " \t":
            if not fields:
                raise IndexError_("line {0}: a continuation line before any field".format(number))
            name, value = fields[-1]
            fields[-1] = (name, value + "\n" + line)
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise IndexError_("line {0}: not a 'Field: value' line: {1!r}".format(number, line[:80]))
        fields.append((name.strip(), value.strip()))
    if fields:
        stanzas.append(Stanza(fields))
    return stanzas


def parse_release(text: str) -> dict[str, t.Any]:
    """The fields of a Release file, with its SHA256 list as {path: (sha256, size)}."""
    stanzas = parse_deb822(text)
    if not stanzas:
        raise IndexError_("an empty Release file")
    release: dict[str, t.Any] = {name: value for name, value in stanzas[0].fields if "\n" not in value}
    files: dict[str, tuple[str, int]] = {}
    for line in stanzas[0].get("SHA256").splitlines():
        parts = line.split()
        if len(parts) == 3:
            # Flat repositories list "./Packages" as often as "Packages".
            files[posixpath.normpath(parts[2])] = (parts[0].lower(), int(parts[1]))
    if not files:
        raise IndexError_("the Release file lists no SHA256 sums (apt needs them)")
    release["files"] = files
    return release


def decompress(name: str, data: bytes) -> str:
    if name.endswith(".xz"):
        data = lzma.decompress(data)
    elif name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8")


def pick_index(files: dict[str, tuple[str, int]], stem: str) -> tuple[str, str, int] | None:
    """The variant of `stem` (e.g. non-free/binary-amd64/Packages) to fetch: (path, sha256, size)."""
    for suffix in INDEX_VARIANTS:
        path = stem + suffix
        if path in files:
            digest, size = files[path]
            return path, digest, size
    return None


def safe_filename(filename: str) -> str:
    """A Filename field as a relative path inside the repository, or an error: an
    index must not make the bundle write outside its directory."""
    path = posixpath.normpath(filename)
    if not filename or path.startswith(("/", "../")) or path in ("..", ".") or "\\" in filename:
        raise IndexError_("Filename {0!r} leaves the repository".format(filename))
    return path


# --- dpkg versions ----------------------------------------------------------
# dpkg's own order lives in _version_order (diff-tested against libdpkg); an
# index whose version dpkg would refuse is an IndexError_ here.


def split_version(version: str) -> tuple[int, str, str]:
    try:
        return dpkg_parse(version)
    except ValueError as err:
        raise IndexError_(str(err)) from None


def compare_versions(a: str, b: str) -> int:
    """-1, 0, 1 as dpkg --compare-versions orders a and b."""
    try:
        return dpkg_compare(a, b)
    except ValueError as err:
        raise IndexError_(str(err)) from None


def upstream_version(version: str) -> str:
    return split_version(version)[1]


def satisfies(version: str, op: str | None, wanted: str | None) -> bool:
    if not op:
        return True
    cmp = compare_versions(version, wanted or "")
    return {"<<": cmp < 0, "<=": cmp <= 0, "<": cmp <= 0, "=": cmp == 0, ">=": cmp >= 0, ">": cmp >= 0, ">>": cmp > 0}[op]


# --- relations --------------------------------------------------------------

Relation = t.Tuple[str, t.Optional[str], t.Optional[str]]


def parse_relations(text: str) -> list[list[Relation]]:
    """`a (>= 1), b | c` -> [[("a", ">=", "1")], [("b", None, None), ("c", None, None)]].

    Architecture restrictions ([amd64]) and build profiles (<!nocheck>) are
    dropped: binary indexes of one architecture do not use them."""
    groups: list[list[Relation]] = []
    for group in filter(None, (g.strip() for g in text.replace("\n", " ").split(","))):
        alternatives: list[Relation] = []
        for alternative in group.split("|"):
            alternative = re.sub(r"\[[^\]]*\]|<[^>]*>", "", alternative)
            match = _RELATION.fullmatch(alternative)
            if not match:
                raise IndexError_("cannot read the relation {0!r}".format(alternative.strip()))
            alternatives.append((match.group(1), match.group(2), match.group(3)))
        groups.append(alternatives)
    return groups


def format_relation(group: list[Relation]) -> str:
    return " | ".join(name + (" ({0} {1})".format(op, version) if op else "") for name, op, version in group)


# --- the index and the closure ---------------------------------------------


class Index:
    """Every stanza of one repository (all suites and components read), by name
    and by what they provide. Each entry is (where, stanza); `where` is the
    caller's label, e.g. ("trixie", "non-free")."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[tuple[t.Any, Stanza]]] = {}
        self.providers: dict[str, list[tuple[t.Any, Stanza, str | None]]] = {}

    def add(self, where: t.Any, stanzas: t.Iterable[Stanza]) -> None:
        for stanza in stanzas:
            self.by_name.setdefault(stanza.package, []).append((where, stanza))
            for group in parse_relations(stanza.get("Provides")):
                for name, _op, version in group:
                    self.providers.setdefault(name, []).append((where, stanza, version))

    def versions(self, name: str) -> list[str]:
        found = {stanza.version for _where, stanza in self.by_name.get(name, [])}
        return sorted(found, key=_VersionKey, reverse=True)

    def candidates(self, relation: Relation) -> list[tuple[t.Any, Stanza]]:
        """Real packages that satisfy the relation, then providers of it."""
        name, op, wanted = relation
        real = [(w, s) for w, s in self.by_name.get(name, []) if satisfies(s.version, op, wanted)]
        # A versioned relation is satisfied only by a versioned Provides (Debian Policy 7.5).
        virtual = [(w, s) for w, s, provided in self.providers.get(name, []) if not op or (provided is not None and satisfies(provided, op, wanted))]
        return real + [c for c in virtual if c not in real]


# A sort key in dpkg's order, for max() and sorted().
_VersionKey = functools.cmp_to_key(compare_versions)


def best(candidates: list[tuple[t.Any, Stanza]], prefer_upstream: str = "") -> tuple[t.Any, Stanza]:
    """The candidate apt would take under the driver role's pin: a version of the
    preferred upstream version first (the role pins the driver's packages to
    it), otherwise the newest."""

    def key(candidate: tuple[t.Any, Stanza]) -> tuple[bool, t.Any]:
        version = candidate[1].version
        return (bool(prefer_upstream) and upstream_version(version) == prefer_upstream, _VersionKey(version))

    return max(candidates, key=key)


class Request(t.NamedTuple):
    """A package to carry: an exact Debian version, an upstream version (any
    revision of it, newest wins) or any version (newest); optional requests
    are carried only when the repository offers them."""

    name: str
    version: str = ""
    upstream_version: str = ""
    required: bool = True


class Closure(t.NamedTuple):
    selected: list[tuple[t.Any, Stanza]]
    external: list[str]
    missing: list[str]


def find(index: Index, request: Request) -> tuple[t.Any, Stanza] | None:
    entries = index.by_name.get(request.name, [])
    if request.version:
        entries = [e for e in entries if e[1].version == request.version]
    elif request.upstream_version:
        entries = [e for e in entries if upstream_version(e[1].version) == request.upstream_version]
    return best(entries) if entries else None


def closure(index: Index, requests: t.Iterable[Request], prefer_upstream: str = "") -> Closure:
    """The requested packages and every dependency (Depends, Pre-Depends) the
    index can satisfy, as apt would pick them without Recommends. Dependencies
    the index cannot satisfy are `external`: they must come from the node's
    other sources (the distribution's own mirror)."""
    selected: dict[tuple[str, str], tuple[t.Any, Stanza]] = {}
    external: set[str] = set()
    missing: list[str] = []
    queue: list[tuple[t.Any, Stanza]] = []
    for request in requests:
        found = find(index, request)
        if found is None:
            if request.required:
                wanted = request.version or request.upstream_version
                offered = index.versions(request.name)
                missing.append("{0}{1} (offered: {2})".format(request.name, " " + wanted if wanted else "", ", ".join(offered) if offered else "none"))
            continue
        queue.append(found)
    while queue:
        where, stanza = queue.pop(0)
        key = (stanza.package, stanza.version)
        if key in selected:
            continue
        selected[key] = (where, stanza)
        for field in ("Pre-Depends", "Depends"):
            for group in parse_relations(stanza.get(field)):
                if _satisfied(group, selected.values(), queue):
                    continue
                for relation in group:
                    candidates = index.candidates(relation)
                    if candidates:
                        queue.append(best(candidates, prefer_upstream))
                        break
                else:
                    external.add(format_relation(group))
    ordered = sorted(selected.values(), key=lambda e: (e[1].package, _VersionKey(e[1].version)))
    return Closure(ordered, sorted(external), missing)


def _satisfied(group: list[Relation], *pools: t.Iterable[tuple[t.Any, Stanza]]) -> bool:
    for _where, stanza in (entry for pool in pools for entry in pool):
        for name, op, wanted in group:
            if stanza.package == name and satisfies(stanza.version, op, wanted):
                return True
            for provided in parse_relations(stanza.get("Provides")):
                for pname, _pop, pversion in provided:
                    if pname == name and (not op or (pversion is not None and satisfies(pversion, op, wanted))):
                        return True
    return False


# --- publishing -------------------------------------------------------------


def render_packages(stanzas: t.Iterable[Stanza]) -> str:
    return "\n".join(stanza.text() for stanza in stanzas)


def gzip_bytes(text: str) -> bytes:
    # mtime 0: the same index compresses to the same bytes on every run.
    return gzip.compress(text.encode("utf-8"), mtime=0)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def render_release(fields: dict[str, str], files: dict[str, bytes]) -> str:
    """A Release file over the given index files (path -> content)."""
    lines = ["{0}: {1}".format(name, value) for name, value in fields.items() if value]
    lines.append("SHA256:")
    for path in sorted(files):
        lines.append(" {0} {1:>16} {2}".format(sha256(files[path]), len(files[path]), path))
    return "\n".join(lines) + "\n"


def release_without_date(text: str) -> str:
    """A Release file's text minus its Date, to tell whether an index changed."""
    return "".join(line for line in text.splitlines(True) if not line.startswith("Date:"))
