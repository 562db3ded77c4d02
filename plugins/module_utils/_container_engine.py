# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Containers and images through the node's engine, the way workloads reach it.

containerd and CRI-O are driven through crictl, as the kubelet drives them
over CRI (ctr imports archives into containerd's k8s.io namespace, where CRI
looks); Docker through its CLI. Every pod and container started here carries
LABEL, so leftovers of an interrupted run can be found and removed.

Target-side code: Python 3.8+ standard library only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
import time
import typing as t
import uuid

LABEL = "gpufleet.nvidia/workload-check"
NAMESPACE = "gpufleet-verify"
# Seconds an image or cleanup command may take (outside the containers' limits).
QUIET_LIMIT = 60
# Longest output kept per command in a result.
KEEP = 2000


class RunFailed(Exception):
    """One container's check failed; the message says why."""


class Timeout(RunFailed):
    pass


def engine_error(text: str) -> str:
    """The engine's own reason from a client's stderr, without the client's log decoration.

    crictl wraps the runtime's answer as `... rpc error: code = Unknown desc = <reason>"`,
    repeated on a log line and a fatal line; the innermost reason is what a user needs.
    """
    reasons = re.findall(r'desc = (.*?)(?:"\s*(?:\w+=|$)|$)', text, flags=re.MULTILINE)
    reason = reasons[-1] if reasons else text
    lines = [line for line in reason.strip().splitlines() if line.strip() and "cgroup_parent is not set" not in line]
    return " ".join(line.strip() for line in lines).replace('\\"', '"')[-KEEP:] or "no output"


def program_finder(get_bin_path: t.Callable[..., t.Any]) -> t.Callable[[str], str]:
    """A program's path by AnsibleModule.get_bin_path (sbin and /usr/local too), or RunFailed naming it."""

    def find(name: str) -> str:
        path = get_bin_path(name, opt_dirs=["/usr/local/bin", "/usr/local/sbin"])
        if path is None:
            raise RunFailed("{0} is not installed on the node".format(name))
        return str(path)

    return find


def pinned_digest(ref: str) -> str | None:
    """The manifest digest a reference pins (name@sha256:...), or None."""
    match = re.search(r"@(sha256:[0-9a-f]{64})$", ref)
    return match.group(1) if match else None


def cri_name(ref: str) -> str:
    """The name CRI looks a reference up by: a tag beside a pinned digest is dropped
    (name:tag@sha256:... is name@sha256:..., as a pull by digest names the image)."""
    digest = pinned_digest(ref)
    if not digest:
        return ref
    name = ref[: -len(digest) - 1]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return (name[:colon] if colon > slash else name) + "@" + digest


def archive_images(path: str) -> list[dict[str, t.Any]]:
    """The images an OCI archive holds: [{name, digest (manifest), config (image ID)}].

    Read from index.json and the manifest blobs, as ctr and docker read them.
    """
    try:
        with tarfile.open(path) as archive:

            def blob(digest: str) -> dict[str, t.Any]:
                member = archive.extractfile("blobs/" + digest.replace(":", "/"))
                if member is None:
                    raise KeyError(digest)
                return json.load(member)

            index_file = archive.extractfile("index.json")
            if index_file is None:
                raise KeyError("index.json")
            index = json.load(index_file)
            images = []
            for entry in index.get("manifests") or []:
                name = (entry.get("annotations") or {}).get("org.opencontainers.image.ref.name") or ""
                manifest = blob(entry["digest"])
                config = (manifest.get("config") or {}).get("digest")
                images.append({"name": name, "digest": entry["digest"], "config": config})
            return images
    except (OSError, tarfile.TarError, KeyError, ValueError) as exc:
        raise RunFailed("{0} is not an OCI image archive: {1}".format(path, exc)) from None


def archive_image_for(path: str, ref: str) -> dict[str, t.Any]:
    """The archive's image a reference means: by the digest it pins, else by name."""
    images = archive_images(path)
    digest = pinned_digest(ref)
    for image in images:
        if (digest and image["digest"] == digest) or (not digest and image["name"] == ref):
            return image
    raise RunFailed(
        "the archive {0} does not hold {1}: it holds {2}".format(
            path, ref, ", ".join("{0} ({1})".format(i["name"] or "unnamed", i["digest"]) for i in images) or "nothing"
        )
    )


