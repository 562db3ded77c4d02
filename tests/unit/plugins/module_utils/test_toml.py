# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_toml: our reader agrees with tomllib, the writer round-trips, and edits keep every other byte."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _toml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"
SCENARIO_FILES = Path(__file__).resolve().parents[4] / "extensions" / "molecule" / "container_runtime" / "files"

REAL_FILES = sorted(FIXTURES.glob("*.toml")) + sorted(SCENARIO_FILES.glob("*.toml"))

TRICKY = {
    "strings": r'''
basic = "tab\there \"quoted\" \\ \u00e9 \U0001F600"
literal = 'C:\path\to'
multi = """
first
  second \
    joined"""
quotes = """one "" two""""
empty = ""
'''
    + "multi_literal = '''\nraw \\n kept\n'''\n",
    "numbers": """
ints = [0, +1, -17, 1_000, 0xDEAD_beef, 0o755, 0b1010]
floats = [1.5, -0.25, 5e+22, 1e06, -2E-2, 6.626e-34, 224_617.445_991, inf, -inf]
""",
    "dates": """
odt = 1979-05-27T07:32:00Z
odt2 = 1979-05-27T00:32:00.999999-07:00
ldt = 1979-05-27T07:32:00
ld = 1979-05-27
lt = 07:32:00.5
spaced = 1979-05-27 07:32:00Z
""",
    "tables": """
# comment
top = 1 # trailing
a.b.c = 1
a.b.d = "x"
"quoted key" = true
'' = "empty key"
[x.y]
z = [ [1, 2], ["a", 'b'], [], { inline = { deep = 1 } } ]
[x]
w = 2
[[products]]
name = "Hammer"
[[products]]
name = "Nail"
[products.details]
sku = 284758393
[[products.variants]]
color = "gray"
""",
    "arrays": """
multi = [
  "one", # first
  "two",   # second, trailing comma next
]
nested = [[1], [[2]]]
mixed_tables = [{a = 1}, {b.c = 2}]
""",
}

INVALID = [
    "a = 1\na = 2",  # duplicate key
    "[t]\n[t]",  # table twice
    'a = "unterminated',
    "a = 01",  # leading zero
    "a = [1 2]",
    "[a]\nb = 1\n[a.b]",  # b is a value
    "a = { b = 1, b = 2 }",
    "a.b = 1\n[a]\nb = 2",
    "= 1",
    'a = "bad \\q escape"',
    "a = 1 b = 2",
    "a = 1979-13-01",
    "a = true_",
    "x = [1,]\n[[x]]",  # extend a static array
]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_reader_agrees_with_tomllib_on_real_configs(path: Path) -> None:
    text = path.read_text()
    assert _toml.parse(text) == tomllib.loads(text)


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_reader_agrees_with_tomllib_on_the_tricky_parts(name: str) -> None:
    text = TRICKY[name]
    assert _toml.parse(text) == tomllib.loads(text)


@pytest.mark.parametrize("text", INVALID)
def test_reader_refuses_what_tomllib_refuses(text: str) -> None:
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    with pytest.raises(_toml.TomlError, match=r"line \d+, column \d+"):
        _toml.parse(text)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_writer_round_trips_real_configs(path: Path) -> None:
    data = tomllib.loads(path.read_text())
    assert tomllib.loads(_toml.dumps(data)) == data


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_writer_round_trips_the_tricky_parts(name: str) -> None:
    data = tomllib.loads(TRICKY[name])
    assert tomllib.loads(_toml.dumps(data)) == data


def test_writer_keeps_empty_tables_and_quotes_keys() -> None:
    data = {"version": 2, "plugins": {"io.containerd.grpc.v1.cri": {"containerd": {"runtimes": {"nvidia": {}}}}}}
    text = _toml.dumps(data)
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in text
    assert tomllib.loads(text) == data


def test_loads_reports_errors_as_toml_errors() -> None:
    with pytest.raises(_toml.TomlError):
        _toml.loads("a = ")


IMPORT = "/etc/containerd/conf.d/99-nvidia.toml"


def _inserted(before: str, after: str) -> str:
    """What was added, checking that nothing else moved."""
    for start in range(len(before) + 1):
        if before[:start] != after[:start]:
            start -= 1
            break
    added = len(after) - len(before)
    assert after[:start] + after[start + added :] == before
    return after[start : start + added]


