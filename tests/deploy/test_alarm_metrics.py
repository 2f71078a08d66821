"""Every alarm on a `Lakestream` metric watches a metric the functions emit: an alarm on a name
no EMF line carries would never fire (TreatMissingData notBreaching) and nobody would know.
The names are read from the template and looked up in the functions' `Metric::new("<name>"`
calls, with the `Function` dimension of the crate that emits them."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import template_contract as contract  # noqa: E402

CRATES = {"msk-ingest": "msk-ingest", "s3-log-ingest": "s3-log-ingest", "refine": "refine",
          "maintenance": "maintenance"}


def lakestream_alarm_metrics():
    """(alarm, metric name, Function dimension) of every alarm on the Lakestream namespace."""
    raw = contract.yaml_parse((ROOT / "template.yaml").read_text())
    out = []
    for name, r in raw["Resources"].items():
        if r.get("Type") != "AWS::CloudWatch::Alarm":
            continue
        p = r["Properties"]
        metrics = [p] if "MetricName" in p else [m["MetricStat"]["Metric"] for m in p.get("Metrics", [])
                                                 if "MetricStat" in m]
        for m in metrics:
            if m.get("Namespace") != "Lakestream":
                continue
            dims = {d["Name"]: d["Value"] for d in m.get("Dimensions", [])}
            out.append((name, m["MetricName"], dims.get("Function")))
    return out


def emitted(function):
    """Metric names the function's crate puts in its EMF lines."""
    names = set()
    for path in (ROOT / "crates" / CRATES[function] / "src").rglob("*.rs"):
        names |= set(re.findall(r'Metric::new\(\s*"([A-Za-z]+)"', path.read_text()))
    return names


def test_every_lakestream_alarm_watches_an_emitted_metric():
    alarms = lakestream_alarm_metrics()
    names = {a for a, _, _ in alarms}
    assert {"DeadLettersAlarm", "RefineFreshnessAlarm"} <= names, alarms
    for alarm, metric, function in alarms:
        assert function in CRATES, f"{alarm}: metric {metric} has no known Function dimension"
        assert metric in emitted(function), f"{alarm} watches {function} {metric}, which it never emits"


def test_a_renamed_metric_is_caught():
    assert "RecordsDeadLettered" in emitted("msk-ingest")
    assert "RecordsDeadLetteredX" not in emitted("msk-ingest")
