# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Package version order exactly as dpkg and rpm define it.

dpkg: ``[epoch:]upstream[-revision]``, compared as dpkg 1.21's
lib/dpkg/version.c (``dpkg_version_compare``/``verrevcmp``) after
lib/dpkg/parsehelp.c's ``parseversion``; ``dpkg --compare-versions`` runs
that code. rpm: ``[epoch:]version[-release]``, compared as rpm 4.18's
rpmio/rpmver.c (``rpmverParse``/``rpmverCmp``) over rpmio/rpmvercmp.c
(``rpmvercmp``); Lua's ``rpm.vercmp`` runs that code.

The node cannot be assumed to have python3-apt or the rpm bindings, so this
is a standard-library re-implementation; tests/unit/plugins/module_utils/
test_version_order.py diffs it against libdpkg, the dpkg binary and rpm on
generated pairs. Python 3.8+, standard library only.
"""

from __future__ import annotations

import functools
import typing as t

_DIGITS = frozenset("0123456789")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_ALNUM = _DIGITS | _LETTERS
# dpkg's c_isblank: what parseversion trims and refuses inside a version.
_BLANKS = " \t"
# strtol skips these before an epoch's sign and digits; the trim above has
# already removed spaces and tabs.
_STRTOL_SPACE = "\n\v\f\r"
_INT_MAX = 2**31 - 1


def _sign(value: int) -> int:
    return (value > 0) - (value < 0)


# --- dpkg --------------------------------------------------------------------


class DpkgVersion(t.NamedTuple):
    epoch: int
    upstream: str
    revision: str


def dpkg_parse(version: str) -> DpkgVersion:
    """Split a Debian version as dpkg's parseversion does.

    Raises ValueError where dpkg refuses the version (dpkg --compare-versions
    exits 2 on it). What dpkg only warns about (an upstream version that does
    not start with a digit, characters outside Debian Policy's set) is
    accepted, because dpkg then compares the version all the same. Characters
    outside ASCII are refused: dpkg orders their bytes by whether the CPU's
    char is signed, so x86 and arm64 nodes disagree about them.
    """
    if not isinstance(version, str):
        raise ValueError("a Debian version must be a string, not {0!r}".format(version))
    if "\0" in version or not version.isascii():
        raise ValueError("Debian version {0!r} has a NUL or non-ASCII character".format(version))
    text = version.strip(_BLANKS)
    if not text:
        raise ValueError("Debian version {0!r} is empty".format(version))
    if any(blank in text for blank in _BLANKS):
        raise ValueError("Debian version {0!r} has embedded spaces".format(version))
    epoch = 0
    colon = text.find(":")
    if colon >= 0:
        # strtol(text, &end, 10), which must stop exactly at the first colon.
        number = text[:colon].lstrip(_STRTOL_SPACE)
        sign = number[:1] if number[:1] in ("+", "-") else ""
        digits = number[len(sign) :]
        if digits[:1] not in _DIGITS:
            raise ValueError("Debian version {0!r}: the epoch is empty".format(version))
        if not all(char in _DIGITS for char in digits):
            raise ValueError("Debian version {0!r}: the epoch is not a number".format(version))
        epoch = int(digits) * (-1 if sign == "-" else 1)
        if epoch < 0:
            raise ValueError("Debian version {0!r}: the epoch is negative".format(version))
        if epoch > _INT_MAX:
            raise ValueError("Debian version {0!r}: the epoch is too big".format(version))
        text = text[colon + 1 :]
        if not text:
            raise ValueError("Debian version {0!r}: nothing after the epoch's colon".format(version))
    upstream, hyphen, revision = text.rpartition("-")
    if not hyphen:
        upstream, revision = text, ""
    elif not revision:
        raise ValueError("Debian version {0!r}: the revision after the last '-' is empty".format(version))
    if not upstream:
        raise ValueError("Debian version {0!r}: the upstream version is empty".format(version))
    return DpkgVersion(epoch, upstream, revision)


def _dpkg_order(char: str) -> int:
    """dpkg's order(): '~' before the end of a part, the end before letters,
    letters before every other character; digits never get here."""
    if char in _LETTERS:
        return ord(char)
    if char == "~":
        return -1
    return ord(char) + 256 if char else 0


def _verrevcmp(a: str, b: str) -> int:
    """dpkg's verrevcmp: alternate non-digit runs (by _dpkg_order, character by
    character) and digit runs (as numbers, of any length)."""
    i = j = 0
    len_a, len_b = len(a), len(b)
    while i < len_a or j < len_b:
        while (i < len_a and a[i] not in _DIGITS) or (j < len_b and b[j] not in _DIGITS):
            order_a = _dpkg_order(a[i]) if i < len_a and a[i] not in _DIGITS else 0
            order_b = _dpkg_order(b[j]) if j < len_b and b[j] not in _DIGITS else 0
            if order_a != order_b:
                return _sign(order_a - order_b)
            i += 1
            j += 1
        while i < len_a and a[i] == "0":
            i += 1
        while j < len_b and b[j] == "0":
            j += 1
        first_diff = 0
        while i < len_a and j < len_b and a[i] in _DIGITS and b[j] in _DIGITS:
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len_a and a[i] in _DIGITS:
            return 1
        if j < len_b and b[j] in _DIGITS:
            return -1
        if first_diff:
            return _sign(first_diff)
    return 0


def dpkg_compare(a: str, b: str) -> int:
    """-1, 0 or 1 as Debian version a sorts before, with or after b
    (dpkg --compare-versions a lt/eq/gt b). ValueError for a version dpkg refuses."""
    version_a, version_b = dpkg_parse(a), dpkg_parse(b)
    if version_a.epoch != version_b.epoch:
        return -1 if version_a.epoch < version_b.epoch else 1
    return _verrevcmp(version_a.upstream, version_b.upstream) or _verrevcmp(version_a.revision, version_b.revision)


# sorted(versions, key=dpkg_key): oldest first, versions equal to dpkg
# (1.0 and 1.00, 1.0 and 1.0-0) keep their order.
dpkg_key = functools.cmp_to_key(dpkg_compare)


# --- rpm ---------------------------------------------------------------------


def rpm_vercmp(a: str, b: str) -> int:
    """rpm's rpmvercmp on one field (a version or a release): alphanumeric
    segments, numbers newer than letters, '~' before everything (even the
    end), '^' after the end but before anything else."""
    if a == b:
        return 0
    i = j = 0
    len_a, len_b = len(a), len(b)
    while i < len_a or j < len_b:
        while i < len_a and a[i] not in _ALNUM and a[i] not in "~^":
            i += 1
        while j < len_b and b[j] not in _ALNUM and b[j] not in "~^":
            j += 1
        char_a = a[i] if i < len_a else ""
        char_b = b[j] if j < len_b else ""
        if char_a == "~" or char_b == "~":
            if char_a != "~":
                return 1
            if char_b != "~":
                return -1
            i += 1
            j += 1
            continue
        if char_a == "^" or char_b == "^":
            if not char_a:
                return -1
            if not char_b:
                return 1
            if char_a != "^":
                return 1
            if char_b != "^":
                return -1
            i += 1
            j += 1
            continue
        if not (char_a and char_b):
            break
        kind = _DIGITS if char_a in _DIGITS else _LETTERS
        end_a, end_b = i, j
        while end_a < len_a and a[end_a] in kind:
            end_a += 1
        while end_b < len_b and b[end_b] in kind:
            end_b += 1
        segment_a, segment_b = a[i:end_a], b[j:end_b]
        if not segment_b:
            # One segment numeric, the other alphabetic: the number is newer.
            return 1 if kind is _DIGITS else -1
        if kind is _DIGITS:
            segment_a, segment_b = segment_a.lstrip("0"), segment_b.lstrip("0")
            if len(segment_a) != len(segment_b):
                return 1 if len(segment_a) > len(segment_b) else -1
        if segment_a != segment_b:
            return 1 if segment_a > segment_b else -1
        i, j = end_a, end_b
    if i >= len_a and j >= len_b:
        return 0
    return -1 if i >= len_a else 1


class RpmVersion(t.NamedTuple):
    epoch: t.Optional[str]
    version: str
    release: t.Optional[str]


def rpm_parse(evr: str) -> RpmVersion:
    """Split ``[epoch:]version[-release]`` as rpm's rpmverParse does: the epoch
    is the leading digits before a ':' (an empty one is "0"), the release
    follows the last '-'. ValueError for an empty string, which rpm refuses."""
    if not isinstance(evr, str):
        raise ValueError("an rpm version must be a string, not {0!r}".format(evr))
    if not evr:
        raise ValueError("an rpm version must not be empty")
    if "\0" in evr:
        raise ValueError("rpm version {0!r} has a NUL character".format(evr))
    digits = 0
    while digits < len(evr) and evr[digits] in _DIGITS:
        digits += 1
    epoch: t.Optional[str] = None
    rest = evr
    if evr[digits : digits + 1] == ":":
        epoch, rest = evr[:digits] or "0", evr[digits + 1 :]
    version, hyphen, release = rest.rpartition("-")
    if not hyphen:
        return RpmVersion(epoch, rest, None)
    return RpmVersion(epoch, version, release)


def _rpm_field(a: t.Optional[str], b: t.Optional[str]) -> int:
    """rpmver.c's compare_values: a missing field sorts before a present one."""
    if a is None or b is None:
        return (a is not None) - (b is not None)
    return rpm_vercmp(a, b)


def rpm_compare(a: str, b: str) -> int:
    """-1, 0 or 1 as rpm orders the EVRs a and b (rpmverCmp): epoch (missing
    is 0), then version, then release (a missing release sorts first)."""
    version_a, version_b = rpm_parse(a), rpm_parse(b)
    return (
        rpm_vercmp(version_a.epoch or "0", version_b.epoch or "0")
        or _rpm_field(version_a.version, version_b.version)
        or _rpm_field(version_a.release, version_b.release)
    )


rpm_key = functools.cmp_to_key(rpm_compare)
