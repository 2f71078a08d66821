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


def _call_args(text, open_at):
    """The top-level arguments of the call whose `(` is at `open_at`."""
    depth, args, cur = 0, [], []
    for ch in text[open_at:]:
        if ch in "([{":
            depth += 1
            if depth == 1:
                continue
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur))
                return args
        if ch == "," and depth == 1:
            args.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    return args


def logged_only(text):
    """Names passed as `emf_record`'s properties (its fourth argument): logged, not published."""
    names = set()
    for call in re.finditer(r"emf_record\(", text):
        args = _call_args(text, call.end() - 1)
        if len(args) >= 4:
            names |= set(re.findall(r'Metric::new\(\s*"([A-Za-z]+)"', args[3]))
    return names


def emitted(function):
    """Metric names the function's crate publishes in its EMF lines (not those it only logs)."""
    names, logged = set(), set()
    for path in (ROOT / "crates" / CRATES[function] / "src").rglob("*.rs"):
        text = path.read_text()
        names |= set(re.findall(r'Metric::new\(\s*"([A-Za-z]+)"', text))
        logged |= logged_only(text)
    return names - logged


def test_logged_values_are_not_counted_as_metrics():
    # msk-ingest logs CommitVersion and DurationMs beside its metrics; refine logs JobsRun.
    assert "CommitVersion" not in emitted("msk-ingest")
    assert "RecordsDeadLettered" in emitted("msk-ingest")
    assert "JobsRun" not in emitted("refine")
    assert "JobsBehindTarget" in emitted("refine")


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