class Engine:
    """Start, exec in and remove labelled containers; subclasses speak to one engine.

    open() makes what the check's containers share (on CRI their pod sandbox)
    once before the first of them, close() removes it after the last, whatever
    happened; start() records what it created in the caller's list before
    anything else can fail, so the caller removes it whatever happens;
    containers of one check may run at once from several threads."""

    def __init__(self, params: dict[str, t.Any], program: t.Callable[[str], str]) -> None:
        # params: engine, image, runtime_handler, endpoint, hold_command, timeout
        self.params = params
        self.program = program

    def timed_out(self, what: str) -> Timeout:
        return Timeout("{0} did not finish within the time limit of {1} s".format(what, self.params["timeout"]))

    def run(self, argv: list[str], deadline: float, what: str) -> str:
        """stdout of argv, or RunFailed naming what failed; Timeout past the deadline."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise Timeout("{0}: the time limit of {1} s ran out".format(what, self.params["timeout"]))
        try:
            # pylint: disable-next=ansible-bad-function
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=left, check=False)
        except subprocess.TimeoutExpired:
            raise self.timed_out(what) from None
        out = done.stdout.decode("utf-8", "replace")
        if done.returncode != 0:
            reason = engine_error(done.stderr.decode("utf-8", "replace") or out)
            raise RunFailed("{0} failed: {1}".format(what, reason))
        return out

    def quiet(self, argv: list[str]) -> subprocess.CompletedProcess:
        """A cleanup command: never raises, bounded in time."""
        try:
            # pylint: disable-next=ansible-bad-function
            return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=QUIET_LIMIT, check=False)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, b"", b"timed out")

    def must(self, argv: list[str], what: str) -> str:
        """An image command outside any container's time limit: it must succeed within QUIET_LIMIT."""
        done = self.quiet(argv)
        if done.returncode != 0:
            raise RunFailed("{0} failed: {1}".format(what, engine_error(done.stderr.decode("utf-8", "replace") or done.stdout.decode("utf-8", "replace"))))
        return done.stdout.decode("utf-8", "replace")

    def ensure(self, ref: str, archive: str | None, pull: bool, check_mode: bool) -> dict[str, t.Any]:
        """Make the image present: {local, present, imported, pulled}; RunFailed says why it is not.

        In check mode nothing is imported or pulled: `present` false says it would be."""
        image: dict[str, t.Any] = {"local": ref, "present": False, "imported": False, "pulled": False}
        local = image["local"] = self.local_ref(ref, archive)
        if self.has_image(local):
            # The archive is needed only to import: a caller may fetch it
            # when this says the image is missing, not on every check.
            image["present"] = True
            return image
        if archive and not os.path.exists(archive):
            if check_mode:  # not downloaded in check mode
                return image
            raise RunFailed("the archive {0} is not on the node".format(archive))
        if check_mode:
            return image
        if archive:
            self.import_archive(archive, ref)
            image["imported"] = True
        elif pull:
            self.pull(ref)
            image["pulled"] = True
        else:
            raise RunFailed("it is not on the node, no archive is given and pulling is off")
        if not self.has_image(local):
            raise RunFailed("{0} did not provide {1}".format("the archive" if archive else "the pull", ref))
        image["present"] = True
        return image

    # Subclasses
    def has_image(self, ref: str) -> bool:
        raise NotImplementedError

    def local_ref(self, ref: str, archive: str | None) -> str:
        """The reference the engine knows the image by once it is there."""
        return ref

    def import_archive(self, path: str, ref: str) -> None:
        raise NotImplementedError

    def pull(self, ref: str) -> None:
        raise NotImplementedError

    def remove_leftovers(self) -> int:
        raise NotImplementedError

    def open(self, deadline: float, workdir: str) -> None:
        """What every container of the check shares; RunFailed fails them all alike."""

    def close(self) -> str | None:
        """Removes what open() made (also after it failed half-way); what is left, if anything."""
        return None

    def start(self, image: str, cdi: list[str], deadline: float, workdir: str, created: list[str]) -> str:
        raise NotImplementedError

    def exec(self, handle: str, argv: list[str], deadline: float, what: str) -> str:
        raise NotImplementedError

    def remove(self, handle: str) -> str | None:
        raise NotImplementedError


