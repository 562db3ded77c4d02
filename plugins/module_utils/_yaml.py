# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read the YAML that generators like nvidia-ctk write; Python 3.8+ stdlib only.

Targets need no PyYAML. ``loads`` uses it when the target has it, otherwise
this reader of block-style YAML: mappings, sequences, plain / single-quoted /
double-quoted scalars, literal and folded blocks, and empty or simple flow
collections. Anything else (anchors, tags, multi-document streams, complex
flow nesting) raises YamlError, so a caller never gets a wrong answer - at
worst no answer.
"""

from __future__ import annotations

import json
import re
import typing as t

try:
    import yaml as _pyyaml  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - depends on the target
    _pyyaml = None

__all__ = ["YamlError", "loads", "parse"]


class YamlError(ValueError):
    """The text is not YAML this reader can read; the message names the line."""


def loads(text: str) -> t.Any:
    if _pyyaml is not None:
        try:
            return _pyyaml.safe_load(text)
        except _pyyaml.YAMLError as err:
            raise YamlError(str(err)) from None
    return parse(text)


def parse(text: str) -> t.Any:
    return _Reader(text).document()


_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)$")
_HEX = re.compile(r"0x[0-9a-fA-F]+$")
_OCT = re.compile(r"0o[0-7]+$")
# YAML 1.1's float, as PyYAML resolves it: a dot is required ("1e3" is a string).
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+\.[0-9]*)([eE][-+]?[0-9]+)?$")
_KEY = re.compile(r"""((?:"(?:[^"\\]|\\.)*")|(?:'(?:[^']|'')*')|(?:[^'"\s#\[\]{},][^#]*?)):(?:\s+|$)""")
_UNSUPPORTED = ("&", "*", "!", "%", "@", "`")


class _Line(t.NamedTuple):
    number: int
    indent: int
    text: str  # without indentation; comments kept for block scalars


