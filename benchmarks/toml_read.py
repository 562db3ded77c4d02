"""Time reading containerd configs: tomllib versus our stdlib reader.

Targets on Python 3.8-3.10 have no tomllib; the containerd_drop_in module then
reads the main config, its imports, `containerd config default` and `config
dump` with plugins/module_utils/_toml.py. This prints how long each takes on
real containerd outputs (tests/unit/plugins/fixtures/containerd), per call.

    .venv/bin/python benchmarks/toml_read.py [ROUNDS]
"""

from __future__ import annotations

import sys
import timeit
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "build" / "collections"))

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _toml


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print("{0:<36} {1:>8} {2:>12} {3:>12}".format("file", "bytes", "tomllib", "ours"))
    for path in sorted((ROOT / "tests" / "unit" / "plugins" / "fixtures" / "containerd").glob("*.toml")):
        text = path.read_text()
        assert _toml.parse(text) == tomllib.loads(text)
        ref = timeit.timeit(lambda: tomllib.loads(text), number=rounds) / rounds
        ours = timeit.timeit(lambda: _toml.parse(text), number=rounds) / rounds
        print("{0:<36} {1:>8} {2:>10.2f}ms {3:>10.2f}ms".format(path.name, len(text), ref * 1e3, ours * 1e3))


if __name__ == "__main__":
    main()
