# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_toml against the standard library's tomllib, on documents and data hypothesis makes up.

- Reading: every generated document is read by our reader (``_toml.parse``,
  what targets without tomllib use; ``_toml.loads`` is tomllib itself where
  it exists) and by tomllib. Both must give the same data, or both must
  refuse it, ours with TomlError and never with another exception.
- Writing: generated data written by ``_toml.dumps`` must read back equal.

The documents are built from TOML's grammar (every kind of key, string,
number, date and time, arrays, inline tables, table headers, comments and
whitespace) and then, for some, bent by a random edit, so that both the
happy path and the error paths are walked. Runs are derandomized and keep
no example database, so CI sees the same examples every time.
"""

from __future__ import annotations

import datetime
import math
import tomllib
import typing as t

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _toml

# Fixed budgets: about 9 s for this file (7.5 s of CPU) on the 2-core test machine. 700 documents are
# enough to find the CRLF bug fixed in _toml (test_toml.py keeps its regression test); an
# exploratory run with far more examples found nothing further.
READ_EXAMPLES = 700
WRITE_EXAMPLES = 200
SETTINGS = dict(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


# --- equality that sees what == does not ------------------------------------------------------


def same(a: t.Any, b: t.Any, ordered: bool = True) -> bool:
    """Equal data: NaN equals NaN, -0.0 differs from 0.0, 1 from 1.0 and True, offsets must match.

    `ordered`: tables must also list their keys in the same order (two readers
    of one document should; a writer may reorder).
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        keys_match = list(a) == list(b) if ordered else set(a) == set(b)
        return keys_match and all(same(a[k], b[k], ordered) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y, ordered) for x, y in zip(a, b))
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, (datetime.datetime, datetime.time)):
        return (
            a == b if a.tzinfo is None and b.tzinfo is None else (a.tzinfo is not None and b.tzinfo is not None and a == b and a.utcoffset() == b.utcoffset())
        )
    return bool(a == b)


def test_same_is_strict_where_it_must_be() -> None:
    assert same({"a": [float("nan")]}, {"a": [float("nan")]})
    assert not same(1, 1.0) and not same(1, True) and not same(0.0, -0.0)
    utc = datetime.datetime(2000, 1, 1, 12, tzinfo=datetime.UTC)
    plus1 = datetime.datetime(2000, 1, 1, 13, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert utc == plus1 and not same(utc, plus1)
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1}) and same({"a": 1, "b": 2}, {"b": 2, "a": 1}, ordered=False)


# --- documents as text --------------------------------------------------------------------------

# Few names, so that keys collide and redefinition rules get exercised; some look like other values.
NAMES = ["a", "b", "c", "key", "x-1", "_", "1", "0x1", "true", "inf", "1979-05-27", "é", "", "a.b", " "]
BARE_OK = {n for n in NAMES if n and all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in n)}
SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
INTERESTING = "aZ09 _-.#=[]{},'\"\\\t\n\r\b\f\x00\x1f\x7fé€😀"


def chars(exclude: str = "") -> t.Any:
    """Characters TOML treats specially (and some it refuses), or any at all, less `exclude`."""
    return st.one_of(st.sampled_from([c for c in INTERESTING if c not in exclude]), st.characters(codec="utf-8", exclude_characters=exclude))


# Strategies are built once: building them per draw costs more than drawing from them.
ANY_TEXT = st.text(chars(), max_size=8)
LITERAL_TEXT = st.text(chars("'\n\r"), max_size=8)
ML_LITERAL_TEXT = st.text(chars("'"), max_size=6)
COMMENT_TEXT = st.text(chars("\n\r"), max_size=10)
SPACE = st.sampled_from(["", " ", "  ", "\t"])
ARRAY_SPACE = st.sampled_from(["", " ", "\n", "\r\n", " # note\n", "\n  # x [ ] = \n "])
SIGN = st.sampled_from(["", "", "+", "-"])


def _escaped(draw: t.Any, text: str) -> str:
    """`text` as basic-string content, each character written plainly or as one of its escapes."""
    out = []
    for ch in text:
        forms = []
        if ch not in '"\\' and (ch == "\t" or (ord(ch) >= 0x20 and ord(ch) != 0x7F)):
            forms.append(ch)
        if ch in SHORT_ESCAPES:
            forms.append(SHORT_ESCAPES[ch])
        forms.append("\\u{0:04x}".format(ord(ch)) if ord(ch) <= 0xFFFF else "\\U{0:08X}".format(ord(ch)))
        forms.append("\\U{0:08x}".format(ord(ch)))
        out.append(forms[draw(st.integers(0, len(forms) - 1))])
    return "".join(out)


