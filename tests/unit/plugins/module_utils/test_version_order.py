# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_version_order: hand-picked orderings, and differential tests against the real
dpkg (libdpkg, and the dpkg binary) and the real rpm on generated version pairs.

The generators use fixed seeds, so a disagreement reproduces; the assertion
message lists the first disagreeing pairs.
"""

from __future__ import annotations

import concurrent.futures
import random
import shutil
import subprocess
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _version_order as vo

HERE = Path(__file__).resolve().parent
PAIRS = 100_000
# The dpkg binary costs about 1.4 ms a call: enough pairs to show the harness
# runs its code, few enough to stay a second or two on two cores.
BINARY_PAIRS = 2_000

Pair = t.Tuple[str, str]


# --- hand-picked orderings ---------------------------------------------------------


@pytest.mark.parametrize(
    "lower,higher",
    [
        ("1.0~rc1", "1.0"),
        ("1.0~~", "1.0~"),
        ("1.0~", "1.0"),
        ("1.0", "1.0a"),
        ("1.0a", "1.0+"),
        ("1.0", "1.0+dfsg"),
        ("1.0", "1.0.1"),
        ("2.0", "1:0.9"),
        ("1.0-1", "1:0.1-1"),
        ("550.127.05-1~deb12u1", "550.127.05-1"),
        ("535.216.03-2~bpo12+1", "535.216.03-2"),
        ("535.54.03-1", "535.216.03-1"),
        ("535.216.03-2", "535.261.03-1"),
        ("1.2~a", "1.2~b"),
        ("1.18.0~rc.1-1", "1.18.0-1"),
        ("7.6-0", "7.6p2-4"),
        ("1.0-1", "1.0-1.1"),
        ("1.0-1", "1.0-1+b1"),
        ("1.0-1~", "1.0-1"),
        ("9", "10"),
        ("1.99999999999999999999", "1.100000000000000000000"),
    ],
)
def test_dpkg_known_order(lower, higher):
    assert vo.dpkg_compare(lower, higher) == -1
    assert vo.dpkg_compare(higher, lower) == 1
    assert vo.dpkg_compare(lower, lower) == 0


@pytest.mark.parametrize(
    "one,other",
    [
        ("1.0", "1.00"),
        ("1.0", "1.0-0"),
        ("0:1.0", "1.0"),
        ("00:1", "1"),
        ("1.0", " 1.0\t"),
        ("007", "7"),
        ("1.0-0", "1.0-00"),
    ],
)
def test_dpkg_equal_by_value(one, other):
    assert vo.dpkg_compare(one, other) == 0
    assert vo.dpkg_compare(other, one) == 0


@pytest.mark.parametrize(
    "version",
    [
        "",
        "  ",
        "1:",
        ":1",
        "a:1",
        "1a:2",
        "-1:2",
        "2147483648:1",
        "1.0-",
        "-1",
        "1:-1",
        "1 0",
        "1.0\u00e9",
        "1\x000",
    ],
)
def test_dpkg_refuses_what_dpkg_refuses(version):
    with pytest.raises(ValueError):
        vo.dpkg_compare(version, "1.0")


def test_dpkg_parse_splits_at_the_first_colon_and_the_last_hyphen():
    assert vo.dpkg_parse("1:2:3-4-5") == (1, "2:3-4", "5")
    assert vo.dpkg_parse("2147483647:1") == (2147483647, "1", "")
    assert vo.dpkg_parse("+1:1") == (1, "1", "")
    # dpkg only warns about these and compares them anyway.
    assert vo.dpkg_parse("x1") == (0, "x1", "")
    assert vo.dpkg_compare("x", "1") == 1


@pytest.mark.parametrize(
    "lower,higher",
    [
        ("1.0~rc1", "1.0"),
        ("1.0", "1.0^post"),
        ("1.0~rc1", "1.0~rc1^post"),
        ("1.0^", "1.0.1"),
        ("1.0", "1.0.1"),
        ("1.a", "1.1"),
        ("1.0a", "1.0.1"),
        ("2.0", "1:0.9"),
        ("3:580.82.07-1.el9", "3:580.95.05-1.el9"),
        ("580.95.05-1.el9", "1:535.54.03-1.el9"),
        ("1.0", "1.0-1"),
        ("1.0-1", "1.0-1.el9"),
        ("1.0-9", "1.0-10"),
        ("A", "a"),
    ],
)
def test_rpm_known_order(lower, higher):
    assert vo.rpm_compare(lower, higher) == -1
    assert vo.rpm_compare(higher, lower) == 1
    assert vo.rpm_compare(lower, lower) == 0


@pytest.mark.parametrize(
    "one,other",
    [
        ("1.0", "1.00"),
        ("1.0", "1_0"),
        ("1.0", "1..0"),
        ("0:1.0", "1.0"),
        (":1.0", "1.0"),
        ("1.01", "1.1"),
    ],
)
def test_rpm_equal_by_value(one, other):
    assert vo.rpm_compare(one, other) == 0
    assert vo.rpm_compare(other, one) == 0


def test_rpm_refuses_an_empty_version():
    with pytest.raises(ValueError):
        vo.rpm_compare("", "1.0")


def test_sort_keys_order_newest_last():
    debian = ["535.216.03-2~bpo12+1", "1:470.256.02-1", "535.261.03-1", "535.54.03-1", "535.216.03-2"]
    assert sorted(debian, key=vo.dpkg_key) == ["535.54.03-1", "535.216.03-2~bpo12+1", "535.216.03-2", "535.261.03-1", "1:470.256.02-1"]
    rpm = ["3:580.95.05-1.el9", "3:580.82.07-1.el9", "3:580.95.05-1.el9_4", "2:595.1.1-1.el9"]
    assert sorted(rpm, key=vo.rpm_key, reverse=True) == ["3:580.95.05-1.el9_4", "3:580.95.05-1.el9", "3:580.82.07-1.el9", "2:595.1.1-1.el9"]


# --- generated pairs ---------------------------------------------------------------


def _number(rng: random.Random) -> str:
    if rng.random() < 0.8:
        return rng.choice(("0", "1", "2", "3", "9", "10", "00", "01", "007", "100", "127", "535", "550"))
    # Longer than any machine integer: both tools compare digit runs by value.
    return str(rng.randrange(10 ** rng.randint(2, 30)))


def _part(rng: random.Random, letters: str, separators: str, length: int) -> str:
    tokens = []
    for _token in range(rng.randint(0, length)):
        roll = rng.random()
        if roll < 0.45:
            tokens.append(_number(rng))
        elif roll < 0.72:
            tokens.append(rng.choice(separators))
        elif roll < 0.9:
            tokens.append("".join(rng.choice(letters) for _letter in range(rng.randint(1, 3))))
        else:
            tokens.append(rng.choice(("~", "~~")))
    return "".join(tokens)


def _epoch(rng: random.Random) -> str:
    return rng.choice(("", "", "", "", "", "0:", "1:", "2:", "00:", "01:", "10:", "3:"))


def _mutate(rng: random.Random, version: str, alphabet: str, specials: t.Sequence[str]) -> str:
    """A near neighbour: most interesting pairs differ in one place."""
    roll = rng.random()
    if roll < 0.12 or not version:
        return version
    if roll < 0.30:
        return version + rng.choice(specials)
    if roll < 0.40:
        return version[:-1]
    if roll < 0.60:
        at = rng.randrange(len(version))
        return version[:at] + rng.choice(alphabet) + version[at + 1 :]
    if roll < 0.70:
        at = rng.randrange(len(version) + 1)
        return version[:at] + rng.choice(alphabet) + version[at:]
    if roll < 0.82:
        # Equal by value: one number zero-padded.
        digits = [i for i, char in enumerate(version) if char.isdigit() and (i == 0 or not version[i - 1].isdigit())]
        if digits:
            at = rng.choice(digits)
            return version[:at] + "0" + version[at:]
        return version
    if roll < 0.90:
        # An explicit zero epoch (equal by value), or the epoch dropped.
        return "0:" + version if ":" not in version else version.split(":", 1)[1]
    return version.replace(".", rng.choice(alphabet.replace(".", "") or "."), 1)


DPKG_LETTERS = "abzABZ"
DPKG_ALPHABET = "0123456789abzAZ~+.-:"
DPKG_ODD = (
    "",
    " ",
    "1:",
    ":1",
    "a:1",
    "1.0-",
    "1:-1",
    " 1.0",
    "1.0 ",
    "1 .0",
    "-0:1",
    "+1:1",
    "99999999999:1",
    "2147483647:1",
    "1.0:2",
    "x",
    "~",
    "1.0\t",
    "1-2-3",
    "1:2:3",
)


def dpkg_version(rng: random.Random) -> str:
    if rng.random() < 0.02:
        return rng.choice(DPKG_ODD)
    upstream = _part(rng, DPKG_LETTERS, ".+~-" if rng.random() < 0.3 else ".+~", 6)
    if rng.random() < 0.9:
        upstream = _number(rng) + upstream
    version = _epoch(rng) + upstream
    if rng.random() < 0.55:
        # Mostly a real revision; "0" and "00" equal none at all.
        version += "-" + (_part(rng, DPKG_LETTERS, ".+~", 4) or rng.choice(("0", "00", "1")))
    return version


def dpkg_pairs(count: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    pairs = []
    for _pair in range(count):
        a = dpkg_version(rng)
        b = dpkg_version(rng) if rng.random() < 0.35 else _mutate(rng, a, DPKG_ALPHABET, ("~", "+", ".0", "-0", "0", "a", "~~", "-1"))
        pairs.append((a, b) if rng.random() < 0.5 else (b, a))
    return pairs


RPM_LETTERS = "abzAZ"
RPM_ALPHABET = "0123456789abzAZ~^._+-:"
RPM_ODD = ("1:", ":1", "a:1", "-1", "1-", "-", ":", "1:-", "^", "~", "1.0^", "1.0~", "01:1", "1\u00e9", "1..0", "_")


def rpm_version(rng: random.Random) -> str:
    if rng.random() < 0.02:
        return rng.choice(RPM_ODD)
    upstream = _part(rng, RPM_LETTERS, "._+^" if rng.random() < 0.4 else "._+", 6)
    if rng.random() < 0.85:
        upstream = _number(rng) + upstream
    version = _epoch(rng) + upstream
    if rng.random() < 0.6:
        version += "-" + (_part(rng, RPM_LETTERS, "._+^", 4) or rng.choice(("", "0", "1")))
    return version or "0"


def rpm_pairs(count: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    pairs = []
    for _pair in range(count):
        a = rpm_version(rng)
        b = rpm_version(rng) if rng.random() < 0.35 else _mutate(rng, a, RPM_ALPHABET, ("~", "^", ".0", "-0", "0", "a", "_", "-1"))
        pairs.append((a, b or "0") if rng.random() < 0.5 else (b or "0", a))
    return pairs


def ours(compare: t.Callable[[str, str], int], pairs: list[Pair]) -> list[str]:
    """Our answers in the references' notation: -1/0/1, E for a refused version;
    anything else (a crash) is written out so it shows as a disagreement."""
    answers = []
    for a, b in pairs:
        try:
            answers.append(str(compare(a, b)))
        except ValueError:
            answers.append("E")
        except Exception as err:  # pylint: disable=broad-except  # a crash is a finding, not a test error
            answers.append("crash: {0!r}".format(err))
    return answers


def disagreements(pairs: list[Pair], mine: list[str], theirs: list[str]) -> list[str]:
    assert len(theirs) == len(pairs), "the reference answered {0} of {1} pairs".format(len(theirs), len(pairs))
    return ["{0!r} vs {1!r}: ours {2}, reference {3}".format(a, b, m, r) for (a, b), m, r in zip(pairs, mine, theirs) if m != r]


def _no_disagreement(what: str, pairs: list[Pair], found: list[str]) -> None:
    assert not found, "{0}: {1} of {2} pairs disagree, e.g.\n{3}".format(what, len(found), len(pairs), "\n".join(found[:15]))


# --- dpkg ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dpkg_reference(tmp_path_factory) -> Path:
    """The C harness, built against libdpkg for this run."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        pytest.skip("no C compiler: install gcc (tests/harness/bootstrap-host.sh)")
    if not Path("/usr/include/dpkg/version.h").is_file():
        pytest.skip("no libdpkg headers: install libdpkg-dev (tests/harness/bootstrap-host.sh)")
    binary = tmp_path_factory.mktemp("dpkg") / "dpkg_vercmp"
    subprocess.run([compiler, "-O2", "-o", str(binary), str(HERE / "dpkg_vercmp.c"), "-ldpkg"], check=True, capture_output=True)
    return binary


