# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""ansible-playbook for the unit tests that run a real play (not a test file).

One way to start it, so that every such test sees the same Ansible: this checkout as the collection
gpufleet.nvidia, the checkout's ansible.cfg, no colours in the output it parses, and the ansible-playbook of
the Python that runs pytest (the venv's, also when pytest runs as .venv/bin/python without the venv on PATH).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def ansible_env(**extra: str) -> dict[str, str]:
    """The environment of a run: this process's, with the collection and configuration above; `extra` on top."""
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / "build" / "collections"),
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        PATH="{0}{1}{2}".format(BIN, os.pathsep, os.environ.get("PATH", "")),
    )
    env.update(extra)
    return env


def playbook(*args: str, timeout: int = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """ansible-playbook `args` from the checkout's root; its output (stdout and stderr together) as text."""
    return subprocess.run(
        [str(BIN / "ansible-playbook"), *args],
        cwd=ROOT,
        env=env or ansible_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )


def local_play(book: Path | str, *options: str, hosts: str = "localhost,", rc: int = 0, env: dict[str, str] | None = None) -> str:
    """`book` with this machine as its node(s) `hosts` (connection local, this Python); it must end with `rc`.

    Returns its whole output; on another exit status the assertion shows the output's end.
    """
    done = playbook("-i", hosts, "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable, str(book), *options, env=env)
    assert done.returncode == rc, done.stdout[-8000:]
    return done.stdout
