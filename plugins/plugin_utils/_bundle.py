# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The offline bundle's plan (the bundle role, playbooks/bundle.yml), as pure
functions of the request, each host's declaration and what upstream answered.
Controller side only; nothing here touches the network or the disk.

1. request_errors: the run's own inputs (group, bundle_dir, signing key, images).
2. host_plan (per host): the host's declaration judged - every error naming the
   variable and the fix - and turned into the repositories, files and keys the
   bundle must carry for it, each at the path its mirror variable names under
   bundle_mirror_url.
3. bundle_plan: every host's needs merged by place in the bundle (hosts that
   disagree about one place are an error), the images, the directories.
4. After upstream answered: image_problem
   (an archive read), unstaged (check mode) and manifest.

The lists are ordered and deduplicated exactly as Jinja's sort/dictsort and
Ansible's unique order them (case-insensitively for strings), so that a bundle
planned here is byte for byte the one the playbook's Jinja plan produced.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import typing as t
from collections.abc import Iterable, Mapping

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _driver_plan

# What the bundle can carry: apt platforms, by Ansible's architecture name -> dpkg's.
DISTRIBUTIONS = ("Debian", "Ubuntu")
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}

# The roles' mirror variables whose upstream the bundle reads, and where the defaults come from.
UPSTREAM_NAMES = (
    "driver_cuda_repo_url",
    "driver_cuda_repo_key_url",
    "driver_cuda_repo_key_fingerprint",
    "driver_distribution_url",
    "driver_distribution_key",
    "driver_distribution_key_fingerprints",
    "container_toolkit_apt_repo_url",
    "container_toolkit_gpg_key_url",
    "container_toolkit_gpg_key_fingerprint",
    "crictl_download_url",
)

