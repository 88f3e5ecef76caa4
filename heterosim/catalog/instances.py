"""Cloud instance types (``instances.yaml``): defaults for a cluster host type's ``instance:`` key.

Each entry gives the GPU, GPU count, intra-host fabric, NIC count, rated network bandwidth and
NCCL's transport of one instance type, with its source. A host type naming ``instance:`` takes
these as defaults; any key it sets itself wins.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml


@cache
def instance_types() -> dict[str, dict]:
    """Every catalogued instance type, keyed ``provider/name`` (lower case)."""
    text = resources.files("heterosim.catalog").joinpath("instances.yaml").read_text()
    return {str(k).lower(): dict(v) for k, v in yaml.safe_load(text)["instances"].items()}


def host_type_defaults(name: str) -> dict | None:
    """Host type keys of instance ``name`` (``nic_speed`` per NIC), or None if not catalogued."""
    entry = instance_types().get(str(name).strip().lower())
    if entry is None:
        return None
    per_nic = float(entry["network_gbps"]) / int(entry["nics"])
    return {
        "gpu": entry["gpu"],
        "gpus": int(entry["gpus"]),
        "fabric": entry["fabric"],
        "nics": int(entry["nics"]),
        "nic_speed": f"{per_nic:g}Gbps",
        "transport": entry["transport"],
    }
