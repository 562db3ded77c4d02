# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The Packer example (inventory/examples/packer) and the bake switch in site.yml, checked structurally.

There is no packer binary here and no network for its plugins, so the
template is read by a small HCL reader (blocks, attributes, strings, lists)
and held to what makes a bake work: the Ansible provisioner runs this
collection's site.yml with gpufleet_bake=true, puts the builder into the
group site.yml targets, and finds the group_vars that declare the node.
"""

from __future__ import annotations

import re
import typing as t
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "inventory" / "examples" / "packer"
TEMPLATE = EXAMPLE / "gpu-node.pkr.hcl"
SITE = ROOT / "playbooks" / "site.yml"
ROLES = ROOT / "roles"

STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
BLOCK = re.compile(r'^([A-Za-z_][\w-]*)((?:\s+"[^"]*")*)\s*\{$')
ATTRIBUTE = re.compile(r'^([A-Za-z_][\w-]*|"[^"]+")\s*=\s*(.*)$')


class Block(t.NamedTuple):
    kind: str
    labels: tuple[str, ...]
    attributes: dict[str, str]
    blocks: list["Block"]

    def find(self, kind: str, *labels: str) -> list["Block"]:
        return [b for b in self.blocks if b.kind == kind and b.labels[: len(labels)] == labels]


def _strip_comment(line: str) -> str:
    out, quoted = [], False
    for i, char in enumerate(line):
        if char == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        if not quoted and (char == "#" or line[i : i + 2] == "//"):
            break
        out.append(char)
    return "".join(out).strip()


def _depth(text: str) -> int:
    body = STRING.sub('""', text)
    return sum(body.count(o) - body.count(c) for o, c in ("[]", "{}", "()"))


def parse_hcl(text: str) -> Block:
    """Blocks and attributes of an HCL2 file; attribute values are kept as their source text."""
    root = Block("file", (), {}, [])
    stack = [root]
    lines = iter(_strip_comment(line) for line in text.splitlines())
    for line in lines:
        if not line:
            continue
        if line == "}":
            stack.pop()
            assert stack, "unbalanced braces"
            continue
        block = BLOCK.match(line)
        if block:
            new = Block(block.group(1), tuple(STRING.findall(block.group(2))), {}, [])
            stack[-1].blocks.append(new)
            stack.append(new)
            continue
        attribute = ATTRIBUTE.match(line)
        assert attribute, "not HCL this reader knows: {0!r}".format(line)
        value = attribute.group(2)
        while _depth(value) > 0:  # a list or map over several lines
            value += "\n" + next(lines)
        stack[-1].attributes[attribute.group(1).strip('"')] = value
    assert len(stack) == 1, "unclosed block {0}".format(stack[-1].kind)
    return root


def strings(value: str) -> list[str]:
    return STRING.findall(value)


@pytest.fixture(scope="module")
def template() -> Block:
    return parse_hcl(TEMPLATE.read_text())


@pytest.fixture(scope="module")
def ansible(template: Block) -> dict[str, str]:
    builds = template.find("build")
    assert len(builds) == 1
    provisioners = builds[0].find("provisioner", "ansible")
    assert len(provisioners) == 1, "one Ansible provisioner"
    return provisioners[0].attributes


def variable_default(template: Block, name: str) -> str:
    found = template.find("variable", name)
    assert found and "default" in found[0].attributes, "variable {0} needs a default".format(name)
    return found[0].attributes["default"]


def resolve(value: str) -> Path:
    """A path.root-relative path in the template, as Packer resolves it."""
    text = strings(value)[0] if value.startswith('"') else value
    return Path(text.replace("${path.root}", str(EXAMPLE)).replace("path.root", str(EXAMPLE))).resolve()


def site_group() -> str:
    """The group site.yml's plays target unless gpufleet_gpu_group says otherwise."""
    hosts = {re.search(r"default\('([^']+)'\)", play["hosts"]).group(1) for play in yaml.safe_load(SITE.read_text()) if "hosts" in play}
    assert len(hosts) == 1, hosts
    return hosts.pop()