@st.composite
def basic_string(draw: t.Any) -> str:
    return '"' + _escaped(draw, draw(ANY_TEXT)) + '"'


LITERAL_STRING = LITERAL_TEXT.map(lambda s: "'" + s + "'")
ML_BASIC_PIECE = st.one_of(
    basic_string().map(lambda s: s[1:-1]),  # escaped content is fine here too
    st.sampled_from(["\n", "\r\n", '"', '""', "\\\n", "\\  \n   \n  ", "\\\r\n\t", "'''", "\t"]),
)
ML_LITERAL_PIECE = st.one_of(ML_LITERAL_TEXT, st.sampled_from(["\n", "\r\n", "'", "''", '"""', "\\n", "\\"]))
OPENING_NEWLINE = st.sampled_from(["", "\n", "\r\n"])
ML_BASIC_STRING = st.builds(
    lambda nl, parts, end: '"""' + nl + "".join(parts) + end, OPENING_NEWLINE, st.lists(ML_BASIC_PIECE, max_size=4), st.sampled_from(['"""', '""""', '"""""'])
)
ML_LITERAL_STRING = st.builds(
    lambda nl, parts, end: "'''" + nl + "".join(parts) + end, OPENING_NEWLINE, st.lists(ML_LITERAL_PIECE, max_size=4), st.sampled_from(["'''", "''''", "'''''"])
)


@st.composite
def simple_key(draw: t.Any) -> str:
    name = draw(st.sampled_from(NAMES))
    forms = ['"' + _escaped(draw, name) + '"']
    if "'" not in name:
        forms.append("'" + name + "'")
    if name in BARE_OK:
        forms += [name, name]
    return forms[draw(st.integers(0, len(forms) - 1))]


KEY = st.builds(
    lambda first, rest: first + "".join(d + k for d, k in rest),
    simple_key(),
    st.lists(st.tuples(st.sampled_from([".", ".", " . ", "\t."]), simple_key()), max_size=2),
)


def _underscored(draw: t.Any, digits: str) -> str:
    """Digits with underscores between some of them (never at the ends, never doubled)."""
    mask = draw(st.integers(0, 2 ** (len(digits) - 1) - 1)) if draw(st.booleans()) else 0
    return digits[0] + "".join(("_" if mask >> i & 1 else "") + d for i, d in enumerate(digits[1:]))


@st.composite
def integer(draw: t.Any) -> str:
    value = draw(st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-1000, 1000)))
    base = draw(st.sampled_from([10, 10, 16, 8, 2]))
    if base == 10:
        sign = "-" if value < 0 else draw(st.sampled_from(["", "", "+"]))
        return sign + _underscored(draw, str(abs(value)))
    digits = format(abs(value), {16: "x", 8: "o", 2: "b"}[base])
    if base == 16 and draw(st.booleans()):
        digits = digits.upper()
    return "0" + {16: "x", 8: "o", 2: "b"}[base] + _underscored(draw, digits)


@st.composite
def floating(draw: t.Any) -> str:
    if draw(st.integers(0, 5)) == 0:
        return draw(SIGN) + draw(st.sampled_from(["inf", "nan"]))
    text = draw(SIGN) + _underscored(draw, str(draw(st.integers(0, 10**20))))
    has_frac, has_exp = draw(st.sampled_from([(True, False), (False, True), (True, True)]))
    if has_frac:
        text += "." + _underscored(draw, str(draw(st.integers(0, 10**20))).zfill(draw(st.integers(1, 3))))
    if has_exp:
        text += draw(st.sampled_from(["e", "E"])) + draw(SIGN)
        text += _underscored(draw, str(draw(st.integers(0, 400))).zfill(draw(st.integers(1, 3))))
    return text


@st.composite
def date_time(draw: t.Any) -> str:
    """Offset and local date-times, dates and times; some are impossible dates (must be refused)."""
    date = "{0:04d}-{1:02d}-{2:02d}".format(draw(st.integers(0, 9999)), draw(st.integers(1, 12)), draw(st.integers(1, 31)))
    clock = "{0:02d}:{1:02d}:{2:02d}".format(draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(st.integers(0, 59)))
    if draw(st.booleans()):
        clock += "." + str(draw(st.integers(0, 10**9 - 1))).zfill(draw(st.integers(1, 9)))
    kind = draw(st.sampled_from(["offset", "local", "date", "time"]))
    if kind == "date":
        return date
    if kind == "time":
        return clock
    text = date + draw(st.sampled_from(["T", "t", " "])) + clock
    if kind == "offset":
        hours, minutes = draw(st.integers(0, 23)), draw(st.integers(0, 59))
        text += draw(st.sampled_from(["Z", "z", "+{0:02d}:{1:02d}".format(hours, minutes), "-{0:02d}:{1:02d}".format(hours, minutes)]))
    return text


