"""The fastest and slowest hosts of each shipped engine profile's runs, written into the
profile (`meta.host_probe_range_us`; `piep train --engine E` writes it with every fit):
what `predict` and `serve` say an answer moves by between those hosts.

    python benchmarks/host_range.py [--write]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from piep.core.engines import names
    from piep.fit.engines import engine_records, host_probe_range_us
    from piep.predict.engines import shipped_profile_dir
    for engine in names(host_fitted=True):
        hosts = host_probe_range_us(engine_records("h200", engine))
        print(f"{engine}: launch probes {hosts[0]:.2f}-{hosts[1]:.2f} us")
        if "--write" in sys.argv:
            path = shipped_profile_dir("h200", engine) / "profile.json"
            doc = json.loads(path.read_text())
            doc["meta"]["host_probe_range_us"] = hosts
            doc["meta"]["host_probe_range_command"] = "python benchmarks/host_range.py --write"
            path.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
