"""Start and remove a Molecule scenario's nodes: one `podman run` per platform, all at once.

Molecule's own create and destroy playbooks (molecule-plugins' podman driver) spent about 23 s and
18 s of every scenario (measured under a test run's load), 17 scenarios, twice for destroy: a dozen tasks, one ansible worker and one
podman process each, to look up images to build, registries to log into and networks to make, none
of which the test ground has (pre-built local images, the host network). The shared create.yml and
destroy.yml (extensions/molecule/_shared) call this instead, with `molecule_yml.platforms` as JSON on
stdin:

    molecule_nodes.py create   start every platform (podman run --detach), all at once, after making the
                               network a platform names when it is not one of Podman's own
    molecule_nodes.py destroy  remove every platform, running or not, at once, and that network

A platform key this script does not pass on is refused by name, so that a scenario never believes
a node has an option it was started without. Booting is the shared prepare's business: it waits
for `systemctl is-system-running --wait`, as before.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# Molecule's own keys (groups, children) and those that mean nothing to `podman run` here.
IGNORED = {"groups", "children", "pre_build_image"}
# Each key `podman run` gets, and how.
FLAGS = {
    "network": lambda value: [f"--network={value}"],
    "systemd": lambda value: [f"--systemd={str(value).lower()}"],
    "privileged": lambda value: ["--privileged"] if value else [],
    "devices": lambda value: [f"--device={device}" for device in value],
    "volumes": lambda value: [f"--volume={volume}" for volume in value],
    "extra_opts": lambda value: [str(option) for option in value],
}


class NodeError(Exception):
    """A platform that cannot be started as written."""


def run_argv(podman: str, platform: dict) -> list[str]:
    """`podman run` for one platform, or NodeError naming the key that is not understood."""
    name = platform.get("name")
    if not name or not platform.get("image"):
        raise NodeError(f"a platform needs a name and an image: {platform}")
    if platform.get("pre_build_image") is False:
        raise NodeError(f"platform {name}: pre_build_image: false (a Dockerfile build) is not supported; build the image with tests/harness/images.sh")
    unknown = sorted(set(platform) - IGNORED - set(FLAGS) - {"name", "image", "command"})
    if unknown:
        raise NodeError(
            f"platform {name}: key(s) {', '.join(unknown)} are not passed to podman run by tests/harness/molecule_nodes.py; "
            "add them to its FLAGS (or use extra_opts)"
        )
    argv = [podman, "run", "--detach", f"--name={name}", f"--hostname={name}", "--label=owner=molecule"]
    for key, flags in FLAGS.items():
        if key in platform:
            argv += flags(platform[key])
    argv.append(platform["image"])
    command = platform.get("command")
    if command:
        argv += shlex.split(command) if isinstance(command, str) else [str(word) for word in command]
    return argv


# Networks Podman has without creating them; any other name is the scenario's own bridge, made by create
# and removed by destroy (as the podman driver did).
BUILT_IN_NETWORKS = {"host", "none", "bridge", "private", "slirp4netns", "pasta", "podman"}


def own_networks(platforms: list[dict]) -> list[str]:
    """The networks the platforms name that the scenario must create, in order, once each."""
    names = []
    for platform in platforms:
        network = str(platform.get("network") or "")
        if network and network not in BUILT_IN_NETWORKS and ":" not in network and network not in names:
            names.append(network)
    return names


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def create(podman: str, platforms: list[dict]) -> list[str]:
    """Start every platform at once; the errors, one line per platform that did not start."""
    argvs = [run_argv(podman, platform) for platform in platforms]
    # A node left over from a killed run would make `podman run` fail on its name.
    destroy(podman, platforms)
    for network in own_networks(platforms):
        made = run([podman, "network", "create", network])
        if made.returncode != 0:
            return [f"podman network create {network} failed ({made.returncode}): {made.stderr.strip()}"]
    with ThreadPoolExecutor(max_workers=max(1, len(argvs))) as pool:
        results = list(pool.map(run, argvs))
    return [
        f"{platform['name']}: {shlex.join(argv)} failed ({result.returncode}): {result.stderr.strip()}"
        for platform, argv, result in zip(platforms, argvs, results)
        if result.returncode != 0
    ]


def destroy(podman: str, platforms: list[dict]) -> list[str]:
    """Remove every platform's container, running or not, without waiting for its shutdown."""
    names = [platform["name"] for platform in platforms]
    if not names:
        return []
    result = run([podman, "rm", "--force", "--ignore", "--time=0", *names])
    errors = [] if result.returncode == 0 else [f"podman rm {' '.join(names)} failed ({result.returncode}): {result.stderr.strip()}"]
    for network in own_networks(platforms):
        if run([podman, "network", "exists", network]).returncode == 0:
            removed = run([podman, "network", "rm", "--force", network])
            if removed.returncode != 0:
                errors.append(f"podman network rm {network} failed ({removed.returncode}): {removed.stderr.strip()}")
    return errors


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("create", "destroy"):
        print(f"usage: {argv[0]} create|destroy < platforms.json", file=sys.stderr)
        return 2
    podman = os.environ.get("MOLECULE_PODMAN_EXECUTABLE") or "podman"
    platforms = json.load(sys.stdin)
    try:
        errors = create(podman, platforms) if argv[1] == "create" else destroy(podman, platforms)
    except NodeError as error:
        errors = [str(error)]
    for error in errors:
        print(error, file=sys.stderr)
    if not errors:
        print(f"{argv[1]}: {', '.join(platform['name'] for platform in platforms)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
