# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_yaml: the stdlib reader agrees with PyYAML on what nvidia-ctk writes, and refuses the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _yaml

SPECS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "cdi").glob("*.yaml"))

CASES = {
    "scalars": "a: 1\nb: -2\nc: 1.5\nd: true\ne: null\nf: ~\ng: '0'\nh: \"x\\ty\"\ni: plain text\nj: 0x1F\nk: 1e3\n",
    "quotes": "a: 'it''s'\nb: \"say \\\"hi\\\" \\u00e9\"\nc: \"\"\nd: ''\ne: 'a # not a comment'\nf: x # comment\n",
    "nesting": "a:\n  b:\n    - c: 1\n      d: [x, y]\n    - e: {}\n  f: []\n",
    "v2 sequences": "top:\n- one\n- two:\n    three: 3\n- - nested\n  - list\n",
    "empty items": "a:\n  -\n  - 1\nb:\n",
    "document marker": "---\n# comment\nkey: value\n...\n",
    "blocks": "lit: |\n  line one\n    indented\n  line two\nkeep: |+\n  x\n\nfold: >-\n  folded\n  text\n",
    "json flow": 'a: {"b": [1, 2], "c": "d"}\n',
}


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_reader_agrees_with_pyyaml_on_real_nvidia_ctk_output(path: Path) -> None:
    text = path.read_text()
    assert _yaml.parse(text) == yaml.safe_load(text)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reader_agrees_with_pyyaml(name: str) -> None:
    assert _yaml.parse(CASES[name]) == yaml.safe_load(CASES[name])


@pytest.mark.parametrize("text", [
    "a: &anchor 1\nb: *anchor\n",
    "a: !!str 1\n",
    "a: 1\n---\nb: 2\n",
    "a: [x, [y]]\n",
    "a: 'unterminated\n",
    "a:\n\t- tab\n",
    "a: 1\na: 2\n",
])
def test_what_it_cannot_read_is_an_error_never_a_guess(text: str) -> None:
    with pytest.raises(_yaml.YamlError):
        _yaml.parse(text)


def test_loads_prefers_pyyaml_and_maps_its_errors() -> None:
    with pytest.raises(_yaml.YamlError):
        _yaml.loads("a: [unclosed\n")
