# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""A repository's signing key, pinned by fingerprint, as apt and dnf are then given it.

A served key file is never trusted as served. apt takes every primary key of a Signed-By file as a signer, so a
file with the pinned key and one more would let the second sign the repository. The file is read by gpg in a
scratch home: every primary key in it must be pinned, and what the caller writes is gpg's export of the pinned
keys, not the served bytes, so a packet gpg does not list as a key never reaches apt either.

Used on the node (apt_signed_source, package_versions_info); standard library and gpg only.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import typing as t

__all__ = ["KeyPinError", "PinnedKey", "normalize_fingerprint"]

# A v4 key's fingerprint is 40 hexadecimal digits (SHA-1), a v5 or v6 key's 64 (SHA-256).
_FINGERPRINT = re.compile(r"[0-9A-F]{40}|[0-9A-F]{64}")
# Keys are a few kilobytes; a larger answer is not a key.
KEY_MAX_BYTES = 1 << 20

# module.run_command's shape: (argv, data=..., binary_data=...) -> (rc, stdout, stderr)
RunCommand = t.Callable[..., t.Tuple[int, str, str]]


class KeyPinError(Exception):
    """A served key that must not be trusted; str() says why, naming the fingerprints."""


def normalize_fingerprint(value: str) -> str:
    """A fingerprint as gpg prints it (upper case, no spaces), or ValueError naming what is wrong with it."""
    fingerprint = value.replace(" ", "").upper()
    if not _FINGERPRINT.fullmatch(fingerprint):
        raise ValueError("expected 40 hexadecimal digits (64 for a v5 or v6 key), got '{0}'".format(value))
    return fingerprint


class PinnedKey:
    """gpg, in a scratch home that is removed after each call, over key files given as bytes."""

    def __init__(self, run_command: RunCommand, gpg: str) -> None:
        self.run_command = run_command
        self.gpg = gpg

    def _gpg(self, home: str, args: list[str], data: bytes | None = None) -> str:
        argv = [self.gpg, "--homedir", home, "--batch", "--no-tty", "--quiet", *args]
        if data is None:
            rc, out, err = self.run_command(argv)
        else:
            rc, out, err = self.run_command(argv, data=data, binary_data=True)
        if rc != 0:
            raise KeyPinError("gpg {0} failed: {1}".format(args[0] if args[0].startswith("--") else " ".join(args[:2]), (err or out).strip()))
        return out

    def primary_fingerprints(self, data: bytes) -> list[str]:
        """The fingerprints of the primary keys in `data`, as gpg lists them without importing them anywhere.

        Subkeys' fingerprints are not primary keys: a pin names the key that owns its subkeys."""
        with _scratch_home(self.run_command) as home:
            try:
                out = self._gpg(home, ["--show-keys", "--with-colons"], data)
            except KeyPinError:
                return []
        # A pub (or sec) record, then its fpr record (field 10); a subkey's fpr follows a sub or ssb record.
        found: list[str] = []
        record = ""
        for line in out.splitlines():
            fields = line.split(":")
            if fields[0] == "fpr":
                if record in ("pub", "sec") and len(fields) > 9:
                    found.append(fields[9].upper())
                continue
            record = fields[0]
        return found

    def export(self, data: bytes, pinned: t.Iterable[str], armor: bool) -> bytes:
        """The pinned primary keys of `data`, exported by gpg (ASCII-armoured or binary).

        KeyPinError when the file carries no OpenPGP key, a pinned key is missing from it, or it carries a primary
        key that is not pinned (the two-key file that would widen apt's trust)."""
        wanted = sorted({normalize_fingerprint(f) for f in pinned})
        if not wanted:
            raise KeyPinError("no fingerprint is pinned")
        served = self._served_keys(data)
        missing = [f for f in wanted if f not in served]
        extra = [f for f in served if f not in wanted]
        if missing:
            raise KeyPinError("it holds the key(s) {0}, not the pinned {1}".format(", ".join(served), ", ".join(missing)))
        if extra:
            raise KeyPinError("it holds the pinned key and also {0}, which is not pinned: apt would accept that key's signatures too".format(", ".join(extra)))
        return self._round_trip(data, wanted, armor)

    def export_all(self, data: bytes, armor: bool) -> tuple[bytes, list[str]]:
        """Every primary key of `data`, exported by gpg, and their fingerprints: for a key deliberately left unpinned."""
        served = self._served_keys(data)
        return self._round_trip(data, served, armor), served

    def _served_keys(self, data: bytes) -> list[str]:
        """The primary keys of a served file; KeyPinError when it is too large for a key or holds none."""
        if len(data) > KEY_MAX_BYTES:
            raise KeyPinError("it is larger than {0} bytes; it is not a signing key".format(KEY_MAX_BYTES))
        served = self.primary_fingerprints(data)
        if not served:
            raise KeyPinError("it holds no OpenPGP key")
        return served

    def _round_trip(self, data: bytes, fingerprints: list[str], armor: bool) -> bytes:
        with _scratch_home(self.run_command) as home:
            self._gpg(home, ["--import", "--import-options", "import-minimal"], data)
            exported = os.path.join(home, "exported")
            self._gpg(home, ["--output", exported, *(["--armor"] if armor else []), "--export", *fingerprints])
            with open(exported, "rb") as handle:
                out = handle.read()
        if not out:
            raise KeyPinError("gpg exported nothing for {0}".format(", ".join(fingerprints)))
        return out


class _scratch_home:
    """A private GnuPG home, removed with any agent or keyboxd gpg started in it."""

    def __init__(self, run_command: RunCommand) -> None:
        self.run_command = run_command
        self.path = ""

    def __enter__(self) -> str:
        self.path = tempfile.mkdtemp(prefix="gpufleet-gpg-")
        return self.path

    def __exit__(self, *exc: object) -> None:
        gpgconf = shutil.which("gpgconf")
        if gpgconf and any(name.startswith("S.") for name in os.listdir(self.path)):
            # A daemon's socket: stop it before its home goes, or it outlives the run.
            self.run_command([gpgconf, "--homedir", self.path, "--kill", "all"])
        shutil.rmtree(self.path, ignore_errors=True)
