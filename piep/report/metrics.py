"""Predictions as Prometheus metrics (`piep export`), for alerting beside a measured
counter (DCGM's `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, in mJ per GPU).

A deployment at a given load (a batch; a serving engine's batch is its requests arriving
at once) is priced once; its J per output token, mean board power, throughput and J per
request become gauges named as Prometheus names units (`_joules`, `_watts`), each with a
`bound` label: `predicted`, and the 90 % band's `low` and `high`. The power band joins the
energy band's and the time band's far ends (low energy over high time, and the reverse):
wider than either. Built with `prometheus-client` (the `metrics` extra).
"""

from __future__ import annotations

from typing import Any

# name: (help, the prediction's value, its band's (low, high) from the document)
GAUGES = {
    "piep_predicted_energy_per_output_token_joules": "predicted energy per output token, "
                                                     "all GPU boards",
    "piep_predicted_energy_per_request_joules": "predicted energy per request, all GPU boards",
    "piep_predicted_power_watts": "predicted mean board power of the deployment, all GPUs",
    "piep_predicted_output_tokens_per_second": "predicted output tokens per second",
}
LABELS = ("model", "gpu", "engine", "layout", "load", "bound")


def values(doc: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each gauge's value per bound (predicted, low, high) from a prediction document."""
    e, t = doc["energy_j"], doc["time_s"]
    tokens, requests = doc["output_tokens"], doc["requests"]
    band = doc.get("interval") or {}
    e_lo, e_hi = band.get("energy_j") or (e, e)
    t_lo, t_hi = band.get("time_s") or (t, t)
    return {
        "piep_predicted_energy_per_output_token_joules":
            {"predicted": e / tokens, "low": e_lo / tokens, "high": e_hi / tokens},
        "piep_predicted_energy_per_request_joules":
            {"predicted": e / requests, "low": e_lo / requests, "high": e_hi / requests},
        "piep_predicted_power_watts": {"predicted": e / t, "low": e_lo / t_hi,
                                       "high": e_hi / t_lo},
        "piep_predicted_output_tokens_per_second":
            {"predicted": tokens / t, "low": tokens / t_hi, "high": tokens / t_lo},
    }


def registry(doc: dict[str, Any]):
    """A prometheus-client registry holding the gauges of one prediction document."""
    from prometheus_client import CollectorRegistry, Gauge
    reg = CollectorRegistry()
    lay = doc["layout"]
    w = doc.get("workload") or {}
    labels = {"model": doc["model"], "gpu": doc["gpu"],
              "engine": (doc.get("engine_ref") or {}).get("name", ""),
              "layout": f"tp{lay['tp']}pp{lay['pp']}dp{lay['dp']}",
              "load": f"batch{w.get('batch', doc['requests'])}x{w.get('prompt_len', '')}/"
                      f"{w.get('gen_len', '')}"}
    for name, per_bound in values(doc).items():
        gauge = Gauge(name, GAUGES[name], LABELS, registry=reg)
        for bound, value in per_bound.items():
            gauge.labels(**labels, bound=bound).set(value)
    return reg


def exposition(doc: dict[str, Any]) -> str:
    """The gauges in Prometheus' text format."""
    from prometheus_client import generate_latest
    return generate_latest(registry(doc)).decode()