@pytest.mark.parametrize(
    "before, inserted",
    [
        ('version = 2\nimports = ["/a.toml"]\n', ', "{0}"'.format(IMPORT)),
        ("version = 2\nimports = []\n", '"{0}"'.format(IMPORT)),
        ("version = 2\nimports = [ ]\n", '"{0}"'.format(IMPORT)),
        ('imports = [\n  "/a.toml",  # first\n  "/b.toml"  # second\n]\nversion = 2\n', ', "{0}"'.format(IMPORT)),
        ('imports = [\n  "/a.toml",\n]\n', ' "{0}"'.format(IMPORT)),
        ("imports = ['/a.toml'] # trailing\n[plugins]\n", ', "{0}"'.format(IMPORT)),
    ],
)
def test_import_is_added_inside_the_existing_array_only(before: str, inserted: str) -> None:
    after = _toml.add_to_top_level_array(before, "imports", IMPORT, after="version")
    assert _inserted(before, after) == inserted
    assert tomllib.loads(after)["imports"][-1] == IMPORT


@pytest.mark.parametrize(
    "before, expected",
    [
        ("version = 2\n\n[plugins]\n  x = 1\n", 'version = 2\nimports = ["{0}"]\n\n[plugins]\n  x = 1\n'),
        ("# header\nversion = 3 # v3\nroot = '/x'\n", "# header\nversion = 3 # v3\nimports = [\"{0}\"]\nroot = '/x'\n"),
        ("version = 2", 'version = 2\nimports = ["{0}"]\n'),
        ("[plugins]\nx = 1\n", 'imports = ["{0}"]\n[plugins]\nx = 1\n'),
        ("", 'imports = ["{0}"]\n'),
    ],
)
def test_missing_imports_becomes_one_line_after_version(before: str, expected: str) -> None:
    assert _toml.add_to_top_level_array(before, "imports", IMPORT, after="version") == expected.format(IMPORT)


def test_table_lookalikes_inside_strings_do_not_end_the_top_level() -> None:
    before = 'note = """\n[not a table]\n"""\nversion = 2\n[real]\n'
    after = _toml.add_to_top_level_array(before, "imports", IMPORT, after="version")
    assert tomllib.loads(after)["imports"] == [IMPORT]
    assert "real" in tomllib.loads(after)


def test_imports_that_is_not_an_array_is_refused() -> None:
    with pytest.raises(_toml.TomlError, match="not an array"):
        _toml.add_to_top_level_array('imports = "/a.toml"\n', "imports", IMPORT)


def test_a_file_that_is_not_toml_is_never_edited() -> None:
    with pytest.raises(_toml.TomlError):
        _toml.add_to_top_level_array("version = 2\n[broken\n", "imports", IMPORT)


def test_top_level_keys_stop_at_the_first_table() -> None:
    keys = _toml.top_level_keys("version = 2\na.b = [\n 1,\n]\n[t]\nc = 1\n")
    assert [k.key for k in keys] == [("version",), ("a", "b")]


# --- None: TOML has no null --------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, key",
    [
        ({"a": None}, "a"),
        ({"plugins": {"io.containerd.grpc.v1.cri": {"sandbox_image": None}}}, 'plugins."io.containerd.grpc.v1.cri".sandbox_image'),
        ({"t": {"list": [1, None]}}, "t.list[1]"),
        ({"t": [{"ok": 1}, {"inner": {"x": None}}]}, "t[1].inner.x"),
        ({"nested": [[1], [2, None]]}, "nested[1][1]"),
        ({"quoted key": {"": None}}, '"quoted key".""'),
    ],
)
def test_writer_refuses_none_naming_the_dotted_key(data: dict, key: str) -> None:
    # Leaving the key out would keep whatever a merged-over file sets, so it is an error.
    with pytest.raises(_toml.TomlNullError) as caught:
        _toml.dumps(data)
    assert caught.value.key == key
    assert str(caught.value).startswith(key + " is null, and TOML has no null")
    assert "give it a value, or remove the key" in str(caught.value)
    assert isinstance(caught.value, _toml.TomlError) and isinstance(caught.value, ValueError)


def test_dump_value_refuses_none_as_a_toml_error() -> None:
    with pytest.raises(_toml.TomlNullError):
        _toml.dump_value(None)


# --- regressions found by the differential test (test_toml_differential.py) ------------------


@pytest.mark.parametrize(
    "text",
    [
        'a = """\r\none\r\ntwo\r\n"""\r\n',  # CRLF file, multi-line basic string
        "a = '''\r\none\r\ntwo'''\r\n",  # ... and multi-line literal string
        '"b"=""\n"a"={"b"="", "a"="""\n\r\n"""}',  # the document hypothesis found: CRLF inside an LF file
    ],
)
def test_multi_line_strings_normalize_crlf_like_tomllib(text: str) -> None:
    # TOML lets a reader normalize newlines in multi-line strings; tomllib gives "\n", so we must too.
    assert _toml.parse(text) == tomllib.loads(text)
    assert not any("\r" in v for v in _strings(_toml.parse(text)))


def _strings(value: object) -> list:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return [value] if isinstance(value, str) else []
