"""The layer registry (plugins/plugin_utils/_layers.yml) is the one list of layers, and what derives from it agrees.

- playbooks/site.yml is what tests/harness/render-site.py writes from it;
- every variable a layer declares, and its switch, is an option of the layer's role;
- every role of the collection is a layer of site.yml, or named here as a role that is not one;
- the layers lookup gives the fast path the registry's views, and refuses anything else.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleLookupError

from ansible_collections.gpufleet.nvidia.plugins.lookup.layers import LookupModule
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _layers

ROOT = Path(__file__).resolve().parents[2]
# Roles that are not layers of site.yml: the fast path runs around the layers, the others are their own playbooks'.
NOT_LAYERS = {
    "fast_path": "runs before and after every layer",
    "upgrade": "playbooks/upgrade.yml",
    "kernel_roll": "playbooks/kernel_roll.yml (the kernel layer of upgrade.yml)",
    "bundle": "playbooks/bundle.yml",
}


def render_site() -> str:
    spec = importlib.util.spec_from_file_location("render_site", ROOT / "tests" / "harness" / "render-site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render()


def test_site_yml_is_what_the_registry_gives() -> None:
    assert (ROOT / "playbooks" / "site.yml").read_text(encoding="utf-8") == render_site(), (
        "playbooks/site.yml differs from the layer registry: run python tests/harness/render-site.py"
    )


@pytest.mark.parametrize("layer", [layer for layer in _layers.SITE_LAYERS if layer.get("declares")], ids=lambda layer: layer["name"])
def test_declared_variables_are_options_of_the_role(layer: dict) -> None:
    spec = yaml.safe_load((ROOT / "roles" / layer["name"] / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    missing = [name for name in layer["declares"] if name not in options]
    assert not missing, "{0}: declared in the registry but no option of the role: {1}".format(layer["name"], missing)


def test_every_role_is_a_layer_or_named_as_none() -> None:
    roles = {path.name for path in (ROOT / "roles").iterdir() if (path / "tasks").is_dir()}
    layers = {layer["name"] for layer in _layers.SITE_LAYERS if "step" in layer}
    assert roles - layers == set(NOT_LAYERS), "roles that are no layer: {0}".format(sorted(roles - layers - set(NOT_LAYERS)))
    assert layers <= roles, "layers without a role: {0}".format(sorted(layers - roles))


def test_the_lookup_gives_the_registry_views() -> None:
    tags, prefixes, paths, names = LookupModule().run(["tags", "prefixes", "watch_paths", "names"])
    assert tags[0] == "preflight" and tags[-1] == "verify" and "facts" in tags
    assert prefixes[0] == "gpufleet_" and "facts_" not in prefixes and set(prefixes[1:]) == {t + "_" for t in tags if t != "facts"}
    assert "/etc/os-release" in paths and "/etc/containerd" in paths and len(paths) == len(set(paths))
    assert names == list(_layers.LAYER_VARIABLES)
    with pytest.raises(AnsibleLookupError, match="^layers: give one or more of tags, prefixes, watch_paths, names"):
        LookupModule().run(["layers"])


def test_a_broken_registry_fails_naming_the_layer(tmp_path: Path) -> None:
    registry = yaml.safe_load(_layers.REGISTRY_PATH.read_text())
    registry["layers"][2]["switch"] = "driver_nothing"
    broken = tmp_path / "_layers.yml"
    broken.write_text(yaml.safe_dump(registry))
    with pytest.raises(ValueError, match="layer driver's switch driver_nothing is not one of its declares"):
        _layers.load_registry(broken)