def test_the_provisioner_runs_this_collections_site_playbook(ansible: dict[str, str]) -> None:
    assert resolve(ansible["playbook_file"]) == SITE.resolve()


def test_the_bake_switch_is_set(ansible: dict[str, str]) -> None:
    args = strings(ansible["extra_arguments"])
    pairs = list(zip(args, args[1:]))
    assert ("--extra-vars", "gpufleet_bake=true") in pairs
    assert not any(value.startswith(("driver_bake", "cdi_bake", "mig_bake", "verify_bake")) for value in args), (
        "the roles' *_bake follow gpufleet_bake; setting them here would override the inventory"
    )


def test_the_builder_joins_the_group_site_yml_targets(template: Block, ansible: dict[str, str]) -> None:
    groups = ansible["groups"]
    assert site_group() in strings(groups)
    inventory = resolve(ansible["inventory_directory"])
    assert inventory == EXAMPLE.resolve(), "group_vars/ must sit next to the generated inventory"
    names = strings(groups) + [strings(variable_default(template, name))[0] for name in re.findall(r"\bvar\.(\w+)", groups)]
    for name in names:
        assert (inventory / "group_vars" / "{0}.yml".format(name)).is_file(), name


def test_every_variable_is_declared(template: Block) -> None:
    used = set(re.findall(r"\bvar\.(\w+)", TEMPLATE.read_text()))
    declared = {b.labels[0] for b in template.find("variable")}
    assert used and used <= declared, used - declared


def test_the_group_vars_can_be_baked_without_a_gpu() -> None:
    """No GPU on the builder: the driver flavour and the MIG layout cannot come from the hardware."""
    common = yaml.safe_load((EXAMPLE / "group_vars" / "gpu_nodes.yml").read_text())
    assert common.get("driver_kernel_module", "auto") != "auto" or common.get("driver_gpu_models")
    assert "gpufleet_bake" not in common, "the template sets it; inventory values would lose to extra vars anyway"
    for path in sorted((EXAMPLE / "group_vars").glob("*.yml")):
        data = yaml.safe_load(path.read_text()) or {}
        if data.get("mig_label"):
            assert data["mig_label"] in data["mig_config"]["mig-configs"], path.name


def test_site_yml_sets_no_role_variable() -> None:
    """Play vars outrank inventory: site.yml must leave every role variable to defaults and inventory."""
    prefixes = tuple("{0}_".format(role.name) for role in ROLES.iterdir() if (role / "defaults").is_dir())

    def variables(entries: list) -> list[str]:
        """Variables set by roles, tasks and blocks (each layer imports its role inside a block)."""
        names: list[str] = []
        for entry in entries or []:
            if isinstance(entry, dict):
                names += list(entry.get("vars") or {})
                for key in ("block", "rescue", "always"):
                    names += variables(entry.get(key))
        return names

    for play in yaml.safe_load(SITE.read_text()):
        names = list(play.get("vars") or {}) + variables(play.get("roles")) + variables(play.get("tasks"))
        assert not [n for n in names if n.startswith(prefixes)], (play.get("name"), names)


@pytest.mark.parametrize("role", ["driver", "container_toolkit", "cdi", "mig", "verify"])
def test_each_layers_bake_switch_follows_gpufleet_bake(role: str) -> None:
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    assert defaults["{0}_bake".format(role)] == "{{ gpufleet_bake | default(false) }}"


def test_the_reader_refuses_what_it_does_not_know() -> None:
    with pytest.raises(AssertionError):
        parse_hcl('build {\n  provisioner "ansible" {\n    playbook_file = "x"\n  }\n')
    with pytest.raises(AssertionError):
        parse_hcl("locals {\n  a = 1 +\n}\n}\n")