_TOOLKIT_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(-.+)?$")
_IMAGE_NAME = re.compile(r"^[a-z0-9][^@\s]*$")
_IMAGE_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ARCHIVE_URL = re.compile(r"^(https?|file)://[^?#]*[^/?#]$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FINGERPRINT = re.compile(r"^[0-9A-Fa-f]{40}$")


class BundleError(Exception):
    """A plan that cannot be made from its inputs (a caller's mistake, not the user's declaration)."""


# --- the orderings the Jinja plan used --------------------------------------------------------


def _fold(value: t.Any) -> t.Any:
    """Jinja's ignore_case: strings compare lower-cased."""
    return value.lower() if isinstance(value, str) else value


def unique(values: Iterable[t.Any]) -> list[t.Any]:
    """Ansible's unique: the first of each, strings case-insensitively, other values by equality."""
    kept: list[t.Any] = []
    seen: list[t.Any] = []
    for value in values:
        folded = _fold(value)
        if folded not in seen:
            seen.append(folded)
            kept.append(value)
    return kept


def _sorted_by(values: Iterable[t.Any], key: str | None = None) -> list[t.Any]:
    """Jinja's sort (stable, case-insensitive), by an item key when given."""
    return sorted(values, key=lambda v: _fold(v[key] if key is not None else v))


def _text(value: t.Any) -> str:
    """A value as Jinja's `| string` and `~` render it."""
    return value if isinstance(value, str) else str(value)


def _strip_slashes(url: t.Any) -> str:
    return re.sub(r"/+$", "", _text(url))


def _sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _combine_recursive(base: Mapping, over: Mapping) -> dict[str, t.Any]:
    """Ansible's combine(recursive=true) of two mappings."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _combine_recursive(merged[key], value)
        else:
            merged[key] = value
    return merged


def _plain(value: t.Any) -> t.Any:
    """A copy made of plain dicts and lists (values as the caller's containers give them), for json.dumps."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if _is_list(value):
        return [_plain(item) for item in value]
    return value


def _is_list(value: t.Any) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


# --- 1. the run's own inputs --------------------------------------------------------------------


def image_errors(images: t.Any) -> list[str]:
    """Every problem with bundle_images, each naming the entry, the field and the fix."""
    if not _is_list(images):
        return ["bundle_images: give a list of {name, digest, archive_url, archive_checksum}"]
    errors: list[str] = []
    files: list[str] = []
    for index, image in enumerate(images):
        at = "bundle_images[{0}]".format(index)
        if not isinstance(image, Mapping):
            errors.append(at + ": give a mapping {name, digest, archive_url, archive_checksum}")
            continue
        name, digest = image.get("name", ""), image.get("digest", "")
        url, checksum = image.get("archive_url", ""), image.get("archive_checksum", "")
        if not _IMAGE_NAME.fullmatch(_text(name)):
            errors.append(
                '{0}.name is "{1}": give the reference the archive names the image by, without a digest'
                " (for example registry.example.internal/gpufleet/cuda-probe:1.0)".format(at, _text(name))
            )
        if not _IMAGE_DIGEST.fullmatch(_text(digest)):
            errors.append('{0}.digest is "{1}": pin the image manifest digest, sha256:<64 hex digits> (what name@sha256:... pins)'.format(at, _text(digest)))
        if not _ARCHIVE_URL.fullmatch(_text(url)):
            errors.append('{0}.archive_url is "{1}": give the http(s):// or file:// URL of the image\'s OCI archive'.format(at, _text(url)))
        else:
            files.append(posixpath.basename(_text(url)))
        if not _SHA256.fullmatch(re.sub(r"^sha256:", "", _text(checksum))):
            errors.append('{0}.archive_checksum is "{1}": pin the archive file\'s sha256 (sha256:<64 hex digits>)'.format(at, _text(checksum)))
    for name in unique(files):
        if files.count(name) > 1:
            errors.append("bundle_images: two archives are named {0} and would both go to images/{0}; give them distinct file names".format(name))
    return errors


def request_errors(request: Mapping[str, t.Any]) -> list[str]:
    """What is wrong with the run's inputs, in the order the run reports them (the first is the one shown).

    request: group (gpufleet_gpu_group), hosts (the group's hosts), bundle_dir, signing_key, images.
    """
    errors = []
    if not list(request.get("hosts") or []):
        errors.append(
            "gpufleet_gpu_group: the inventory has no host in group '{0}'; set gpufleet_gpu_group to the"
            " group of GPU nodes to bundle for (default gpu_nodes).".format(_text(request.get("group")))
        )
    if not re.match(r"^/", _text(request.get("bundle_dir", ""))):
        errors.append("bundle_dir: give the absolute path of the directory to write the bundle to (-e bundle_dir=/srv/gpufleet-bundle).")
    elif not _FINGERPRINT.fullmatch(_text(request.get("signing_key", "")).replace(" ", "")):
        errors.append(
            "bundle_signing_key: give the 40-hex-digit fingerprint of the site key that signs the bundle's"
            " repositories (gpg --list-secret-keys --with-colons); the nodes trust it through the *_key_url"
            " and *_fingerprint variables."
        )
    problems = image_errors(request.get("images", []))
    if problems:
        errors.append("; ".join(problems))
    return errors


# --- 2. one host --------------------------------------------------------------------------------


def _platform_error(platform: t.Any, mirror: str) -> str | None:
    os_ = platform if isinstance(platform, Mapping) else {}
    if (
        os_.get("distribution", "") in DISTRIBUTIONS
        and _text(os_.get("version", ""))
        and _text(os_.get("release", ""))
        and os_.get("architecture", "") in DEB_ARCH
        and re.match(r"^https?://", mirror)
    ):
        return None
    if not re.match(r"^https?://", mirror):
        return (
            "bundle_mirror_url: give the URL the nodes will reach the bundle at (for example"
            ' "{{ gpufleet_mirror_url }}"); every mirror variable of the roles must lie under it.'
        )
    message = (
        "bundle_platform is {0}: the bundle never contacts the nodes, so declare the OS they run, for example"
        ' {{distribution: Debian, version: "13", release: trixie, architecture: x86_64}} (distribution one of'
        " {1}; architecture one of {2})."
    )
    return message.format(json.dumps(_plain(platform)), ", ".join(DISTRIBUTIONS), ", ".join(DEB_ARCH))


def data_files(platform: t.Any, roles_dir: str) -> list[str]:
    """The roles' data files the plan reads: their vars/main.yml, and the driver's for the declared OS
    (vars/<Distribution>.yml, vars/<Distribution>-<major>.yml) on a platform the bundle carries."""
    files = ["{0}/{1}/vars/main.yml".format(roles_dir, role) for role in ("driver", "container_toolkit", "crictl")]
    os_ = platform if isinstance(platform, Mapping) else {}
    distribution = os_.get("distribution", "")
    if distribution in DISTRIBUTIONS:
        major = _text(os_.get("version", "")).split(".")[0]
        files += ["{0}/driver/vars/{1}.yml".format(roles_dir, distribution), "{0}/driver/vars/{1}-{2}.yml".format(roles_dir, distribution, major)]
    return files


def driver_branch(decl: Mapping[str, t.Any]) -> str:
    """The driver branch the declaration installs: driver_version's first field, else driver_branch."""
    version = _text(decl["driver_version"])
    return version.split(".")[0] if version else _text(decl["driver_branch"])


def upstream_sources(request: Mapping[str, t.Any]) -> dict[str, t.Any]:
    """Where the bundle fetches from: the roles' defaults (what a node with no mirror uses), under bundle_upstream."""
    defaults, data = request["role_defaults"], request["role_data"]
    distribution = data.get("driver_distribution_repo") or {}
    sources = {
        "driver_cuda_repo_url": defaults["driver"]["driver_cuda_repo_url"],
        # "" = the key file NVIDIA publishes in each repository directory, with the role's fingerprint for that OS.
        "driver_cuda_repo_key_url": "",
        "driver_cuda_repo_key_fingerprint": "",
        "driver_distribution_url": distribution.get("url", ""),
        # A keyring on the controller (the distribution's archive keyring) or a URL.
        "driver_distribution_key": distribution.get("keyring", ""),
        "driver_distribution_key_fingerprints": [],
        "container_toolkit_apt_repo_url": defaults["container_toolkit"]["container_toolkit_apt_repo_url"],
        "container_toolkit_gpg_key_url": defaults["container_toolkit"]["container_toolkit_gpg_key_url"],
        "container_toolkit_gpg_key_fingerprint": defaults["container_toolkit"]["container_toolkit_gpg_key_fingerprint"],
        "crictl_download_url": defaults["crictl"]["crictl_download_url"],
    }
    sources.update(request.get("upstream") or {})
    return sources


def _judge(
    decl: Mapping[str, t.Any],
    os_: Mapping[str, t.Any],
    mirror: str,
    site_fpr: str,
    flavour: Mapping[str, t.Any] | None,
    crictl_release: str,
    crictl_sum: str,
    debarch: str,
    version_pattern: str,
) -> list[str]:
    """Every reason the bundle cannot carry this host's declaration."""
    errors = []
    under = ["crictl_download_url"]
    site_keyed = []
    if decl["driver_state"] == "present":
        if not re.match(version_pattern, _text(decl["driver_version"])):
            errors.append(
                'driver_version is "{0}": the bundle carries exact versions; pin driver_version (for example "550.163.01"), as site.yml will install it'.format(
                    _text(decl["driver_version"])
                )
            )
        if flavour and flavour.get("error"):
            errors.append(flavour["error"])
        if decl["driver_module_build"] == "precompiled":
            errors.append("driver_module_build is precompiled: the bundle carries DKMS packages only; set driver_module_build: dkms (or auto)")
        if decl["driver_source"] == "cuda":
            under += ["driver_cuda_repo_url", "driver_cuda_repo_key_url"]
            site_keyed.append("driver_cuda_repo_key_fingerprint")
        elif os_["distribution"] == "Debian":
            under += ["driver_distribution_mirror_url", "driver_distribution_key_url"]
        else:
            errors.append(
                "driver_source is distribution on {0}: the bundle carries Debian's driver packages or"
                " NVIDIA's CUDA repository; use driver_source: cuda, or the site's own distribution"
                " mirror".format(os_["distribution"])
            )
    if boolean(decl["container_toolkit_repo_manage"], strict=False):
        if not _TOOLKIT_VERSION.fullmatch(_text(decl["container_toolkit_version"])):
            errors.append('container_toolkit_version is "{0}": pin it (for example "1.18.0")'.format(_text(decl["container_toolkit_version"])))
        under += ["container_toolkit_apt_repo_url", "container_toolkit_gpg_key_url"]
        if _text(decl["container_toolkit_gpg_key_fingerprint"]):
            site_keyed.append("container_toolkit_gpg_key_fingerprint")
    if not crictl_release:
        errors.append(
            'crictl_version is empty and crictl_kubernetes_version "{0}" has no cri-tools release in the'
            " crictl role; pin crictl_version (for example v1.33.0)".format(_text(decl["crictl_kubernetes_version"]))
        )
    elif not crictl_sum:
        # Never a .sha256 from upstream: it would vouch for whatever that server sends.
        errors.append(
            "crictl_checksums has no sha256 for {0} {1} and neither has the crictl role's table: add it to crictl_checksums".format(crictl_release, debarch)
        )
    for name in under:
        if not (_text(decl[name]) + "/").startswith(mirror + "/"):
            errors.append(
                '{0} is "{1}", not under bundle_mirror_url "{2}": point it at the bundle (the bundle'
                " re-signs what it carries with the site key and serves that key itself)".format(name, _text(decl[name]), mirror)
            )
    for name in site_keyed:
        if _text(decl[name]).replace(" ", "").upper() != site_fpr:
            errors.append(
                '{0} is "{1}", but the bundle is signed with bundle_signing_key {2}: set it to that fingerprint'.format(name, _text(decl[name]), site_fpr)
            )
    return errors


def _driver_packages(decl: Mapping[str, t.Any], data: Mapping[str, t.Any], flavour: Mapping[str, t.Any]) -> list[dict[str, t.Any]]:
    """The driver's packages for the host's source, package set and flavour, with NVIDIA's extras."""
    source, version = decl["driver_source"], _text(decl["driver_version"])
    independent = (data.get("driver_independent_packages") or {}).get(source) or []
    packages: list[dict[str, t.Any]] = [
        {"name": name, "upstream_version": "" if name in independent else version}
        for name in data["driver_packages"][source][decl["driver_package_set"]][flavour["flavour"]]
    ]
    if source == "cuda":
        # NVIDIA's pinning package exists from about R580 on; Fabric Manager is versioned with the driver.
        packages.append({"name": "nvidia-driver-pinning-" + version, "required": False})
        fabricmanager = _text(decl["driver_fabricmanager"]).lower()
        if fabricmanager in ("true", "auto"):
            # auto: NVSwitches are found on the node only; carry Fabric Manager when the repository has it.
            for name in data["driver_fabricmanager_packages"][source]:
                packages.append({"name": name, "upstream_version": version, "required": fabricmanager == "true"})
            architectures = data["driver_nvlsm_architectures"]
            if any(gpu["architecture"] in architectures for gpu in flavour["gpus"]):
                for name in data["driver_nvlsm_packages"][source]:
                    packages.append({"name": name, "required": False})
    return packages


def host_plan(decl: Mapping[str, t.Any], request: Mapping[str, t.Any]) -> dict[str, t.Any]:
    """One host's declaration, judged and turned into what the bundle carries for it.

    decl: the host's values of the driver, container_toolkit and crictl variables over their roles' defaults.
    request: platform (bundle_platform), mirror_url, signing_key, upstream (bundle_upstream), role_defaults
    ({driver, container_toolkit, crictl}: the roles' defaults) and role_data (the roles' vars for the declared
    OS, by name without the leading "__"). The kernel-module flavour is the driver plan's own decision
    (_driver_plan.kernel_module).
    Returns {errors, repos, files, key_paths}; with errors, nothing else is planned.
    """
    platform = request.get("platform")
    mirror = _strip_slashes(request.get("mirror_url", ""))
    site_fpr = _text(request.get("signing_key", "")).replace(" ", "").upper()
    empty = {"errors": [], "repos": [], "files": [], "key_paths": []}
    problem = _platform_error(platform, mirror)
    if problem:
        return dict(empty, errors=[problem])
    os_ = platform
    data = request["role_data"]
    up = upstream_sources(request)
    major = _text(os_["version"]).split(".")[0]
    debarch = DEB_ARCH[os_["architecture"]]
    branch = driver_branch(decl)
    present = decl["driver_state"] == "present"
    flavour = _driver_plan.kernel_module(decl["driver_gpu_models"], decl["driver_kernel_module"], branch, "driver_gpu_models") if present else None

    crictl_table = _combine_recursive(data["crictl_sha256"], decl["crictl_checksums"] or {})
    crictl_release = _text(decl["crictl_version"] or data["crictl_release_for_kubernetes"].get(_text(decl["crictl_kubernetes_version"]), ""))
    crictl_sum = _text((crictl_table.get(crictl_release) or {}).get(debarch, "")) if crictl_release else ""

    errors = _judge(decl, os_, mirror, site_fpr, flavour, crictl_release, crictl_sum, debarch, data["driver_version_pattern"])
    if errors:
        return dict(empty, errors=errors)

    prefix = "^" + re.escape(mirror) + "/"

    def in_bundle(url: t.Any) -> str:
        """A mirror URL -> its path in the bundle (the judge checked it lies under bundle_mirror_url)."""
        return re.sub(prefix, "", _text(url))

    tail = "/{0}/crictl-{0}-linux-{1}.tar.gz".format(crictl_release, debarch)
    files = [
        {
            "dest": _strip_slashes(in_bundle(decl["crictl_download_url"])) + tail,
            "url": _strip_slashes(up["crictl_download_url"]) + tail,
            "sha256": crictl_table[crictl_release][debarch],
        }
    ]
    toolkit = boolean(decl["container_toolkit_repo_manage"], strict=False)
    keys = []
    if present:
        keys.append(decl["driver_cuda_repo_key_url"] if decl["driver_source"] == "cuda" else decl["driver_distribution_key_url"])
    if toolkit:
        keys.append(decl["container_toolkit_gpg_key_url"])

    repos = []
    if present:
        packages = _driver_packages(decl, data, flavour)
        if decl["driver_source"] == "cuda":
            name = ("debian" + major) if os_["distribution"] == "Debian" else ("ubuntu" + _text(os_["version"]).replace(".", ""))
            arch = data["driver_cuda_repo_arch"].get(os_["architecture"], os_["architecture"])
            source = "{0}/{1}/{2}".format(_strip_slashes(up["driver_cuda_repo_url"]), name, arch)
            repos.append(
                {
                    "dest": "{0}/{1}/{2}".format(_strip_slashes(in_bundle(decl["driver_cuda_repo_url"])), name, arch),
                    "source": source,
                    "source_name": "bundle_upstream.driver_cuda_repo_url",
                    "suites": [],
                    "components": [],
                    "architecture": debarch,
                    "key": up["driver_cuda_repo_key_url"] or (source + "/" + _text(data["driver_cuda_repo_key"])),
                    "key_fingerprints": [up["driver_cuda_repo_key_fingerprint"] or data["driver_cuda_repo_fingerprint"]],
                    "packages": packages,
                    "prefer": _text(decl["driver_version"]),
                }
            )
        else:
            suites = [os_["release"]]
            if boolean(decl["driver_distribution_backports"], strict=False):
                suites.append(_text(os_["release"]) + "-backports")
            repos.append(
                {
                    "dest": _strip_slashes(in_bundle(decl["driver_distribution_mirror_url"])),
                    "source": up["driver_distribution_url"],
                    "source_name": "bundle_upstream.driver_distribution_url",
                    "suites": suites,
                    "components": list(data["driver_distribution_repo"]["components"]),
                    "architecture": debarch,
                    "key": up["driver_distribution_key"],
                    "key_fingerprints": up["driver_distribution_key_fingerprints"],
                    "packages": packages,
                    "prefer": _text(decl["driver_version"]),
                }
            )
    if toolkit:
        wanted = _text(decl["container_toolkit_version"])
        version = wanted if "-" in wanted else wanted + "-1"
        names = list(data["container_toolkit_packages"][decl["container_toolkit_package_set"]])
        if boolean(decl["container_toolkit_operator_extensions"], strict=False):
            names += list(data["container_toolkit_extension_packages"])
        repos.append(
            {
                "dest": "{0}/{1}".format(_strip_slashes(in_bundle(decl["container_toolkit_apt_repo_url"])), debarch),
                "source": "{0}/{1}".format(_strip_slashes(up["container_toolkit_apt_repo_url"]), debarch),
                "source_name": "bundle_upstream.container_toolkit_apt_repo_url",
                "suites": [],
                "components": [],
                "architecture": debarch,
                "key": up["container_toolkit_gpg_key_url"],
                "key_fingerprints": [fpr for fpr in [up["container_toolkit_gpg_key_fingerprint"]] if fpr],
                "packages": [{"name": name, "version": version} for name in names],
                "prefer": "",
            }
        )
    return {"errors": [], "repos": repos, "files": files, "key_paths": unique(in_bundle(key) for key in keys)}


# --- 3. the fleet -------------------------------------------------------------------------------


def image_list(images: t.Any) -> list[dict[str, str]]:
    """bundle_images (already judged by image_errors), each with its place in the bundle."""
    return [
        {
            "at": "bundle_images[{0}]".format(index),
            "name": image["name"],
            "digest": image["digest"],
            "url": image["archive_url"],
            "dest": "images/" + posixpath.basename(_text(image["archive_url"])),
            "sha256": re.sub(r"^sha256:", "", _text(image["archive_checksum"])),
        }
        for index, image in enumerate(images or [])
    ]


def _merge_repos(hosts: Mapping[str, Mapping[str, t.Any]]) -> list[dict[str, t.Any]]:
    """One entry per place in the bundle; each host's packages stay a set of their own, resolved against the
    suites that host reads (hosts on Debian 12 and 13 share one archive)."""
    places: dict[str, dict[str, t.Any]] = {}
    for host, plan in hosts.items():
        for repo in plan["repos"]:
            if repo["dest"] not in places:
                places[repo["dest"]] = dict(repo, sets=[], suites=[], hosts=[], conflict=[])
            entry = places[repo["dest"]]
            one = {"suites": repo["suites"], "packages": repo["packages"], "prefer_upstream_version": repo["prefer"]}
            if one not in entry["sets"]:
                entry["sets"].append(one)
            entry["suites"].extend([suite for suite in repo["suites"] if suite not in entry["suites"]])
            entry["hosts"].append(host)
            if [repo["source"], repo["key"], repo["architecture"], repo["components"]] != [
                entry["source"],
                entry["key"],
                entry["architecture"],
                entry["components"],
            ]:
                entry["conflict"].append(host)
    return [places[dest] for dest in sorted(places, key=_fold)]


def bundle_dirs(bundle_dir: str, paths: Iterable[str]) -> list[str]:
    """The directories to create: bundle_dir and every path's directory under it."""
    dirs = [bundle_dir] + [posixpath.dirname(path) for path in paths]
    return unique(re.sub(r"/+$", "", re.sub(r"^(?!/)", bundle_dir + "/", d)) for d in dirs)


def bundle_plan(hosts: Mapping[str, Mapping[str, t.Any]], images: t.Any, bundle_dir: str) -> dict[str, t.Any]:
    """Every host's needs merged by place in the bundle, with the images and the directories to create.

    hosts: host name -> host_plan's result, in the group's order. Returns {repos, files, key_paths, images, dirs,
    errors}: errors names the places hosts disagree about.
    """
    repos = _merge_repos(hosts)
    files = _sorted_by(unique(f for plan in hosts.values() for f in plan["files"]), "dest")
    keys = _sorted_by(unique(k for plan in hosts.values() for k in plan["key_paths"]))
    carried = image_list(images)
    dests = [f["dest"] for f in files]
    errors = []
    conflicting = [repo for repo in repos if repo["conflict"]]
    if conflicting or len(unique(dests)) != len(files):
        errors.append(
            "Hosts put different upstream repositories (or checksums) at the same place in the bundle: {0}"
            " (hosts {1}); give them separate mirror variables, or the same declaration.".format(
                ", ".join(unique([r["dest"] for r in conflicting] + dests)), ", ".join(host for repo in repos for host in repo["conflict"])
            )
        )
    dirs = bundle_dirs(bundle_dir, dests + keys + [image["dest"] for image in carried])
    return {"repos": repos, "files": files, "key_paths": keys, "images": carried, "dirs": dirs, "errors": errors}


# --- 4. after upstream answered -----------------------------------------------------------------


def image_problem(read: Mapping[str, t.Any]) -> str:
    """What is wrong with one image archive read (the read command's registered result), or ""."""
    image = read["item"]
    if read.get("rc") != 0:
        lines = read.get("stderr_lines") or []
        return "archive_url: cannot read {0} as an OCI archive: {1}".format(image["url"], lines[-1] if lines else read.get("msg"))
    found = json.loads(read["stdout"])
    manifests = found.get("manifests") or []
    digests = [m["digest"] for m in manifests]
    named = next((m for m in manifests if m["digest"] == image["digest"]), {}).get("name", "")
    if found.get("sha256", "") != image["sha256"]:
        return "archive_checksum: {0} has sha256 {1}, not the pinned {2}; pin the archive's own checksum (its .sha256) or fix archive_url".format(
            image["url"], found.get("sha256", ""), image["sha256"]
        )
    if image["digest"] not in digests:
        return (
            "digest: the archive's index.json names manifest {0}, not the pinned {1}; pin the digest the archive"
            " carries (the .digest file beside a gpufleet image archive)".format(", ".join(digests) or "none", image["digest"])
        )
    if named != image["name"]:
        return (
            'name: the archive names the image "{0}" (io.containerd.image.name, else'
            " org.opencontainers.image.ref.name), the name an import gives it; set name to that".format(named)
        )
    return ""


def written_paths(plan: Mapping[str, t.Any]) -> list[str]:
    """Every file the bundle writes besides the repositories, relative to bundle_dir."""
    files = [f["dest"] for f in plan["files"]]
    images = [i["dest"] for i in plan["images"]]
    return (
        files
        + [p + ".sha256" for p in files]
        + images
        + [p + ".sha256" for p in images]
        + [p + ".digest" for p in images]
        + list(plan["key_paths"])
        + ["manifest.json"]
    )


def unstaged(plan: Mapping[str, t.Any], bundle_dir: str, new_dirs: Iterable[str]) -> list[str]:
    """The files check mode cannot stage: those in directories it has not created (every file below is new)."""
    new = list(new_dirs)
    return [path for path in written_paths(plan) if posixpath.dirname(bundle_dir + "/" + path) in new]


def manifest(
    signing_key: str,
    repos_written: Iterable[Mapping[str, t.Any]],
    files: Iterable[Mapping[str, t.Any]],
    images: Iterable[Mapping[str, t.Any]],
    keys: Iterable[str],
    site_key: str,
) -> dict[str, t.Any]:
    """The manifest: every artifact with its source and sha256, what signed each repository read, what was left
    to the nodes' distribution mirror. repos_written: the bundle_apt_repository loop's results."""
    repos_written = list(repos_written)
    artifacts = []
    for answer in repos_written:
        for artifact in answer.get("artifacts") or []:
            artifacts.append(dict(artifact, artifact=answer["item"]["dest"] + "/" + artifact["artifact"]))
    for f in files:
        artifacts.append({"artifact": f["dest"], "source": f["url"], "sha256": f["sha256"], "package": ""})
        artifacts.append(
            {
                "artifact": f["dest"] + ".sha256",
                "package": "",
                "source": "crictl role table",
                "sha256": _sha256_of(_text(f["sha256"]) + "\n"),
            }
        )
    for image in images:
        artifacts.append(
            {
                "artifact": image["dest"],
                "source": image["url"],
                "sha256": image["sha256"],
                "package": "",
                "image": _text(image["name"]) + "@" + _text(image["digest"]),
            }
        )
        for kind in ("sha256", "digest"):
            artifacts.append(
                {"artifact": image["dest"] + "." + kind, "source": "bundle_images", "package": "", "sha256": _sha256_of(_text(image[kind]) + "\n")}
            )
    for key in keys:
        artifacts.append({"artifact": key, "source": "bundle_signing_key", "package": "", "sha256": _sha256_of(site_key + "\n")})
    return {
        "signing_key": _text(signing_key).replace(" ", "").upper(),
        "artifacts": _sorted_by(artifacts, "artifact"),
        "upstream": {a["item"]["dest"]: a.get("upstream", {}) for a in repos_written},
        # Left to the nodes' distribution mirror (docs/air-gapped.md, "What the bundle assumes").
        "external": {a["item"]["dest"]: a.get("external", []) for a in repos_written},
    }