class CRIEngine(Engine):
    """containerd and CRI-O, through crictl as the kubelet would drive them."""

    def crictl(self, *args: str) -> list[str]:
        argv = [self.program("crictl")]
        if self.params["endpoint"]:
            argv += ["--runtime-endpoint", self.params["endpoint"], "--image-endpoint", self.params["endpoint"]]
        return argv + list(args)

    def ctr(self, *args: str) -> list[str]:
        # CRI's images live in containerd's k8s.io namespace.
        return [self.program("ctr"), "-n", "k8s.io"] + list(args)

    def has_image(self, ref: str) -> bool:
        if self.params["engine"] == "containerd":
            done = self.quiet(self.ctr("images", "ls", "-q", "name==" + cri_name(ref)))
            return done.returncode == 0 and bool(done.stdout.strip())
        return self.quiet(self.crictl("inspecti", "-q", ref)).returncode == 0

    def import_archive(self, path: str, ref: str) -> None:
        if self.params["engine"] != "containerd":
            raise RunFailed(
                "importing an archive into {0} is not supported: load the image with the engine's own tools or give a reachable registry (pull)".format(
                    self.params["engine"]
                )
            )
        image = archive_image_for(path, ref)
        self.must(self.ctr("images", "import", "--all-platforms", path), "ctr -n k8s.io images import {0}".format(path))
        if image["name"] != cri_name(ref):
            # A pull by digest names the image name@digest; an import names it
            # by the archive's tag only, so CRI could not resolve the pinned
            # reference. Name it as the pull would.
            self.must(
                self.ctr("images", "tag", "--force", image["name"], cri_name(ref)), "ctr -n k8s.io images tag {0} {1}".format(image["name"], cri_name(ref))
            )

    def pull(self, ref: str) -> None:
        self.must(self.crictl("pull", ref), "crictl pull {0}".format(ref))

    def remove_leftovers(self) -> int:
        done = self.quiet(self.crictl("pods", "-q", "--label", LABEL + "=true"))
        pods = done.stdout.decode().split() if done.returncode == 0 else []
        for pod in pods:
            self.remove_pod(pod)
        return len(pods)

    def __init__(self, params: dict[str, t.Any], program: t.Callable[[str], str]) -> None:
        super().__init__(params, program)
        self.pod_name = ""
        self.pod_id = ""
        self.pod_file = ""

    def open(self, deadline: float, workdir: str) -> None:
        """One pod sandbox for all the check's containers, as the kubelet runs a pod's containers in one.

        The runtime handler is the pod's (runp --runtime): a check runs one
        handler, so one sandbox; a sandbox per container cost a pause
        container's start and removal each (seconds on a node with many MIG
        devices)."""
        self.pod_name = "gpufleet-workload-" + uuid.uuid4().hex[:10]
        pod = {
            "metadata": {"name": self.pod_name, "namespace": NAMESPACE, "uid": self.pod_name, "attempt": 0},
            "labels": {LABEL: "true"},
            "log_directory": workdir,
            # Host network: the check needs no network, and a pod network
            # would add a CNI plugin to what it depends on.
            "linux": {"security_context": {"namespace_options": {"network": 2}}},
        }
        self.pod_file = os.path.join(workdir, "pod.json")
        with open(self.pod_file, "w") as handle:
            json.dump(pod, handle)
        runp = ["runp"] + (["--runtime", self.params["runtime_handler"]] if self.params["runtime_handler"] else [])
        self.pod_id = self.run(self.crictl(*runp, self.pod_file), deadline, "crictl runp (the pod sandbox)").strip()

    def close(self) -> str | None:
        """Removes the sandbox and with it any container a failed removal left."""
        pods = [self.pod_id] if self.pod_id else []
        if not pods and self.pod_name:
            # runp failed or ran out of time: a sandbox it made anyway is
            # found by its name.
            done = self.quiet(self.crictl("pods", "-q", "--label", LABEL + "=true", "--name", "^" + self.pod_name + "$"))
            pods = done.stdout.decode().split() if done.returncode == 0 else []
        problems = [problem for problem in (self.remove_pod(pod) for pod in pods) if problem]
        self.pod_id = self.pod_name = ""
        return "; ".join(problems) or None

    def start(self, image: str, cdi: list[str], deadline: float, workdir: str, created: list[str]) -> str:
        # Unique within the sandbox: CRI reserves a container name per pod.
        name = "probe-" + uuid.uuid4().hex[:10]
        labels = {LABEL: "true"}
        container = {
            "metadata": {"name": name},
            "image": {"image": image},
            "command": self.params["hold_command"],
            "labels": labels,
            "log_path": name + ".log",
            # The CRI field (Kubernetes >= 1.28) and the annotation older
            # engines read; each engine de-duplicates the two.
            "CDI_devices": [{"name": device} for device in cdi],
            "annotations": {"cdi.k8s.io/gpufleet-verify": ",".join(cdi)},
            "linux": {},
        }
        container_file = os.path.join(workdir, name + ".json")
        with open(container_file, "w") as handle:
            json.dump(container, handle)
        container_id = self.run(self.crictl("create", self.pod_id, container_file, self.pod_file), deadline, "crictl create (the GPU container)").strip()
        created.append(container_id)  # removed by the caller, whatever happens next
        self.run(self.crictl("start", container_id), deadline, "crictl start (the GPU container)")
        return container_id

    def exec(self, handle: str, argv: list[str], deadline: float, what: str) -> str:
        left = max(1, int(deadline - time.monotonic()))
        try:
            return self.run(self.crictl("exec", "--sync", "--timeout", str(left), handle, *argv), deadline, what)
        except RunFailed as exc:
            # CRI stops a sync exec at its timeout ("timeout 4s exceeded").
            if re.search(r"timeout \S+ exceeded", str(exc)):
                raise self.timed_out(what) from None
            raise

    def remove(self, handle: str) -> str | None:
        """A container of the open sandbox goes with it (close(): stopp kills them all at once, rmp removes them):
        one call where a removal each cost ~75 ms per container on a node with many MIG devices. Otherwise it is
        removed, killed first (its hold command ignores SIGTERM as PID 1)."""
        if self.pod_id:
            return None
        done = self.quiet(self.crictl("rm", "--force", handle))
        if done.returncode != 0:
            return engine_error(done.stderr.decode("utf-8", "replace"))
        return None

    def remove_pod(self, pod: str) -> str | None:
        """Removes a pod sandbox and with it its containers."""
        self.quiet(self.crictl("stopp", pod))
        done = self.quiet(self.crictl("rmp", "--force", pod))
        if done.returncode != 0:
            return "pod sandbox {0}: {1}".format(pod, engine_error(done.stderr.decode("utf-8", "replace")))
        return None


