"""Stand-in for the get-pip.py that ansible-test downloads to bootstrap pip.

ansible-test --venv fetches get-pip-<version>.py from a host this test ground
cannot reach. sanity.sh places this file in ansible-test's cache instead: it
bootstraps pip with the interpreter's own ensurepip, then installs the pip
version ansible-test asked for from PyPI, which is reachable.
"""

from __future__ import annotations

import ensurepip
import subprocess
import sys

# get-pip.py's own switches, which pip itself does not know.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main() -> None:
    ensurepip.bootstrap(upgrade=True, default_pip=True)
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
    subprocess.check_call([sys.executable, "-m", "pip", "install", *args])


if __name__ == "__main__":
    main()
