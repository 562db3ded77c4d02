# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""TOML for the container-runtime configs we read and edit; Python 3.8+ stdlib only.

Python 3.11 ships a TOML reader (tomllib) but no writer, and targets may run
3.8-3.10. So this file holds:

- ``loads``: tomllib where the target has it, otherwise our own reader
  (``parse``), which follows TOML 1.0 for everything containerd, CRI-O and the
  NVIDIA Container Toolkit write. The unit tests hold both to the same answers.
- ``dumps``: a writer for the plain data our drop-ins contain.
- ``add_to_top_level_array``: inserts one element into a top-level array
  (containerd's ``imports``) and leaves every other byte of the file as it
  was - comments, spacing and the order of other tools' settings included.
"""

from __future__ import annotations

import datetime
import math
import re
import typing as t

try:  # Python >= 3.11
    import tomllib as _tomllib  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the target's Python
    _tomllib = None

__all__ = [
    "TomlError",
    "TomlNullError",
    "add_to_top_level_array",
    "dump_value",
    "dumps",
    "loads",
    "parse",
    "top_level_keys",
]


class TomlError(ValueError):
    """A TOML document could not be read; the message names line and column."""


def loads(text: str) -> dict[str, t.Any]:
    """Parse TOML with the standard library where it can, else with ``parse``."""
    if _tomllib is not None:
        try:
            return _tomllib.loads(text)
        except _tomllib.TOMLDecodeError as err:
            raise TomlError(str(err)) from None
    return parse(text)


def parse(text: str) -> dict[str, t.Any]:
    """Parse TOML with our own reader (the fallback for Python < 3.11)."""
    return _Parser(text).document()


# --- reader --------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_DEC_INT = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)")
_PREFIXED_INT = {
    "0x": (re.compile(r"0x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*"), 16),
    "0o": (re.compile(r"0o[0-7](?:_?[0-7])*"), 8),
    "0b": (re.compile(r"0b[01](?:_?[01])*"), 2),
}
_FLOAT = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?")
_SPECIAL_FLOAT = re.compile(r"[+-]?(?:inf|nan)")
_DATETIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})?"
    r"(?:(?(date)[Tt ])(?P<time>\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?)(?P<tz>[Zz]|[+-]\d{2}:\d{2})?)?"
)
_VALUE_END = frozenset(" \t\r\n,]}#")


class _Table(dict):  # type: ignore[type-arg]
    """A table plus how it came to exist, for TOML's redefinition rules."""

    def __init__(self, origin: str) -> None:
        super().__init__()
        self.origin = origin  # header | implicit | dotted | inline


class _Parser:
    def __init__(self, text: str) -> None:
        if "\r" in text.replace("\r\n", ""):
            # A lone CR is not a TOML newline; find it for the message.
            pos = next(i for i, c in enumerate(text) if c == "\r" and text[i + 1 : i + 2] != "\n")
            self.text, self.pos = text, pos
            self.error("carriage return without a line feed")
        self.text = text
        self.pos = 0
        self.root = _Table("header")
        self.array_tables: set[int] = set()  # ids of lists built from [[...]]

    # -- helpers -----------------------------------------------------------------------------
    def error(self, msg: str) -> t.NoReturn:
        line = self.text.count("\n", 0, self.pos) + 1
        col = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        raise TomlError("{0} (at line {1}, column {2})".format(msg, line, col))

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def skip_comment(self) -> None:
        if self.peek() == "#":
            end = self.text.find("\n", self.pos)
            end = len(self.text) if end < 0 else end
            for ch in self.text[self.pos : end].rstrip("\r"):
                if (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F:
                    self.error("control character in a comment")
            self.pos = end

    def skip_ws_comments_newlines(self) -> None:
        while True:
            self.skip_ws()
            self.skip_comment()
            if self.peek() == "\n":
                self.pos += 1
            elif self.peek(2) == "\r\n":
                self.pos += 2
            else:
                return

    def end_of_line(self) -> None:
        self.skip_ws()
        self.skip_comment()
        if self.pos >= len(self.text):
            return
        if self.peek() == "\n":
            self.pos += 1
        elif self.peek(2) == "\r\n":
            self.pos += 2
        else:
            self.error("expected the end of the line")

    # -- document ----------------------------------------------------------------------------
    def document(self) -> dict[str, t.Any]:
        current = self.root
        while True:
            self.skip_ws_comments_newlines()
            if self.pos >= len(self.text):
                return _plain(self.root)
            if self.peek(2) == "[[":
                self.pos += 2
                current = self.array_table_header()
            elif self.peek() == "[":
                self.pos += 1
                current = self.table_header()
            else:
                self.key_value(current)
            self.end_of_line()

    def table_header(self) -> _Table:
        self.skip_ws()
        path = self.key()
        self.skip_ws()
        if self.peek() != "]":
            self.error("expected ']' after the table name")
        self.pos += 1
        table = self.walk(self.root, path[:-1], "implicit")
        name = path[-1]
        existing = table.get(name)
        if existing is None:
            new = _Table("header")
            table[name] = new
            return new
        if not isinstance(existing, _Table) or existing.origin in ("header", "dotted", "inline"):
            self.error("table [{0}] is defined twice".format(".".join(path)))
        existing.origin = "header"
        return existing

    def array_table_header(self) -> _Table:
        self.skip_ws()
        path = self.key()
        self.skip_ws()
        if self.peek(2) != "]]":
            self.error("expected ']]' after the array-of-tables name")
        self.pos += 2
        table = self.walk(self.root, path[:-1], "implicit")
        name = path[-1]
        existing = table.get(name)
        if existing is None:
            existing = []
            self.array_tables.add(id(existing))
            table[name] = existing
        elif not isinstance(existing, list) or id(existing) not in self.array_tables:
            self.error("[[{0}]] would extend a value that is not an array of tables".format(".".join(path)))
        new = _Table("header")
        existing.append(new)
        return new

    def walk(self, table: _Table, path: list[str], origin: str) -> _Table:
        """The table at `path` under `table`, creating implicit tables on the way."""
        for name in path:
            child = table.get(name)
            if child is None:
                child = _Table(origin)
                table[name] = child
            elif isinstance(child, list) and id(child) in self.array_tables:
                child = child[-1]
            elif not isinstance(child, _Table) or child.origin == "inline":
                self.error("key '{0}' is already a value, not a table".format(name))
            elif origin == "dotted" and child.origin == "header":
                self.error("dotted key would extend table '{0}' defined elsewhere".format(name))
            table = child
        return table

    def key_value(self, table: _Table) -> None:
        path = self.key()
        self.skip_ws()
        if self.peek() != "=":
            self.error("expected '=' after the key")
        self.pos += 1
        self.skip_ws()
        value = self.value()
        target = self.walk(table, path[:-1], "dotted")
        if path[-1] in target:
            self.error("key '{0}' is defined twice".format(".".join(path)))
        target[path[-1]] = value

    # -- keys --------------------------------------------------------------------------------
    def key(self) -> list[str]:
        parts = [self.simple_key()]
        while True:
            save = self.pos
            self.skip_ws()
            if self.peek() != ".":
                self.pos = save
                return parts
            self.pos += 1
            self.skip_ws()
            parts.append(self.simple_key())

    def simple_key(self) -> str:
        ch = self.peek()
        if ch == '"':
            if self.peek(3) == '"""':
                self.error("a key cannot be a multi-line string")
            return self.basic_string()
        if ch == "'":
            if self.peek(3) == "'''":
                self.error("a key cannot be a multi-line string")
            return self.literal_string()
        match = _BARE_KEY.match(self.text, self.pos)
        if not match:
            self.error("expected a key")
        self.pos = match.end()
        return match.group(0)

    # -- values ------------------------------------------------------------------------------
    def value(self) -> t.Any:
        ch = self.peek()
        if ch == '"':
            return self.ml_basic_string() if self.peek(3) == '"""' else self.basic_string()
        if ch == "'":
            return self.ml_literal_string() if self.peek(3) == "'''" else self.literal_string()
        if ch == "[":
            return self.array()
        if ch == "{":
            return self.inline_table()
        for word, result in (("true", True), ("false", False)):
            if self.text.startswith(word, self.pos) and self.at_value_end(self.pos + len(word)):
                self.pos += len(word)
                return result
        return self.number_or_date()

    def at_value_end(self, pos: int) -> bool:
        return pos >= len(self.text) or self.text[pos] in _VALUE_END

    def number_or_date(self) -> t.Any:
        start = self.pos
        match = _DATETIME.match(self.text, start)
        if (
            match
            and match.end() > start
            and (match.group("date") or match.group("time"))
            and self.at_value_end(match.end())
            and (match.group("date") or ":" in match.group(0))
        ):
            self.pos = match.end()
            return self.datetime(match)
        special = _SPECIAL_FLOAT.match(self.text, start)
        if special and self.at_value_end(special.end()):
            self.pos = special.end()
            word = special.group(0)
            value = float(word.lstrip("+-"))
            return -value if word.startswith("-") else value
        for prefix, (pattern, base) in _PREFIXED_INT.items():
            if self.text.startswith(prefix, start):
                match = pattern.match(self.text, start)
                if match and self.at_value_end(match.end()):
                    self.pos = match.end()
                    return int(match.group(0)[2:].replace("_", ""), base)
                self.error("invalid number")
        match = _FLOAT.match(self.text, start)
        if not match or match.end() == start or not self.at_value_end(match.end()):
            self.error("invalid value")
        self.pos = match.end()
        word = match.group(0).replace("_", "")
        if _DEC_INT.fullmatch(match.group(0)):
            return int(word)
        return float(word)

    def datetime(self, match: t.Match[str]) -> t.Any:
        date_s, time_s, tz_s = match.group("date"), match.group("time"), match.group("tz")
        try:
            date = datetime.date.fromisoformat(date_s) if date_s else None
            clock = None
            if time_s:
                if time_s.count(":") == 1:
                    self.error("a time needs seconds")
                hms, _sep, frac = time_s.partition(".")
                hour, minute, second = (int(x) for x in hms.split(":"))
                micro = int((frac + "000000")[:6]) if frac else 0
                clock = datetime.time(hour, minute, second, micro)
        except ValueError as err:
            self.error("invalid date or time: {0}".format(err))
        if date is None:
            if tz_s:
                self.error("a time of day cannot carry an offset")
            return clock
        if clock is None:
            return date
        tzinfo = None
        if tz_s:
            if tz_s in "Zz":
                tzinfo = datetime.timezone.utc
            else:
                sign = -1 if tz_s[0] == "-" else 1
                hours, minutes = int(tz_s[1:3]), int(tz_s[4:6])
                tzinfo = datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))
        return datetime.datetime.combine(date, clock, tzinfo)

    def basic_string(self) -> str:
        self.pos += 1
        out = []
        while True:
            if self.pos >= len(self.text):
                self.error("unterminated string")
            ch = self.text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\n":
                self.error("newline in a single-line string")
            if ch == "\\":
                out.append(self.escape())
                continue
            self.check_char(ch)
            out.append(ch)
            self.pos += 1

    def ml_basic_string(self) -> str:
        self.pos += 3
        if self.peek() == "\n":
            self.pos += 1
        elif self.peek(2) == "\r\n":
            self.pos += 2
        out = []
        while True:
            if self.pos >= len(self.text):
                self.error("unterminated multi-line string")
            if self.peek(3) == '"""':
                # Up to two quotes may close the content right before the delimiter.
                extra = 0
                while extra < 2 and self.text[self.pos + 3 + extra : self.pos + 4 + extra] == '"':
                    extra += 1
                out.append('"' * extra)
                self.pos += 3 + extra
                return "".join(out)
            ch = self.text[self.pos]
            if ch == "\\":
                rest = re.match(r"\\[ \t]*\r?\n", self.text[self.pos :])
                if rest:
                    self.pos += rest.end()
                    while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
                        self.pos += 1
                    continue
                out.append(self.escape())
                continue
            if ch == "\r" and self.peek(2) == "\r\n":
                # TOML lets readers normalize newlines; tomllib gives "\n", and so do we.
                out.append("\n")
                self.pos += 2
                continue
            if ch != "\n":
                self.check_char(ch)
            out.append(ch)
            self.pos += 1

    def literal_string(self) -> str:
        self.pos += 1
        end = self.pos
        while True:
            if end >= len(self.text) or self.text[end] == "\n":
                self.error("unterminated literal string")
            if self.text[end] == "'":
                break
            self.check_char(self.text[end])
            end += 1
        value = self.text[self.pos : end]
        self.pos = end + 1
        return value

    def ml_literal_string(self) -> str:
        self.pos += 3
        if self.peek() == "\n":
            self.pos += 1
        elif self.peek(2) == "\r\n":
            self.pos += 2
        end = self.text.find("'''", self.pos)
        if end < 0:
            self.error("unterminated multi-line literal string")
        extra = 0
        while extra < 2 and self.text[end + 3 + extra : end + 4 + extra] == "'":
            extra += 1
        value = self.text[self.pos : end + extra]
        for ch in value:
            if ch not in "\r\n":
                self.check_char(ch)
        self.pos = end + 3 + extra
        return value.replace("\r\n", "\n")  # newlines normalized as in ml_basic_string

    def check_char(self, ch: str) -> None:
        if (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F:
            self.error("control character in a string")

    def escape(self) -> str:
        code = self.text[self.pos + 1 : self.pos + 2]
        if code in _ESCAPES:
            self.pos += 2
            return _ESCAPES[code]
        if code in ("u", "U"):
            width = 4 if code == "u" else 8
            digits = self.text[self.pos + 2 : self.pos + 2 + width]
            if len(digits) != width or not re.fullmatch(r"[0-9A-Fa-f]+", digits):
                self.error("invalid unicode escape")
            value = int(digits, 16)
            if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                self.error("escape is not a unicode scalar value")
            self.pos += 2 + width
            return chr(value)
        self.error("invalid escape sequence")

    def array(self) -> list[t.Any]:
        self.pos += 1
        items: list[t.Any] = []
        while True:
            self.skip_ws_comments_newlines()
            if self.peek() == "]":
                self.pos += 1
                return items
            items.append(self.value())
            self.skip_ws_comments_newlines()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                self.error("expected ',' or ']' in an array")

    def inline_table(self) -> _Table:
        self.pos += 1
        table = _Table("inline")
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
            return table
        while True:
            self.skip_ws()
            path = self.key()
            self.skip_ws()
            if self.peek() != "=":
                self.error("expected '=' in an inline table")
            self.pos += 1
            self.skip_ws()
            value = self.value()
            target = table
            for name in path[:-1]:
                child = target.get(name)
                if child is None:
                    child = _Table("dotted")
                    target[name] = child
                elif not isinstance(child, _Table) or child.origin == "inline":
                    self.error("key '{0}' is already a value".format(name))
                target = child
            if path[-1] in target:
                self.error("key '{0}' is defined twice".format(".".join(path)))
            target[path[-1]] = value
            self.skip_ws()
            if self.peek() == "}":
                self.pos += 1
                return table
            if self.peek() != ",":
                self.error("expected ',' or '}' in an inline table")
            self.pos += 1


def _plain(value: t.Any) -> t.Any:
    """Our _Table bookkeeping back to plain dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --- top-level statements, for edits that keep the file's bytes -------------------------------


class TopLevelKey(t.NamedTuple):
    key: tuple[str, ...]
    start: int  # first character of the key
    value_start: int
    value_end: int  # one past the value's last character
    line_end: int  # one past the newline that ends the statement (or len(text))


def top_level_keys(text: str) -> list[TopLevelKey]:
    """Key/value statements before the first table header, with their spans."""
    parser = _Parser(text)
    found = []
    while True:
        parser.skip_ws_comments_newlines()
        if parser.pos >= len(text) or parser.peek() == "[":
            return found
        start = parser.pos
        key = tuple(parser.key())
        parser.skip_ws()
        if parser.peek() != "=":
            parser.error("expected '=' after the key")
        parser.pos += 1
        parser.skip_ws()
        value_start = parser.pos
        parser.value()
        value_end = parser.pos
        parser.end_of_line()
        found.append(TopLevelKey(key, start, value_start, value_end, parser.pos))


def add_to_top_level_array(text: str, key: str, element: str, after: str | None = None) -> str:
    """Return `text` with `element` appended to the top-level array `key`.

    Only characters are inserted: into the existing array right after its
    last element (``, "element"``), or, when the key is missing, as a new
    line ``key = ["element"]`` after the top-level statement `after` (or at
    the start of the file). The caller checks first whether the element is
    already there.
    """
    loads(text)  # refuse to edit a file that is not TOML
    statements = top_level_keys(text)
    rendered = dump_value(element)
    for statement in statements:
        if statement.key != (key,):
            continue
        if not text.startswith("[", statement.value_start):
            raise TomlError("top-level '{0}' is not an array".format(key))
        close = statement.value_end - 1  # the ']'
        last = _last_token_end(text, statement.value_start + 1, close)
        if last is None:
            insert_at, piece = statement.value_start + 1, rendered
        elif text[last - 1] == ",":
            insert_at, piece = last, " " + rendered
        else:
            insert_at, piece = last, ", " + rendered
        return text[:insert_at] + piece + text[insert_at:]
    line = "{0} = [{1}]\n".format(_dump_key(key), rendered)
    anchor = next((s for s in statements if after is not None and s.key == (after,)), None)
    if anchor is None:
        return line + text
    insert_at = anchor.line_end
    prefix = "" if text[insert_at - 1 : insert_at] == "\n" else "\n"
    return text[:insert_at] + prefix + line + text[insert_at:]


def _last_token_end(text: str, start: int, stop: int) -> int | None:
    """End of the last element or comma between `start` and `stop`, skipping comments."""
    last = None
    parser = _Parser(text[:stop])
    parser.pos = start
    while True:
        parser.skip_ws_comments_newlines()
        if parser.pos >= stop:
            return last
        if parser.peek() == ",":
            parser.pos += 1
        else:
            parser.value()
        last = parser.pos


# --- writer ----------------------------------------------------------------------------------


class TomlNullError(TomlError):
    """A None in data to write: TOML has no null. `key` is the dotted TOML path to it."""

    def __init__(self, key: str) -> None:
        super().__init__(
            "{0} is null, and TOML has no null: give it a value, or remove the key to keep the value "
            "the other config files or the program's default give it".format(key)
        )
        self.key = key


def dumps(data: t.Mapping[str, t.Any]) -> str:
    """TOML text for plain data: scalars first, then sub-tables, then arrays of tables.

    A None anywhere is refused with TomlNullError rather than left out: the
    files we write are merged over others (containerd's imports), where a
    missing key keeps the value set elsewhere, so dropping it would quietly
    keep a setting the caller meant to clear.
    """
    _check_no_null(data, "")
    lines: list[str] = []
    _dump_table(lines, (), data)
    return "\n".join(lines).strip("\n") + "\n"


def _check_no_null(value: t.Any, where: str) -> None:
    """Raise TomlNullError naming `where` (the rendered dotted key, [i] for array elements)."""
    if value is None:
        raise TomlNullError(where or "the document")
    if isinstance(value, t.Mapping):
        for key, item in value.items():
            _check_no_null(item, (where + "." if where else "") + _dump_key(str(key)))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_no_null(item, "{0}[{1}]".format(where, index))


def _dump_table(lines: list[str], path: tuple[str, ...], table: t.Mapping[str, t.Any], header: str = "") -> None:
    scalars = [(k, v) for k, v in table.items() if not _is_table(v) and not _is_table_array(v)]
    tables = [(k, v) for k, v in table.items() if _is_table(v)]
    arrays = [(k, v) for k, v in table.items() if _is_table_array(v)]
    # A header is needed for the values, or to keep an empty table at all.
    if path and (scalars or not (tables or arrays) or header.startswith("[[")):
        if lines:
            lines.append("")
        lines.append(header or "[" + ".".join(_dump_key(p) for p in path) + "]")
    for key, value in scalars:
        lines.append("{0} = {1}".format(_dump_key(key), dump_value(value)))
    for key, value in tables:
        _dump_table(lines, path + (key,), value)
    for key, value in arrays:
        for item in value:
            name = ".".join(_dump_key(p) for p in path + (key,))
            _dump_table(lines, path + (key,), item, header="[[" + name + "]]")


def _is_table(value: t.Any) -> bool:
    return isinstance(value, t.Mapping)


def _is_table_array(value: t.Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, t.Mapping) for v in value)


def _dump_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _dump_string(key)


def _dump_string(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\u{0:04X}".format(ord(ch)))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dump_value(value: t.Any) -> str:
    """One TOML value; tables inside arrays become inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _dump_string(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, t.Mapping):
        return "{" + ", ".join("{0} = {1}".format(_dump_key(k), dump_value(v)) for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dump_value(v) for v in value) + "]"
    if value is None:
        raise TomlNullError("the value")
    raise TypeError("cannot write {0!r} as TOML".format(value))
