# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read the pixels of a PNG screenshot with the standard library only.

Enough of the PNG format for what Chromium writes: 8-bit RGB or RGBA,
not interlaced, the five standard row filters.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


class Image:
    def __init__(self, width: int, height: int, channels: int, rows: list[bytes]) -> None:
        self.width, self.height, self.channels, self.rows = width, height, channels, rows

    def count(self, rgb: tuple[int, int, int]) -> int:
        """How many pixels have exactly this colour (alpha ignored)."""
        total = 0
        step = self.channels
        r, g, b = rgb
        for row in self.rows:
            reds, greens, blues = row[0::step], row[1::step], row[2::step]
            start = reds.find(r)
            while start != -1:
                if greens[start] == g and blues[start] == b:
                    total += 1
                start = reds.find(r, start + 1)
        return total


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read(path: Path) -> Image:
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("{0} is not a PNG".format(path))
    offset, idat = 8, []
    width = height = channels = 0
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        body = data[offset + 8 : offset + 8 + length]
        offset += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _compression, _filter, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError("unsupported PNG: depth {0}, colour type {1}, interlace {2}".format(depth, colour, interlace))
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows: list[bytes] = []
    previous = bytes(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 255
        elif kind == 2:
            line = bytearray((x + p) & 255 for x, p in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                upper_left = previous[i - channels] if i >= channels else 0
                line[i] = (line[i] + _paeth(left, previous[i], upper_left)) & 255
        elif kind != 0:
            raise ValueError("unknown PNG row filter {0}".format(kind))
        previous = bytes(line)
        rows.append(previous)
    return Image(width, height, channels, rows)
