# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The download options of the modules that fetch on the node (release_binary, apt_signed_source), one
    argument spec in code: module_utils/_fetch.py's url_options_spec(), ansible.module_utils.urls' options as
    get_url takes them, less validate_certs."""

    DOCUMENTATION = r"""
options:
  timeout:
    description: Seconds to wait for each download to answer.
    type: int
    default: 30
  ca_path:
    description:
      - PEM formatted file that contains a CA certificate to be used for validation, for a mirror whose
        certificate a private CA signed. Without it, the node's own CA certificates are used.
    type: path
  client_cert:
    description:
      - PEM formatted certificate chain file to be used for SSL client authentication.
      - This file can also include the key as well, and if the key is included, O(client_key) is not required.
    type: path
  client_key:
    description:
      - PEM formatted file that contains your private key to be used for SSL client authentication.
      - If O(client_cert) contains both the certificate and key, this option is not required.
    type: path
  url_username:
    description:
      - The username for use in HTTP basic authentication.
      - This parameter can be used without O(url_password) for sites that allow empty passwords.
    type: str
    aliases: [username]
  url_password:
    description:
      - The password for use in HTTP basic authentication.
      - If the O(url_username) parameter is not specified, the O(url_password) parameter will not be used.
    type: str
    aliases: [password]
  force_basic_auth:
    description:
      - Send the Basic authentication header with the first request, for servers that do not answer 401 first.
    type: bool
    default: false
  use_netrc:
    description:
      - Use credentials from C(~/.netrc) (as Basic authentication headers) when the URL's host is in it.
      - When V(false), C(.netrc) credentials are ignored.
    type: bool
    default: true
  use_gssapi:
    description:
      - Use GSSAPI to perform the authentication, typically this is for Kerberos or Kerberos through Negotiate
        authentication.
      - Requires the Python library L(gssapi,https://github.com/pythongssapi/python-gssapi) to be installed.
      - Credentials for GSSAPI can be specified with O(url_username)/O(url_password) or with the GSSAPI env var
        E(KRB5CCNAME) that specified a custom Kerberos credential cache.
    type: bool
    default: false
  use_proxy:
    description:
      - If V(false), it will not use a proxy, even if one is defined in an environment variable on the node.
    type: bool
    default: true
  http_agent:
    description: Header to identify as, generally appears in web server logs.
    type: str
    default: ansible-httpget
  headers:
    description: Custom HTTP headers for every download, as a dictionary.
    type: dict
  unredirected_headers:
    description:
      - Header names (case insensitive) not sent again on a redirected request, such as C(Authorization), so that
        credentials for the mirror do not follow a redirect to another host.
    type: list
    elements: str
    default: []
  force:
    description: "Ask caches and proxies for a fresh copy (C(Cache-Control: no-cache))."
    type: bool
    default: false
  decompress:
    description:
      - Whether to decompress a gzip C(Content-Encoding) of the response (not the file's own compression).
        Checksums are taken of what remains.
    type: bool
    default: true
  ciphers:
    description:
      - SSL/TLS Ciphers to use for the request.
      - 'When a list is provided, all ciphers are joined in order with C(:).'
      - See the L(OpenSSL Cipher List Format,https://www.openssl.org/docs/manmaster/man1/openssl-ciphers.html#CIPHER-LIST-FORMAT)
        for more details.
    type: list
    elements: str
"""
