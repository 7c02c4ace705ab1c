"""otel/metrics.yaml and the Prometheus gauge built from it."""
from pathlib import Path
import re

from prometheus_client import CollectorRegistry, Gauge, generate_latest
import pytest
import yaml

from tinyllm import telemetry
from tinyllm.telemetry import SPEC_ACCEPT_RATE, record_spec_stats, spec_accept_rate_gauge

YAML = Path(__file__).resolve().parents[2] / "otel" / "metrics.yaml"


class Stats:
    """Like SpecStats: accepted / drafted, 0 when nothing was drafted."""

    def __init__(self, drafted, accepted):
        self.drafted, self.accepted = drafted, accepted

    def accept_rate(self):
        return self.accepted / self.drafted if self.drafted else 0.0


def declared():
    doc = yaml.safe_load(YAML.read_text())
    return {m["name"]: m for m in doc["metrics"]}[SPEC_ACCEPT_RATE]


def sample_value(registry, draft):
    text = generate_latest(registry).decode()
    m = re.search(r'^tl_engine_spec_accept_rate\{draft="%s"\} (\S+)$' % draft, text, re.M)
    assert m, text
    return float(m.group(1))


def test_yaml_declares_the_gauge():
    m = declared()
    assert m["name"] == "tl.engine.spec_accept_rate"
    assert m["instrument"] == "gauge" and m["unit"] == "1"
    assert m["prometheus"] == "tl_engine_spec_accept_rate"
    assert "accepted" in m["description"] and "drafted" in m["description"]
    assert [a["name"] for a in m["attributes"]] == ["draft"]


def test_code_name_equals_yaml():
    assert telemetry.SPEC_ACCEPT_RATE == declared()["name"]
    assert telemetry.load_metrics()[SPEC_ACCEPT_RATE] == declared()


def test_gauge_help_and_type_from_yaml():
    reg = CollectorRegistry()
    spec_accept_rate_gauge(reg)
    text = generate_latest(reg).decode()
    assert "# TYPE tl_engine_spec_accept_rate gauge" in text
    assert f"# HELP tl_engine_spec_accept_rate {declared()['description']}" in text


def test_record_from_registry():
    reg = CollectorRegistry()
    assert record_spec_stats(Stats(drafted=8, accepted=6), reg, draft="prompt_lookup") == 0.75
    assert sample_value(reg, "prompt_lookup") == 0.75
    record_spec_stats(Stats(drafted=4, accepted=1), reg, draft="prompt_lookup")  # same gauge, updated
    assert sample_value(reg, "prompt_lookup") == 0.25


def test_record_into_a_given_gauge_and_nothing_drafted():
    reg = CollectorRegistry()
    gauge = spec_accept_rate_gauge(reg)
    assert isinstance(gauge, Gauge) and spec_accept_rate_gauge(reg) is gauge
    record_spec_stats(Stats(drafted=0, accepted=0), gauge, draft="ngram")
    assert sample_value(reg, "ngram") == 0.0


def test_registries_are_independent():
    a, b = CollectorRegistry(), CollectorRegistry()
    record_spec_stats(Stats(2, 1), a, draft="ngram")
    record_spec_stats(Stats(5, 5), b, draft="ngram")
    assert (sample_value(a, "ngram"), sample_value(b, "ngram")) == (0.5, 1.0)


@pytest.mark.parametrize("rate", [1.5, -0.1, float("nan")])
def test_not_a_fraction_refused(rate):
    class Bad:
        def accept_rate(self):
            return rate

    with pytest.raises(ValueError):
        record_spec_stats(Bad(), CollectorRegistry())