class DockerEngine(Engine):
    def docker(self, *args: str) -> list[str]:
        return [self.program("docker")] + list(args)

    def has_image(self, ref: str) -> bool:
        return self.quiet(self.docker("image", "inspect", ref)).returncode == 0

    def local_ref(self, ref: str, archive: str | None) -> str:
        # A loaded image has no repository digest (only a pull records one),
        # so a pinned reference is run by the image ID the archive pins.
        if archive and pinned_digest(ref) and os.path.exists(archive):
            return str(archive_image_for(archive, ref)["config"])
        return ref

    def import_archive(self, path: str, ref: str) -> None:
        archive_image_for(path, ref)
        self.must(self.docker("load", "--input", path), "docker load --input {0}".format(path))

    def pull(self, ref: str) -> None:
        self.must(self.docker("pull", "--quiet", ref), "docker pull {0}".format(ref))

    def remove_leftovers(self) -> int:
        done = self.quiet(self.docker("ps", "--all", "--quiet", "--filter", "label=" + LABEL + "=true"))
        containers = done.stdout.decode().split() if done.returncode == 0 else []
        for container in containers:
            self.remove(container)
        return len(containers)

    def start(self, image: str, cdi: list[str], deadline: float, workdir: str, created: list[str]) -> str:
        name = "gpufleet-workload-" + uuid.uuid4().hex[:10]
        argv = ["run", "--detach", "--name", name, "--label", LABEL + "=true", "--network", "none", "--pull", "never"]
        if self.params["runtime_handler"]:
            argv += ["--runtime", self.params["runtime_handler"]]
        for device in cdi:
            argv += ["--device", device]
        created.append(name)
        self.run(self.docker(*argv, image, *self.params["hold_command"]), deadline, "docker run (the GPU container)")
        return name

    def exec(self, handle: str, argv: list[str], deadline: float, what: str) -> str:
        return self.run(self.docker("exec", handle, *argv), deadline, what)

    def remove(self, handle: str) -> str | None:
        done = self.quiet(self.docker("rm", "--force", "--volumes", handle))
        if done.returncode != 0 and b"No such container" not in done.stderr:
            return done.stderr.decode("utf-8", "replace").strip()[-KEEP:]
        return None


ENGINES = {"containerd": CRIEngine, "crio": CRIEngine, "docker": DockerEngine}
