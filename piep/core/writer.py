"""The writer's check: a lab record is read back the way the fits will read it (its
schema, then its type) before it is appended, so a record no fit could read is refused
in one line when it is written, not found at fitting time."""

from __future__ import annotations

from typing import Any, Mapping

from piep.core.records import Measurement, ServingReplay
from piep.core.samples import (CollectiveSample, HostOverhead, KernelCensus, ModuleSample,
                               WaitSample)

# the typed reading of each schema the lab writes (others are checked by schema alone)
TYPED = {"piep.measurement": Measurement.from_json,
         "piep.serving_measurement": ServingReplay.from_json,
         "piep.module_sample": ModuleSample.from_json,
         "piep.host_overhead": HostOverhead.from_json,
         "piep.collective_sample": CollectiveSample.from_json,
         "piep.wait_samples": WaitSample.from_json,
         "piep.kernel_census": KernelCensus.from_json}


def append_record(path, doc: Mapping[str, Any]) -> None:
    """Append one record of the lab to a JSONL file, after reading it back the way the
    fits will (its schema, then its type): a record they could not read is refused in one
    line before it is written, not found at fitting time."""
    from piep.core.artifacts import append_jsonl, check_document
    where = f"record for {path}"
    check_document(dict(doc), where)
    if doc["schema"] in TYPED:
        TYPED[doc["schema"]](doc, where)
    append_jsonl(path, dict(doc))
