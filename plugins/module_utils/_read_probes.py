# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The commands node_reads_info may run: a named allow-list of reads.

node_reads_info is an info module; it must never run a command that changes
the node. It cannot tell a read from a change by running it, so it runs only
the commands this table names, and refuses any other before it runs anything.
Each probe says which program, and which of its verbs or forms, read without
changing anything; the comment beside it says why. Standard library only
(Python 3.8+): it runs on the node inside the module.
"""

from __future__ import annotations

import os
import typing as t

from ._knowledge import drivers as _drivers
from ._knowledge import toolkit as _toolkit

# The name under which the DRA path read reports `command -v nvidia-cdi-hook`.
HOOK_ON_PATH = "PATH:nvidia-cdi-hook"
# The DRA check's path read: each candidate resolved like the DRA driver's
# filepath.EvalSymlinks (a dangling link is missing), one "<candidate> <target>"
# line per path found, then nvidia-cdi-hook as PATH finds it. readlink and
# command -v only read.
DRA_PATHS_SCRIPT = 'for p; do t=$(readlink -e "$p") && echo "$p $t"; done; h=$(command -v nvidia-cdi-hook) && echo "{0} $h"; exit 0'.format(HOOK_ON_PATH)
DEV_CHAR_LISTING = tuple(_toolkit.DEV_CHAR_LISTING["value"])
KERNEL_MODULE_LISTING = tuple(_drivers.KERNEL_MODULE_LISTING["value"])

Args = t.Sequence[str]


def _words(args: Args, with_values: t.Collection[str] = ()) -> list[str]:
    """The arguments that are not options: the verb and its operands. An option in `with_values` takes the
    next argument as its value unless it is written --option=value."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in with_values
        else:
            words.append(arg)
    return words


def _verb(*verbs: t.Sequence[str], with_values: t.Collection[str] = ()) -> t.Callable[[Args], bool]:
    """The first words after the options are one of `verbs`."""
    return lambda args: any(_words(args, with_values)[: len(verb)] == list(verb) for verb in verbs)


def _version(args: Args) -> bool:
    return list(args) == ["--version"]


def _always(args: Args) -> bool:
    return True


# The crictl options that take a value, before or after the verb.
_CRICTL_VALUES = ("--config", "-c", "--runtime-endpoint", "-r", "--image-endpoint", "-i", "--timeout", "-t")


def _nvidia_ctk_config(args: Args) -> bool:
    # `nvidia-ctk config` prints the merged config; only --in-place or --output would write one.
    writes = any(arg in ("--in-place", "-i", "--output", "-o") or arg.startswith(("--in-place=", "--output=")) for arg in args)
    return not writes and _verb(("config",), with_values=("--config-file", "--set"))(args)


def _imex_ctl_query(args: Args) -> bool:
    # nvidia-imex-ctl -q asks the daemon once for its state and -N once for the domain's (-j: as JSON, -H: with
    # host names); -c, -u and -i only say where the command service is. Every other form is refused: -n
    # monitors without end, and the forms the guide's usage adds (-s, -d, -m) are not needed here.
    index, asks = 0, []
    while index < len(args):
        arg = args[index]
        if arg in ("-c", "-u"):
            index += 2
        elif arg == "-i":
            index += 3
        elif arg in ("-q", "-N"):
            asks.append(arg)
            index += 1
        elif arg in ("-j", "-H"):
            index += 1
        else:
            return False
    return index == len(args) and len(asks) == 1


# (name, programs by base name, the arguments after the program that are this read)
PROBES: tuple[tuple[str, tuple[str, ...], t.Callable[[Args], bool]], ...] = (
    # An engine or tool saying its version.
    ("version", ("containerd", "crio", "dockerd", "crictl", "nvidia-ctk"), _version),
    # systemctl show reads unit properties; no other verb is allowed.
    ("unit properties", ("systemctl",), _verb(("show",))),
    # stat, test and dpkg-query have no form that writes.
    ("file status", ("stat",), _always),
    ("path test", ("test",), _always),
    ("dpkg package status", ("dpkg-query",), _always),
    # rpm in query mode only (-q, -qa, ...): its other modes install, erase or rebuild.
    ("rpm package query", ("rpm",), lambda args: bool(args) and args[0].startswith("-q") and not args[0].startswith("--")),
    # dnf's versionlock plugin listing its locks; its add, delete and clear verbs write.
    ("dnf version locks", ("dnf",), _verb(("versionlock", "list"))),
    # The engines' effective configuration, printed.
    ("containerd configuration", ("containerd",), _verb(("config", "dump"))),
    ("docker information", ("docker",), _verb(("info",), with_values=("--format", "-f"))),
    ("CRI-O configuration", ("crio",), _verb(("status", "config"))),
    ("containerd plugins", ("ctr",), _verb(("plugins", "ls"), ("plugins", "list"), with_values=("--address", "-a", "--namespace", "-n"))),
    ("crictl information", ("crictl",), _verb(("info",), ("version",), with_values=_CRICTL_VALUES)),
    ("Container Toolkit configuration, printed", ("nvidia-ctk",), _nvidia_ctk_config),
    # The toolkit's /dev/char listing from the knowledge base: find with -exec of sed and stat, whole.
    ("/dev/char listing", ("find",), lambda args: tuple(args) == DEV_CHAR_LISTING[1:]),
    # Each bootable kernel's NVIDIA module version from the knowledge base, whole: a loop of modinfo -k (reads a
    # kernel's module index, loads nothing) and printf.
    ("kernel module listing", ("sh",), lambda args: tuple(args) == KERNEL_MODULE_LISTING[1:]),
    # The IMEX daemon's state and its domain's, each asked once (verify's imex check).
    ("IMEX status", ("nvidia-imex-ctl",), _imex_ctl_query),
    # The DRA check's path read, whole, with its candidate paths.
    ("DRA driver paths", ("sh",), lambda args: list(args[:3]) == ["-c", DRA_PATHS_SCRIPT, "sh"]),
)


def probe_of(argv: t.Sequence[t.Any]) -> str | None:
    """The name of the probe that `argv` is, or None when it is none of them."""
    if not argv:
        return None
    program = os.path.basename(str(argv[0]))
    args = [str(arg) for arg in argv[1:]]
    for name, programs, matches in PROBES:
        if program in programs and matches(args):
            return name
    return None


def probe_names() -> list[str]:
    return [name for name, _programs, _matches in PROBES]