SCALAR = st.one_of(
    basic_string(),
    LITERAL_STRING,
    ML_BASIC_STRING,
    ML_LITERAL_STRING,
    integer(),
    floating(),
    st.sampled_from(["true", "false"]),
    date_time(),
)


@st.composite
def array(draw: t.Any, items: t.Any) -> str:
    values = draw(st.lists(items, max_size=4))
    out = "[" + draw(ARRAY_SPACE)
    for i, item in enumerate(values):
        out += item + draw(ARRAY_SPACE)
        if i < len(values) - 1 or draw(st.booleans()):
            out += "," + draw(ARRAY_SPACE)
    return out + "]"


@st.composite
def inline_table(draw: t.Any, items: t.Any) -> str:
    pairs = draw(st.lists(st.tuples(KEY, items), max_size=3))
    body = ", ".join(k + draw(SPACE) + "=" + draw(SPACE) + v for k, v in pairs)
    return "{" + draw(SPACE) + body + draw(SPACE) + "}"


VALUE = st.recursive(SCALAR, lambda items: st.one_of(array(items), inline_table(items)), max_leaves=6)


@st.composite
def statement(draw: t.Any) -> str:
    kind = draw(st.sampled_from(["kv", "kv", "kv", "table", "array_table", "comment", "blank"]))
    if kind == "kv":
        line = draw(KEY) + draw(SPACE) + "=" + draw(SPACE) + draw(VALUE)
    elif kind == "table":
        line = "[" + draw(SPACE) + draw(KEY) + draw(SPACE) + "]"
    elif kind == "array_table":
        line = "[[" + draw(SPACE) + draw(KEY) + draw(SPACE) + "]]"
    elif kind == "comment":
        line = "#" + draw(COMMENT_TEXT)
    else:
        line = ""
    if kind != "comment" and draw(st.booleans()):
        line += draw(SPACE) + "# trailing " + draw(st.sampled_from(["", "=", "[x]", "é"]))
    return draw(SPACE) + line


MUTATION_CHARS = st.sampled_from(list("\"'=[]{},.#\n\r\t \\0123456789aeinftx+-_:TZz") + ["\\u", '"""', "'''"])


@st.composite
def document(draw: t.Any) -> str:
    lines = draw(st.lists(statement(), max_size=8))
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    text = newline.join(lines) + draw(st.sampled_from(["", newline]))
    # Some documents get a random edit, which makes most of them invalid in interesting places.
    for _edit in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        if not text:
            break
        at = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(MUTATION_CHARS)
        text = {"insert": text[:at] + piece + text[at:], "delete": text[:at] + text[at + 1 :], "replace": text[:at] + piece + text[at + 1 :]}[how]
    return text


def _read_both(text: str) -> None:
    try:
        expected = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        expected = None
    # Shown by --hypothesis-show-statistics: how many documents each side of the diff saw.
    event("tomllib refuses" if expected is None else "tomllib reads")
    if expected is None:
        try:
            got = _toml.parse(text)
        except _toml.TomlError:
            return
        raise AssertionError("tomllib refuses this document, _toml.parse read it as {0!r}".format(got))
    got = _toml.parse(text)  # a TomlError here fails the test: tomllib read it
    assert same(got, expected), "_toml.parse: {0!r}\ntomllib:     {1!r}".format(got, expected)
    # And whatever reads, the top-level statements are found without a crash.
    _toml.top_level_keys(text)


@settings(max_examples=READ_EXAMPLES, **SETTINGS)
@given(document())
def test_reader_agrees_with_tomllib_on_generated_documents(text: str) -> None:
    _read_both(text)


# --- data to write --------------------------------------------------------------------------------

TIMEZONES = st.one_of(
    st.none(), st.just(datetime.UTC), st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: datetime.timezone(datetime.timedelta(minutes=m)))
)
SCALARS = st.one_of(
    st.text(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),  # nan, inf, -0.0 and subnormals included
    st.booleans(),
    st.datetimes(timezones=TIMEZONES),
    st.dates(),
    st.times(),  # TOML local times carry no offset
)
DATA = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=6), children, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=WRITE_EXAMPLES, **SETTINGS)
@given(st.dictionaries(st.text(max_size=6), DATA, max_size=5))
def test_writer_round_trips_through_tomllib(data: dict[str, t.Any]) -> None:
    text = _toml.dumps(data)
    # The writer puts scalars before sub-tables, so only the order of keys may change.
    assert same(tomllib.loads(text), data, ordered=False), text
    assert same(_toml.parse(text), data, ordered=False), text
