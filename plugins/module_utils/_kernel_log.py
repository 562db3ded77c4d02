# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The kernel log's NVIDIA events: the driver's Xid and fallen-off-the-bus lines, read on the node without blocking
(/dev/kmsg or a log file) and parsed there. Standard library only: node_reads_info and the boot-time check import
it on every call, and the health judgement (_verify/health) reads the events it gives."""

from __future__ import annotations

import os
import re
import stat
import typing as t

_HEX = "[0-9a-fA-F]"
# The driver's Xid line (kernel_rc.c): "NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u[ GPU-CI:%02u]]): %d, ...";
# drivers before the open modules printed "Xid (0000:01:00)" without "PCI:".
_XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<domain>{h}{{4,8}}):(?P<bus>{h}{{2}}):(?P<device>{h}{{2}})(?:\.(?P<function>{h}))?"
    r"[^)]*\): (?P<xid>\d+)(?:,\s*(?P<rest>.*))?$".format(h=_HEX)
)
# "NVRM: GPU 0000:07:00.0: GPU has fallen off the bus." (osinit.c) and the
# older "NVRM: GPU at 0000:01:00.0 has fallen off the bus.".
_FALLEN_LINE = re.compile(
    r"NVRM: GPU (?:at )?(?:PCI:)?(?P<domain>{h}{{4,8}}):(?P<bus>{h}{{2}}):(?P<device>{h}{{2}})\.(?P<function>{h})"
    r"(?::| ).*fallen off the bus".format(h=_HEX)
)
# A /dev/kmsg record's dictionary lines (" SUBSYSTEM=pci") follow it, indented by one space.
_KMSG_DICTIONARY = re.compile(r"^ [A-Z0-9_]+=")


# A read of /dev/kmsg returns one whole record and fails with EINVAL when the
# buffer is smaller than the record; records are at most 8 KiB
# (CONSOLE_EXT_LOG_MAX), so every read asks for more than that.
_CHUNK = 64 * 1024


def read_available(descriptor: int, limit: int) -> bytes:
    """Everything a descriptor opened with O_NONBLOCK holds now, up to limit bytes.

    A regular file reads to its end. A character device or FIFO that would
    block (EAGAIN) has given all it holds: /dev/kmsg, read from a fresh
    open, returns every record of the kernel's ring buffer, then EAGAIN
    instead of waiting for the next one. EPIPE from /dev/kmsg means the
    record due next was overwritten while we read; the next read returns the
    oldest one still there, so the read goes on.
    """
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        try:
            chunk = os.read(descriptor, _CHUNK)
        except BlockingIOError:
            break
        except BrokenPipeError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:limit]


# The kernel's ring buffer is at most 32 MiB (CONFIG_LOG_BUF_SHIFT <= 25): read whole, it is parsed where it is.
KMSG_LIMIT = 64 << 20


def read_kernel_events(path: str, limit: int = 4 << 20) -> dict[str, t.Any] | None:
    """The Xid events of the kernel log at `path`, read and parsed on the node; None when it cannot be read.

    /dev/kmsg (a character device) is read whole: its ring buffer already drops the oldest records. A file (a
    journal export, a syslog) can be far larger than the newest events: its last `limit` bytes are read, from the
    first whole line, so that the newest events are never the ones cut off. Only the events leave this function:
    {"events": [...], "read_bytes": n, "truncated": whether older lines were not read}."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        truncated = False
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            os.lseek(descriptor, info.st_size - limit, os.SEEK_SET)
            truncated = True
        data = read_available(descriptor, limit if stat.S_ISREG(info.st_mode) else KMSG_LIMIT)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    if truncated:
        # The first line was cut by the seek: it starts after the first newline.
        data = data[data.find(b"\n") + 1 :]
    return {"events": parse_kernel_log(data.decode("utf-8", "replace")), "read_bytes": len(data), "truncated": truncated}


def kernel_events(kernel_log: t.Any) -> list[dict[str, t.Any]]:
    """The events of a kernel log as verify gets it: read on the node (read_kernel_events' answer) or as text."""
    if isinstance(kernel_log, dict):
        events = kernel_log.get("events")
        if not isinstance(events, list):
            raise ValueError("the kernel log's events must be a list, got {0}".format(type(events).__name__))
        return events
    return parse_kernel_log(kernel_log or "")


def canonical_bus_id(domain: int, bus: int, device: int, function: int = 0) -> str:
    """NVML's pci.bus_id spelling: 8-digit domain, upper-case hex."""
    return "{0:08X}:{1:02X}:{2:02X}.{3:X}".format(domain, bus, device, function)


def bus_key(bus_id: t.Any) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI bus id in any width or case; the Xid line carries no function."""
    if not isinstance(bus_id, str):
        return None
    match = re.fullmatch(r"^(?:PCI:)?({h}{{1,8}}):({h}{{1,2}}):({h}{{1,2}})(?:\.{h})?$".format(h=_HEX), bus_id.strip())
    if not match:
        return None
    return int(match.group(1), 16), int(match.group(2), 16), int(match.group(3), 16)


def parse_kernel_log(text: t.Any) -> list[dict[str, t.Any]]:
    """The Xid and fallen-off-the-bus events of a kernel log, in log order.

    Reads /dev/kmsg records ("pri,seq,usec,flags;message" with indented
    dictionary lines), dmesg output (with or without "[  12.345]") and
    journal or syslog lines ("Nov 26 06:00:00 host kernel: ..."): the NVRM
    message is searched for anywhere in a line. Each event:
    {xid: int|None, bus_id: "00000000:07:00.0", message, fallen_off_bus}.
    """
    if text is None:
        return []
    if not isinstance(text, str):
        raise ValueError("the kernel log must be text, got {0}".format(type(text).__name__))
    events = []
    for line in text.splitlines():
        if _KMSG_DICTIONARY.match(line) or "NVRM:" not in line:
            continue
        message = line[line.index("NVRM:") :].strip()
        xid_match = _XID_LINE.search(message)
        if xid_match:
            xid = int(xid_match.group("xid"))
            events.append(
                {
                    "xid": xid,
                    "bus_id": _bus_id_of(xid_match),
                    "message": message,
                    "fallen_off_bus": xid == 79 or "fallen off the bus" in (xid_match.group("rest") or ""),
                }
            )
            continue
        fallen_match = _FALLEN_LINE.search(message)
        if fallen_match:
            events.append({"xid": None, "bus_id": _bus_id_of(fallen_match), "message": message, "fallen_off_bus": True})
    return events


def _bus_id_of(match: t.Match[str]) -> str:
    return canonical_bus_id(
        int(match.group("domain"), 16), int(match.group("bus"), 16), int(match.group("device"), 16), int(match.group("function") or "0", 16)
    )
