# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Downloads on the node as ansible.builtin.get_url makes them, for the modules that fetch (release_binary,
apt_signed_source): ansible.module_utils.urls' options (proxies, netrc, client certificates, GSSAPI, headers,
ciphers, timeout), less validate_certs - HTTPS is always verified, a private CA is trusted with ca_path."""

from __future__ import annotations

import ipaddress
import typing as t
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url, url_argument_spec

try:
    from ansible.module_utils.urls import mask_url
except ImportError:  # ansible-core 2.18 has no mask_url: the same masking, written out
    from urllib.parse import urlparse, urlunparse

    def mask_url(url: str) -> str:
        """The URL with its user name and password shown as ****."""
        parsed = urlparse(url)
        if not parsed.username and not parsed.password:
            return url
        credentials = "{0}:{1}@".format(parsed.username, parsed.password) if parsed.password else "{0}@".format(parsed.username)
        masked = "****:****@" if parsed.password else "****@"
        return urlunparse(parsed._replace(netloc=parsed.netloc.replace(credentials, masked)))


__all__ = ["FetchError", "mask_url", "open_url", "refuse_insecure_transport", "refuse_userinfo", "url_options_spec"]


class FetchError(Exception):
    """A download that did not give the file; str() says which URL (masked) and why, status is the HTTP status
    (-1 when there was no answer)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def url_options_spec() -> dict[str, dict[str, t.Any]]:
    """ansible.module_utils.urls' options as get_url takes them, less url and validate_certs."""
    spec = url_argument_spec()
    # Each module names its own URLs; HTTPS is always verified.
    del spec["url"], spec["validate_certs"]
    spec["url_username"]["aliases"] = ["username"]
    spec["url_password"]["aliases"] = ["password"]
    spec.update(
        {
            "timeout": {"type": "int", "default": 30},
            "ca_path": {"type": "path"},
            "headers": {"type": "dict"},
            "unredirected_headers": {"type": "list", "elements": "str", "default": []},
            "decompress": {"type": "bool", "default": True},
            "ciphers": {"type": "list", "elements": "str"},
            "use_netrc": {"type": "bool", "default": True},
        }
    )
    return spec


def refuse_userinfo(module: AnsibleModule, url: str, option: str, fix: str = "give them as url_username and url_password, which are never logged") -> None:
    """Fail, naming `option`, when the URL carries credentials (user:pass@host).

    A URL is echoed where a password must not be: the result's `invocation`, -v output, AWX's job events, an apt
    sources file every user can read. The userinfo is added to the module's no-log values before failing, so the
    refusal itself, and the arguments it echoes, show it masked."""
    netloc = urlsplit(url).netloc
    if "@" not in netloc:
        return
    userinfo = netloc.rsplit("@", 1)[0]
    password = userinfo.split(":", 1)[1] if ":" in userinfo else ""
    module.no_log_values.update(value for value in (userinfo, password) if value)
    module.fail_json(
        msg="{0}: {1} carries credentials in the URL (user:password@), which would be shown in results and logs; remove them from the URL and {2}".format(
            option, mask_url(url), fix
        )
    )


def refuse_insecure_transport(module: AnsibleModule, url: str, option: str, allowed: bool, allow_option: str = "allow_insecure_transport") -> None:
    """Fail, naming `option` and `allow_option`, when the URL is not https:// and that is not allowed; warn when it is.

    Over http, ftp or file nothing vouches for who served the bytes, so only a pinned digest checks them; the
    flag is for mirrors that really have no TLS (a loopback test mirror, a file already on the node)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https":
        return
    if not allowed:
        module.fail_json(
            msg="{0}: {1} is fetched over {2}, which does not authenticate the server; use an https:// URL, or set "
            "{3}: true to accept it (the sha256 still checks the download)".format(option, mask_url(url), scheme or "no scheme", allow_option)
        )
    if not _on_this_host(url):
        module.warn("{0}: {1} is fetched over {2}, not https ({3}); only its sha256 checks it".format(option, mask_url(url), scheme, allow_option))


def _on_this_host(url: str) -> bool:
    """A file on the node, or a server on its loopback: no network between, so nothing for TLS to protect (the flag
    is still needed; only the warning is left out, as for the test ground's loopback mirror)."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "file":
        return True
    host = (parts.hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def open_url(module: AnsibleModule, url: str) -> t.Any:
    """A response to read, opened as get_url opens one with the module's url options; FetchError otherwise."""
    params = module.params
    response, info = fetch_url(
        module,
        url,
        headers=params["headers"],
        use_proxy=params["use_proxy"],
        force=params["force"],
        timeout=params["timeout"],
        ca_path=params["ca_path"],
        unredirected_headers=params["unredirected_headers"],
        decompress=params["decompress"],
        ciphers=params["ciphers"],
        use_netrc=params["use_netrc"],
    )
    # file:// and ftp:// answer without an HTTP status; get_url accepts them on the same terms.
    fetched = (
        info["status"] == 200 or (url.startswith("file:/") and response is not None) or (url.startswith("ftp:/") and str(info.get("msg", "")).startswith("OK"))
    )
    if not fetched:
        raise FetchError("could not fetch {0}: {1}".format(mask_url(url), info.get("msg", info["status"])), info["status"])
    return response
