"""Prometheus export of the metrics declared in otel/metrics.yaml.

No global registry: every gauge lives in a `prometheus_client.CollectorRegistry` the caller owns
(or one created here), so tests and several engines in one process never collide.
"""

from pathlib import Path
import math
import weakref

from prometheus_client import CollectorRegistry, Gauge
import yaml

METRICS_PATH = Path(__file__).resolve().parents[2] / "otel" / "metrics.yaml"
SPEC_ACCEPT_RATE = "tl.engine.spec_accept_rate"

_gauges: "weakref.WeakKeyDictionary[CollectorRegistry, Gauge]" = weakref.WeakKeyDictionary()


def load_metrics(path: Path | None = None) -> dict[str, dict]:
    """The declared metrics by OpenTelemetry name."""
    doc = yaml.safe_load(Path(path or METRICS_PATH).read_text(encoding="utf-8"))
    return {m["name"]: m for m in doc["metrics"]}


def spec_accept_rate_gauge(registry: CollectorRegistry | None = None, metrics_path: Path | None = None) -> Gauge:
    """The `tl.engine.spec_accept_rate` gauge of `registry` (created there on first use)."""
    registry = registry if registry is not None else CollectorRegistry()
    if registry not in _gauges:
        m = load_metrics(metrics_path)[SPEC_ACCEPT_RATE]
        if m["instrument"] != "gauge":
            raise ValueError(f"otel/metrics.yaml declares {SPEC_ACCEPT_RATE} as a {m['instrument']}, expected a gauge")
        labels = [a["name"] for a in m.get("attributes", [])]
        _gauges[registry] = Gauge(m["prometheus"], m["description"], labelnames=labels, registry=registry)
    return _gauges[registry]


def record_spec_stats(stats, gauge_or_registry, draft: str = "none") -> float:
    """Set the gauge's `draft` series to `stats.accept_rate()` and return that rate.

    `stats` is anything with `accept_rate()` (L10.8's SpecStats); `gauge_or_registry` is the gauge
    from `spec_accept_rate_gauge` or the registry to find or create it in.
    """
    rate = float(stats.accept_rate())
    if not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
        raise ValueError(f"accept_rate() = {rate!r} is not a fraction in [0, 1]")
    gauge = gauge_or_registry if isinstance(gauge_or_registry, Gauge) else spec_accept_rate_gauge(gauge_or_registry)
    gauge.labels(draft=draft).set(rate)
    return rate