class _Reader:
    def __init__(self, text: str) -> None:
        self.lines: list[_Line] = []
        raw = text.split("\n")
        for number, line in enumerate(raw, 1):
            line = line.rstrip("\r")
            if "\t" in line[:len(line) - len(line.lstrip())]:
                raise YamlError("line {0}: tab in indentation".format(number))
            stripped = line.strip()
            if stripped in ("---", "...") and not line.startswith(" "):
                if stripped == "---" and any(x.text for x in self.lines):
                    raise YamlError("line {0}: more than one document".format(number))
                continue
            self.lines.append(_Line(number, len(line) - len(line.lstrip(" ")), line.lstrip(" ")))
        self.pos = 0

    # -- structure ------------------------------------------------------------------------------
    def skip_blank(self) -> None:
        while self.pos < len(self.lines):
            text = self.lines[self.pos].text
            if text and not text.startswith("#"):
                return
            self.pos += 1

    def document(self) -> t.Any:
        self.skip_blank()
        if self.pos >= len(self.lines):
            return None
        value = self.node(self.lines[self.pos].indent)
        self.skip_blank()
        if self.pos < len(self.lines):
            line = self.lines[self.pos]
            raise YamlError("line {0}: unexpected content".format(line.number))
        return value

    def node(self, indent: int) -> t.Any:
        line = self.lines[self.pos]
        if line.text == "-" or line.text.startswith("- "):
            return self.sequence(line.indent)
        if _KEY.match(line.text):
            return self.mapping(line.indent)
        self.pos += 1
        return self.scalar(line.text, line, indent)

    def sequence(self, indent: int) -> list[t.Any]:
        items = []
        while True:
            self.skip_blank()
            if self.pos >= len(self.lines):
                return items
            line = self.lines[self.pos]
            if line.indent < indent:
                return items
            if line.indent > indent or not (line.text == "-" or line.text.startswith("- ")):
                if line.indent == indent:
                    return items
                raise YamlError("line {0}: bad indentation in a sequence".format(line.number))
            rest = line.text[1:].lstrip(" ")
            if not rest or rest.startswith("#"):
                self.pos += 1
                self.skip_blank()
                if self.pos >= len(self.lines) or self.lines[self.pos].indent <= indent:
                    items.append(None)
                else:
                    items.append(self.node(self.lines[self.pos].indent))
                continue
            # "- key: value" opens a mapping whose keys sit where the key starts.
            column = indent + (len(line.text) - len(rest))
            self.lines[self.pos] = _Line(line.number, column, rest)
            items.append(self.node(column))

    def mapping(self, indent: int) -> dict[str, t.Any]:
        result: dict[str, t.Any] = {}
        while True:
            self.skip_blank()
            if self.pos >= len(self.lines):
                return result
            line = self.lines[self.pos]
            if line.indent < indent:
                return result
            if line.indent > indent:
                raise YamlError("line {0}: bad indentation in a mapping".format(line.number))
            match = _KEY.match(line.text)
            if not match:
                return result
            key = self.key(match.group(1), line)
            if key in result:
                raise YamlError("line {0}: duplicate key {1!r}".format(line.number, key))
            rest = line.text[match.end():].strip()
            self.pos += 1
            if rest and not rest.startswith("#"):
                result[key] = self.scalar(rest, line, indent)
                continue
            self.skip_blank()
            if self.pos >= len(self.lines):
                result[key] = None
                continue
            child = self.lines[self.pos]
            # A sequence may sit at the key's own indentation (go-yaml v2 style).
            if child.indent > indent or (child.indent == indent and (child.text == "-" or child.text.startswith("- "))):
                result[key] = self.node(child.indent)
            else:
                result[key] = None

    def key(self, raw: str, line: _Line) -> str:
        raw = raw.strip()
        value = self.scalar(raw, line, line.indent) if raw[:1] in "\"'" else raw
        if not isinstance(value, str):
            raise YamlError("line {0}: unsupported key".format(line.number))
        return value

    # -- scalars --------------------------------------------------------------------------------
    def scalar(self, text: str, line: _Line, indent: int) -> t.Any:
        text = text.strip()
        if text[:1] in _UNSUPPORTED:
            raise YamlError("line {0}: anchors, aliases, tags and directives are not supported".format(line.number))
        if text[:1] == '"':
            return self.double_quoted(text, line)
        if text[:1] == "'":
            end = self._single_end(text)
            if end is None:
                raise YamlError("line {0}: multi-line quoted strings are not supported".format(line.number))
            self._only_comment(text[end + 1:], line)
            return text[1:end].replace("''", "'")
        if text[:1] in "|>":
            return self.block_scalar(text, line, indent)
        if text[:1] in "[{":
            return self.flow(text, line)
        text = re.split(r"\s#", text, maxsplit=1)[0].rstrip()
        return self.plain(text)

    @staticmethod
    def _single_end(text: str) -> int | None:
        i = 1
        while i < len(text):
            if text[i] == "'":
                if text[i + 1:i + 2] == "'":
                    i += 2
                    continue
                return i
            i += 1
        return None

    @staticmethod
    def _only_comment(rest: str, line: _Line) -> None:
        rest = rest.strip()
        if rest and not rest.startswith("#"):
            raise YamlError("line {0}: unexpected text after a quoted string".format(line.number))

    def double_quoted(self, text: str, line: _Line) -> str:
        i, out = 1, []
        while i < len(text):
            ch = text[i]
            if ch == '"':
                self._only_comment(text[i + 1:], line)
                return "".join(out)
            if ch == "\\":
                code = text[i + 1:i + 2]
                simple = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
                          "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
                          "_": "\xa0", "L": "\u2028", "P": "\u2029"}
                if code in simple:
                    out.append(simple[code])
                    i += 2
                    continue
                width = {"x": 2, "u": 4, "U": 8}.get(code)
                digits = text[i + 2:i + 2 + width] if width else ""
                if not width or not re.fullmatch(r"[0-9a-fA-F]+", digits) or len(digits) != width:
                    raise YamlError("line {0}: bad escape in a double-quoted string".format(line.number))
                out.append(chr(int(digits, 16)))
                i += 2 + width
                continue
            out.append(ch)
            i += 1
        raise YamlError("line {0}: multi-line quoted strings are not supported".format(line.number))

    def block_scalar(self, header: str, line: _Line, indent: int) -> str:
        match = re.fullmatch(r"([|>])([+-]?)\s*(#.*)?", header)
        if not match:
            raise YamlError("line {0}: unsupported block scalar header".format(line.number))
        style, chomp = match.group(1), match.group(2)
        body: list[str] = []
        block_indent = None
        while self.pos < len(self.lines):
            candidate = self.lines[self.pos]
            if candidate.text and candidate.indent <= indent:
                break
            if candidate.text and block_indent is None:
                block_indent = candidate.indent
            if candidate.text and candidate.indent < (block_indent or 0):
                break
            body.append(" " * max(candidate.indent - (block_indent or 0), 0) + candidate.text if candidate.text else "")
            self.pos += 1
        while body and body[-1] == "" and chomp != "+":
            body.pop()
        if style == "|":
            text = "\n".join(body)
        else:
            text = re.sub(r"(?<!\n)\n(?!\n| )", " ", "\n".join(body))
        return text if chomp == "-" else text + "\n"

    def flow(self, text: str, line: _Line) -> t.Any:
        text = re.split(r"\s#", text, maxsplit=1)[0].strip()
        # JSON is a subset of flow YAML; nvidia-ctk writes only [] and {} here.
        try:
            return json.loads(text)
        except ValueError:
            pass
        if text.startswith("[") and text.endswith("]") and not re.search(r"[\[\]{}]", text[1:-1]):
            inner = text[1:-1].strip()
            return [self.plain(part.strip()) for part in inner.split(",")] if inner else []
        raise YamlError("line {0}: unsupported flow collection".format(line.number))

    @staticmethod
    def plain(text: str) -> t.Any:
        if text in ("", "~", "null", "Null", "NULL"):
            return None
        if text in ("true", "True", "TRUE"):
            return True
        if text in ("false", "False", "FALSE"):
            return False
        if _INT.match(text):
            return int(text)
        if _HEX.match(text):
            return int(text, 16)
        if _OCT.match(text):
            return int(text[2:], 8)
        if _FLOAT.match(text) and any(c.isdigit() for c in text):
            return float(text)
        if text in (".inf", ".Inf", ".INF", "+.inf"):
            return float("inf")
        if text in ("-.inf", "-.Inf", "-.INF"):
            return float("-inf")
        if text in (".nan", ".NaN", ".NAN"):
            return float("nan")
        return text
