# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd_unit_files: a role's own systemd units as gpufleet.nvidia.node_files entries, written in one call."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

# Where local administrators' and our own units go (systemd.unit(5)): above the packages' /usr/lib/systemd/system.
SYSTEMD_UNIT_DIR = "/etc/systemd/system"


def systemd_unit_files(units: object, texts: object, directory: str = SYSTEMD_UNIT_DIR, mode: str = "0644") -> list[dict[str, str]]:
    """One node_files entry per unit, in the order given: its path under `directory`, its text and mode.

    `texts` are the units' rendered templates, in the same order (as
    query('ansible.builtin.template', ...) returns them).
    """
    if not isinstance(units, Sequence) or isinstance(units, str) or not all(isinstance(unit, str) and unit and "/" not in unit for unit in units):
        raise AnsibleFilterError("systemd_unit_files: give a list of unit names (such as example.service), got {0!r}".format(units))
    if not isinstance(texts, Sequence) or isinstance(texts, str) or len(texts) != len(units):
        raise AnsibleFilterError(
            "systemd_unit_files: give one text per unit ({0} units: {1}), got {2}".format(
                len(units), ", ".join(units), repr(texts) if isinstance(texts, str) else type(texts).__name__
            )
        )
    if not posixpath.isabs(directory):
        raise AnsibleFilterError("systemd_unit_files: directory must be absolute, got {0!r}".format(directory))
    return [{"path": posixpath.join(directory, unit), "content": str(text), "mode": mode} for unit, text in zip(units, texts)]


# Control characters: a newline in a value would start a new line (a new setting) of the unit or env file.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Words systemd reads as they are: nothing to quote, no specifier, no variable.
_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")


def _no_control(value: object, what: str) -> str:
    text = str(value)
    found = _CONTROL.search(text)
    if found:
        raise AnsibleFilterError(
            "{0}: {1!r} holds a control character ({2!r}); in a systemd unit or env file it would start a new line "
            "(a new setting): remove it from the variable that gave it".format(what, text, found.group())
        )
    return text


def systemd_exec(argv: object) -> str:
    """A command line for ExecStart= that systemd reads back as exactly `argv` (systemd.service(5), "Command lines").

    Each word is double-quoted where it is not plain, with backslash and double quote escaped; then every `%`
    becomes `%%` (a specifier otherwise) and every `$` becomes `$$` (a variable otherwise). A word with a control
    character is refused: a newline would end ExecStart= and start another setting."""
    if not isinstance(argv, Sequence) or isinstance(argv, str) or not argv:
        raise AnsibleFilterError("systemd_exec: give the command as a non-empty list of words, got {0!r}".format(argv))
    words = []
    for index, word in enumerate(argv):
        text = _no_control(word, "systemd_exec: word {0}".format(index))
        if not _PLAIN.fullmatch(text):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        words.append(text.replace("%", "%%").replace("$", "$$"))
    return " ".join(words)


def systemd_setting(value: object, name: str = "value") -> str:
    """A value for a unit setting other than a command line (a path in ConditionPathExists=, EnvironmentFile=, a
    Description=): `%` doubled, so that systemd does not read a specifier (systemd.unit(5), "Specifiers").
    Control characters are refused: a newline would start another setting."""
    return _no_control(value, "systemd_setting: {0}".format(name)).replace("%", "%%")


def systemd_env_value(value: object, name: str = "value") -> str:
    """A value for a line NAME=VALUE of an EnvironmentFile= (systemd.exec(5)): as it is where it is plain, else
    double-quoted with backslash and double quote escaped, so that spaces, quotes and `#` stay part of it. Control
    characters are refused: a newline would start another variable. EnvironmentFile= expands neither specifiers nor
    variables."""
    text = _no_control(value, "systemd_env_value: {0}".format(name))
    if _PLAIN.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class FilterModule(FilterTable):
    """Filters that turn a role's units into node_files entries, and values into what systemd reads back as given."""

    FILTERS = (systemd_unit_files, systemd_exec, systemd_setting, systemd_env_value)