def libdpkg(harness: Path, pairs: list[Pair]) -> list[str]:
    stdin = "".join(a + "\n" + b + "\n" for a, b in pairs)
    return subprocess.run([str(harness)], input=stdin, check=True, capture_output=True, text=True).stdout.split()


OPERATOR = {"-1": "lt", "0": "eq", "1": "gt", "E": "eq"}


def dpkg_binary_agrees(pair: Pair, answer: str) -> bool:
    """Whether dpkg --compare-versions confirms the harness's answer: exit 0 for
    the relation the answer names (lt holds exactly when a sorts before b), or
    exit 2 (bad syntax) for E. One call a pair checks the whole answer."""
    a, b = pair
    rc = subprocess.run(["dpkg", "--compare-versions", a, OPERATOR[answer], b], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return rc == (2 if answer == "E" else 0)


def test_dpkg_harness_is_the_dpkg_binary(dpkg_reference):
    if not shutil.which("dpkg"):
        pytest.skip("no dpkg binary here")
    # The binary reads an empty version (and "<unknown>") as "no version", and
    # an argument starting with '-' as an option; the harness is about the rest.
    pairs = [(a, b) for a, b in dpkg_pairs(BINARY_PAIRS * 2, seed=2202) if a.strip() and b.strip() and not a.startswith("-") and not b.startswith("-")][
        :BINARY_PAIRS
    ]
    harness = libdpkg(dpkg_reference, pairs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        agree = list(pool.map(dpkg_binary_agrees, pairs, harness))
    found = [
        "{0!r} vs {1!r}: the harness says {2}, dpkg --compare-versions {3} does not hold".format(
            a, b, answer, "(bad syntax)" if answer == "E" else OPERATOR[answer]
        )
        for (a, b), answer, same in zip(pairs, harness, agree)
        if not same
    ]
    _no_disagreement("libdpkg harness vs dpkg --compare-versions", pairs, found)
    assert len(pairs) == BINARY_PAIRS and {"-1", "0", "1", "E"} <= set(harness)


def test_dpkg_order_is_dpkg(dpkg_reference):
    pairs = dpkg_pairs(PAIRS, seed=22)
    reference = libdpkg(dpkg_reference, pairs)
    _no_disagreement("dpkg_compare vs libdpkg", pairs, disagreements(pairs, ours(vo.dpkg_compare, pairs), reference))
    # The pairs must exercise every answer, and mostly valid versions.
    assert reference.count("0") > PAIRS // 20 and reference.count("E") < PAIRS // 10


# --- rpm -----------------------------------------------------------------------------

# rpm 4.18's rpm.vercmp() parses both strings as [epoch:]version[-release]
# (rpmverParse) and compares them with rpmverCmp; it raises on an empty one.
RPM_LUA = """
local input = assert(io.open(rpm.expand("%{_gpufleet_pairs}"), "r"))
local output = assert(io.open(rpm.expand("%{_gpufleet_answers}"), "w"))
while true do
  local a = input:read("l")
  if a == nil then break end
  local b = input:read("l")
  local ok, rc = pcall(rpm.vercmp, a, b)
  output:write(ok and tostring(rc) or "E", "\\n")
end
output:close()
input:close()
"""


def test_rpm_order_is_rpm(tmp_path):
    if not shutil.which("rpm"):
        pytest.skip("no rpm here: install rpm (tests/harness/bootstrap-host.sh)")
    pairs = rpm_pairs(PAIRS, seed=23)
    (tmp_path / "pairs").write_text("".join(a + "\n" + b + "\n" for a, b in pairs), encoding="utf-8")
    (tmp_path / "vercmp.lua").write_text(RPM_LUA, encoding="utf-8")
    # The macros vercmp.lua reads its input and output paths from.
    defines = {"_gpufleet_pairs": tmp_path / "pairs", "_gpufleet_answers": tmp_path / "answers"}
    macros = [word for name, value in defines.items() for word in ("--define", "{0} {1}".format(name, value))]
    subprocess.run(["rpm", *macros, "--eval", "%{{lua: dofile('{0}')}}".format(tmp_path / "vercmp.lua")], check=True, capture_output=True)
    reference = (tmp_path / "answers").read_text(encoding="utf-8").split()
    _no_disagreement("rpm_compare vs rpm.vercmp", pairs, disagreements(pairs, ours(vo.rpm_compare, pairs), reference))
    # Without '-' and a leading "N:", rpm.vercmp is rpmvercmp on the whole strings.
    plain = [i for i, (a, b) in enumerate(pairs) if "-" not in a + b and ":" not in a + b]
    plain_pairs = [pairs[i] for i in plain]
    _no_disagreement("rpm_vercmp vs rpm.vercmp", plain_pairs, disagreements(plain_pairs, ours(vo.rpm_vercmp, plain_pairs), [reference[i] for i in plain]))
    assert reference.count("0") > PAIRS // 20 and len(plain) > PAIRS // 10
