#!/usr/bin/env python3
"""Offline deploy contract for template.yaml: what cfn-lint and `sam validate` do not know.

The template is transformed with the SAM translator (the one `sam` uses), parameters resolved to
their defaults (or `--param K=V`), conditions and intrinsics evaluated, and then:

* every generated `AWS::Lambda::EventSourceMapping` is validated against the
  `CreateEventSourceMapping` input shape botocore ships (types, list lengths - `Topics` takes
  exactly one item -, enums, numeric ranges, string patterns, required members);
* rules AWS enforces at deploy or run time that no linter checks (see RULES below).

Usage:
  template_contract.py [TEMPLATE] [--param K=V ...]      check a template (default template.yaml)
  template_contract.py samconfig --arch ARCH [FILE]       check samconfig.toml deploys ARCH

Exit status 1 with one line per finding (`RULE resource: message`), 0 when the contract holds.
"""

from __future__ import annotations

import argparse
import copy
import fnmatch
import gzip
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import botocore
from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

RULES = {
    "ESM-SHAPE": "event source mapping must match botocore's CreateEventSourceMapping input",
    "JOIN-DELIMITER": "Fn::Join's delimiter must be a plain string (no intrinsic functions)",
    "KAFKA-GROUP": "each Kafka event source needs its own consumer group, unique per function",
    "KAFKA-RETRY": "a Kafka event source must bound its retries (MaximumRetryAttempts or an "
    "on-failure destination, which caps them at 10); the default retries until records expire",
    "KAFKA-DESTINATION": "a Kafka on-failure destination must keep the records (S3 or kafka://); "
    "SQS/SNS receive only metadata",
    "KAFKA-PROVISIONED": "Kafka retry controls and kafka:// destinations need provisioned pollers",
    "KAFKA-IAM": "the function role lacks a permission Lambda's Kafka poller needs",
    "SQS-SOURCE": "an SQS event source needs a redrive policy on its queue, bounded concurrency "
    "and the SQS actions in the role",
    "SCHEDULE-NAME": "schedule names must be omitted or derived from the stack name "
    "(a fixed name fails the second stack in an account)",
    "SCHEDULE-RETRY": "a schedule needs an explicit RetryPolicy and a DeadLetterConfig",
    "ASYNC-FAILURE": "a scheduled function needs EventInvokeConfig with bounded retries and an "
    "on-failure destination",
    "MAINTENANCE-CONCURRENCY": "the maintenance function must run one job at a time "
    "(ReservedConcurrentExecutions: 1)",
    "S3-LIST": "a role that reads objects needs s3:ListBucket on the bucket (else 404 becomes 403)",
    "S3-MULTIPART": "a role that writes objects needs s3:AbortMultipartUpload there",
    "LOG-RETENTION": "every function logs to a log group with a retention",
    "BUCKET-VERSIONING": "VersioningConfiguration Suspended does nothing useful on a new bucket",
    "S3-DELETE": "only the maintenance function deletes lake files (vacuum, log cleanup, manifests); "
    "the others may delete only the conditional-put probe's object (_lakestream/probe/*)",
    "CONFIG-WRITE": "no function may write the shared pipeline config object (it only reads it)",
    "RAW-LOGS-POLICY": "the raw-logs bucket lets only S3's log delivery write, for this account's "
    "buckets (aws:SourceArn and aws:SourceAccount), and denies s3:PutObject to everyone else",
    "TLS-ONLY": "every bucket's policy denies requests without TLS (aws:SecureTransport false)",
    "SQS-UNUSED": "a role grants an SQS action no code calls",
    "TXN-RETENTION": "a log notification lives (queue + dead-letter queue retention) shorter than "
    "the access-log tables keep its object's txn ([access_logs] txn_retention_days)",
    "QUEUE-AGE-ALARM": "the log notification queue has an alarm on the age of its oldest message",
    "LOG-SOURCES": "a function fed S3 notifications by SQS must set LAKESTREAM_LOG_BUCKETS to buckets "
    "its role can read, never the lake's (else it reads whatever bucket a notification names)",
    "CDC-LANDING": "with a CDC landing bucket, the notified function reads it under every prefix of "
    "CdcLandingPrefixes (s3:GetObject, and s3:ListBucket for those keys), the queue accepts its "
    "notifications, and it is not the lake bucket",
    "LANDING-READ": "no role reads the CDC landing bucket outside the families' prefixes "
    "(CdcLandingPrefixes): s3:GetObject only on <landing>/<prefix>*, never on the whole bucket, "
    "and s3:ListBucket only with an s3:prefix condition under those prefixes",
    "KMS-OPTION": "with LakeKmsKeyArn every bucket the stack creates uses aws:kms with that key and "
    "an S3 Bucket Key (the server access log bucket keeps SSE-S3: log delivery does not support "
    "SSE-KMS), and every role that reads or writes such a bucket may kms:Decrypt and "
    "kms:GenerateDataKey with it; with CdcLandingKmsKeyArn the roles reading the landing bucket may "
    "kms:Decrypt with it; every KMS grant is one of those keys, through S3 only (kms:ViaService); "
    "without a key, SSE-S3 and no KMS grant",
    "REFINE-NOTICES": "every ingest function (a Kafka or S3-notification trigger) sends refine "
    "notices: LAKESTREAM_REFINE_QUEUE_URL names a FIFO queue its role may sqs:SendMessage to, which "
    "triggers the refine function with ReportBatchItemFailures and a visibility timeout at least "
    "its timeout; the refine function also runs on a schedule (the safety net for a lost notice)",
    "FRESHNESS-ALARM": "an alarm watches the refine function's JobsBehindTarget (namespace Lakestream, "
    "dimension Function=refine) and treats missing data as breaching (the function stopped)",
    "CATALOG-SCOPE": "the function that syncs the Glue catalog (LAKESTREAM_CATALOG_DATABASE) may make "
    "every call the sync makes on that database and its tables, and no Glue call on another "
    "database; no other function has any Glue permission",
    "REFINE-SENDERS": "the refine notices queue's policy denies sqs:SendMessage to every principal "
    "but the ingest functions' roles (a forged notice runs jobs and publishes their metrics) and "
    "denies requests without TLS",
    "FAILED-BATCHES-WRITERS": "the bucket Kafka mappings send failed batches to denies s3:PutObject to "
    "every principal but the consuming function's role (lakestream redrive turns its objects into lake "
    "rows)",
}

# Functions whose code deletes lake objects (vacuum, expired logs, stale manifests); every other
# function deletes only its conditional-put probe object (crates/lakestream-core/src/put_probe.rs).
DELETE_ROLES = {"MaintenanceFunctionRole"}
PROBE_OBJECTS = "arn:aws:s3:::*/_lakestream/probe/*"
# SQS actions the code or Lambda calls with a function's role: the SQS trigger and the drain
# (ReceiveMessage, DeleteMessage(Batch), GetQueueAttributes), async on-failure destinations
# (SendMessage). Only the refine function calls ChangeMessageVisibility (SQS_USED_BY).
SQS_USED = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:SendMessage"}
# Per role beyond SQS_USED: the refine function postpones the notices of a job holding for its
# freshness target (`lakestream-lambda` `postpone.rs`, ChangeMessageVisibilityBatch).
SQS_USED_BY = {"RefineFunctionRole": {"sqs:ChangeMessageVisibility"}}
SQS_DEFAULT_RETENTION = 345600


def txn_retention_days_default() -> int:
    """`[access_logs] txn_retention_days`'s default, read from the Rust source (one truth)."""
    src = (Path(__file__).resolve().parents[1] / "crates" / "lakestream-formats" / "src" / "config"
           / "access_logs.rs").read_text()
    m = re.search(r"fn default_txn_retention_days\(\) -> u32 \{\s*(\d+)", src)
    if m is None:
        raise SystemExit("template_contract: default_txn_retention_days not found in config/access_logs.rs")
    return int(m.group(1))

# Values for parameters that have no default (the check needs something shaped right).
PLACEHOLDERS = {
    "MskClusterArn": "arn:aws:kafka:us-east-1:123456789012:cluster/demo/0a1b2c3d-4e5f-6789-abcd-ef0123456789-1",
    "LakeBucketName": "lakestream-lake",
    "RawLogsBucketName": "lakestream-raw-logs",
    "PipelineConfig": "s3://lakestream-lake/lake/_config/lakestream.toml",
}
PSEUDO = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "lakestream",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
}
NO_VALUE = object()

# Permissions Lambda's MSK poller uses with the function's role (AWS Lambda developer guide,
# "Amazon MSK execution role permissions", IAM authentication).
KAFKA_ACTIONS = [
    "kafka-cluster:Connect",
    "kafka-cluster:DescribeCluster",
    "kafka-cluster:DescribeClusterDynamicConfiguration",
    "kafka-cluster:DescribeTopic",
    "kafka-cluster:ReadData",
    "kafka-cluster:DescribeGroup",
    "kafka-cluster:AlterGroup",
    "kafka:DescribeClusterV2",
    "kafka:GetBootstrapBrokers",
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeVpcs",
]
SQS_ACTIONS = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
# Actions AWS-managed policies grant (only those this template's functions may get from SAM).
MANAGED = {
    "AWSLambdaBasicExecutionRole": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
    "AWSLambdaMSKExecutionRole": [
        "kafka:DescribeCluster",
        "kafka:DescribeClusterV2",
        "kafka:GetBootstrapBrokers",
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeVpcs",
        "ec2:DeleteNetworkInterface",
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    ],
    "AWSLambdaSQSQueueExecutionRole": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
}


class _NoIam:
    """ManagedPolicyLoader stand-in: the template names no managed policy, so nothing to look up."""

    def load(self) -> dict[str, str]:
        return {}


def lambda_input_shape() -> tuple[dict[str, Any], dict[str, Any]]:
    """(shapes, CreateEventSourceMapping input shape) from the botocore installed with sam."""
    path = Path(botocore.__file__).parent / "data" / "lambda" / "2015-03-31" / "service-2.json.gz"
    model = json.loads(gzip.decompress(path.read_bytes()))
    shapes = model["shapes"]
    op = model["operations"]["CreateEventSourceMapping"]
    return shapes, shapes[op["input"]["shape"]]


def validate_shape(value: Any, shape: dict[str, Any], shapes: dict[str, Any], where: str) -> list[str]:
    """Errors of `value` against a botocore shape (resolved values only)."""
    kind = shape.get("type")
    errors: list[str] = []
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        for req in shape.get("required", []):
            if req not in value:
                errors.append(f"{where}: {req} is required")
        for key, item in value.items():
            member = shape["members"].get(key)
            if member is None:
                errors.append(f"{where}: unknown member {key}")
                continue
            errors += validate_shape(item, shapes[member["shape"]], shapes, f"{where}.{key}")
    elif kind == "list":
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {value!r}"]
        if "max" in shape and len(value) > shape["max"]:
            errors.append(f"{where}: {len(value)} items, the API allows at most {shape['max']}")
        if "min" in shape and len(value) < shape["min"]:
            errors.append(f"{where}: {len(value)} items, the API needs at least {shape['min']}")
        for i, item in enumerate(value):
            errors += validate_shape(item, shapes[shape["member"]["shape"]], shapes, f"{where}[{i}]")
    elif kind == "map":
        if not isinstance(value, dict):
            return [f"{where}: expected a map, got {value!r}"]
    elif kind in ("integer", "long"):
        try:
            number = int(value)
        except (TypeError, ValueError):
            return [f"{where}: expected an integer, got {value!r}"]
        if "min" in shape and number < shape["min"]:
            errors.append(f"{where}: {number} < minimum {shape['min']}")
        if "max" in shape and number > shape["max"]:
            errors.append(f"{where}: {number} > maximum {shape['max']}")
    elif kind == "boolean":
        if not isinstance(value, bool) and str(value).lower() not in ("true", "false"):
            errors.append(f"{where}: expected a boolean, got {value!r}")
    elif kind == "string":
        if not isinstance(value, str):
            return [f"{where}: expected a string, got {value!r}"]
        if "enum" in shape and value not in shape["enum"]:
            errors.append(f"{where}: {value!r} is not one of {shape['enum']}")
        if "min" in shape and len(value) < shape["min"]:
            errors.append(f"{where}: shorter than {shape['min']}")
        if "max" in shape and len(value) > shape["max"]:
            errors.append(f"{where}: longer than {shape['max']}")
        if "pattern" in shape and not re.fullmatch(shape["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {shape['pattern']}")
    return errors


class Resolver:
    """Evaluates the intrinsics of a transformed template for one set of parameter values."""

    def __init__(self, template: dict[str, Any], params: dict[str, Any]):
        self.t = template
        self.params = params
        self.conditions: dict[str, bool] = {}
        for name in template.get("Conditions", {}):
            self.condition(name)

    def condition(self, name: str) -> bool:
        if name not in self.conditions:
            self.conditions[name] = bool(self.value(self.t["Conditions"][name]))
        return self.conditions[name]

    def ref(self, name: str) -> Any:
        if name in self.params:
            return self.params[name]
        if name in PSEUDO:
            return PSEUDO[name]
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.t.get("Resources", {}):
            return f"{name.lower()}-physical-id"
        raise KeyError(f"Ref to unknown {name}")

    def get_att(self, name: str, attr: str) -> str:
        kind = self.t["Resources"][name]["Type"]
        service = {"AWS::S3::Bucket": "s3", "AWS::SQS::Queue": "sqs", "AWS::IAM::Role": "iam"}.get(kind, "lambda")
        if service == "s3":
            return f"arn:aws:s3:::{name.lower()}-physical-id"
        if service == "iam":
            return f"arn:aws:iam::123456789012:role/{name}"
        return f"arn:aws:{service}:us-east-1:123456789012:{name}"

    def sub(self, text: str, local: dict[str, Any]) -> str:
        def one(m: re.Match[str]) -> str:
            key = m.group(1)
            if key.startswith("!"):
                return "${" + key[1:] + "}"
            if key in local:
                return str(local[key])
            if "." in key:
                res, attr = key.split(".", 1)
                return self.get_att(res, attr)
            return str(self.ref(key))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            items = [self.value(x) for x in node]
            return [x for x in items if x is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                res, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(res, attr)
            if key == "Fn::Sub":
                if isinstance(arg, str):
                    return self.sub(arg, {})
                local = {k: self.value(v) for k, v in arg[1].items()}
                return self.sub(arg[0], local)
            if key == "Fn::Join":
                return self.value(arg[0]).join(str(x) for x in self.value(arg[1]))
            if key == "Fn::Split":
                return self.value(arg[1]).split(self.value(arg[0]))
            if key == "Fn::Select":
                return self.value(arg[1])[int(self.value(arg[0]))]
            if key == "Fn::If":
                return self.value(arg[1] if self.condition(arg[0]) else arg[2])
            if key == "Fn::Equals":
                return str(self.value(arg[0])) == str(self.value(arg[1]))
            if key == "Fn::Not":
                return not self.value(arg[0])
            if key == "Fn::And":
                return all(self.value(x) for x in arg)
            if key == "Fn::Or":
                return any(self.value(x) for x in arg)
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::FindInMap":
                m, k1, k2 = (self.value(x) for x in arg)
                return self.t["Mappings"][m][str(k1)][k2]
        out = {}
        for k, v in node.items():
            resolved = self.value(v)
            if resolved is not NO_VALUE:
                out[k] = resolved
        return out

    def resources(self) -> dict[str, dict[str, Any]]:
        """The resources that exist for these parameters, with resolved properties."""
        out = {}
        for name, res in self.t.get("Resources", {}).items():
            if "Condition" in res and not self.condition(res["Condition"]):
                continue
            resolved = dict(res)
            resolved["Properties"] = self.value(res.get("Properties", {}))
            out[name] = resolved
        return out


def join_delimiter_findings(node: Any, path: str = "") -> list[str]:
    """Fn::Join with a non-string delimiter anywhere in the raw template."""
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "Fn::Join" and isinstance(v, list) and v and not isinstance(v[0], str):
                found.append(f"JOIN-DELIMITER {path}: delimiter is {json.dumps(v[0])[:80]}")
            found += join_delimiter_findings(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += join_delimiter_findings(v, f"{path}[{i}]")
    return found


def role_statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    """Allow statements of a role: inline policies plus known AWS-managed ones."""
    statements = []
    for policy in role["Properties"].get("Policies", []):
        doc = policy.get("PolicyDocument", {})
        st = doc.get("Statement", [])
        statements += st if isinstance(st, list) else [st]
    for arn in role["Properties"].get("ManagedPolicyArns", []):
        name = str(arn).rsplit("/", 1)[-1]
        statements.append({"Effect": "Allow", "Action": MANAGED.get(name, []), "Resource": "*"})
    return [s for s in statements if s.get("Effect") == "Allow"]


def _listify(x: Any) -> list[Any]:
    return x if isinstance(x, list) else [x]


def allows(statements: list[dict[str, Any]], action: str, resource: str | None = None) -> bool:
    for s in statements:
        if not any(fnmatch.fnmatchcase(action, a) for a in _listify(s.get("Action", []))):
            continue
        if resource is None or any(fnmatch.fnmatchcase(resource, r) for r in _listify(s.get("Resource", []))):
            return True
    return False


def function_role(resources: dict[str, Any], fn_ref: str) -> tuple[str, dict[str, Any]] | None:
    """The role of the function a FunctionName/Target resolves to."""
    for name, res in resources.items():
        if res["Type"] != "AWS::Lambda::Function":
            continue
        if fn_ref in (f"{name.lower()}-physical-id", f"arn:aws:lambda:us-east-1:123456789012:{name}"):
            role_arn = res["Properties"].get("Role", "")
            role_name = role_arn.rsplit("/", 1)[-1]
            return name, resources.get(role_name, {"Properties": {}})
    return None


def role_denies(role: dict[str, Any]) -> list[dict[str, Any]]:
    """Deny statements of a role's inline policies."""
    out = []
    for policy in role["Properties"].get("Policies", []):
        st = policy.get("PolicyDocument", {}).get("Statement", [])
        out += [x for x in (st if isinstance(st, list) else [st]) if x.get("Effect") == "Deny"]
    return out


def effective(role: dict[str, Any], action: str, resource: str) -> bool:
    """Allowed by the role and not denied by it (conditions on Deny ignored: none are used)."""
    if not allows(role_statements(role), action, resource):
        return False
    return not allows(role_denies(role), action, resource)


def _bucket_policies(resources: dict[str, Any], bucket: str) -> list[dict[str, Any]]:
    ref = f"{bucket.lower()}-physical-id"
    return [
        r["Properties"].get("PolicyDocument", {})
        for r in resources.values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"].get("Bucket") == ref
    ]


def _statements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    st = doc.get("Statement", [])
    return st if isinstance(st, list) else [st]


def _tls_denied(docs: list[dict[str, Any]]) -> bool:
    for doc in docs:
        for s in _statements(doc):
            cond = s.get("Condition", {}).get("Bool", {})
            resources = [str(r) for r in _listify(s.get("Resource", []))]
            if (
                s.get("Effect") == "Deny"
                and s.get("Principal") in ("*", {"AWS": "*"})
                and "s3:*" in _listify(s.get("Action", []))
                and str(cond.get("aws:SecureTransport")).lower() == "false"
                and any(r.endswith("/*") for r in resources)
                and any("/" not in r.split(":::", 1)[-1] for r in resources)
            ):
                return True
    return False


def _failed_batches_writers(resources: dict[str, Any]) -> list[str]:
    """FAILED-BATCHES-WRITERS: every S3 on-failure destination of a Kafka mapping has a bucket
    policy that denies s3:PutObject to any principal whose aws:PrincipalArn is not the role of a
    function consuming from Kafka (ArnNotEquals/ArnNotLike on aws:PrincipalArn)."""
    findings = []
    writers: dict[str, set[str]] = {}
    for r in resources.values():
        props = r["Properties"] if r["Type"] == "AWS::Lambda::EventSourceMapping" else {}
        dest = str(props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination", ""))
        if ":kafka:" not in str(props.get("EventSourceArn", "")) or not dest.startswith("arn:aws:s3:::"):
            continue
        fn = function_role(resources, str(props.get("FunctionName", "")))
        role_arn = str(resources.get(fn[0], {}).get("Properties", {}).get("Role", "")) if fn else ""
        writers.setdefault(dest[len("arn:aws:s3:::"):], set()).add(role_arn)
    for bucket, roles in sorted(writers.items()):
        name = next((n for n in resources if f"{n.lower()}-physical-id" == bucket), bucket)
        denied = False
        for doc in _bucket_policies(resources, name):
            for st in _statements(doc):
                cond = st.get("Condition", {})
                allowed = {str(v) for op in ("ArnNotEquals", "ArnNotLike")
                           for v in _listify(cond.get(op, {}).get("aws:PrincipalArn", []))}
                denied |= (st.get("Effect") == "Deny"
                           and st.get("Principal") in ("*", {"AWS": "*"})
                           and any(fnmatch.fnmatchcase("s3:PutObject", a) for a in _listify(st.get("Action", [])))
                           and bool(allowed) and roles <= allowed)
        if not denied:
            findings.append(f"FAILED-BATCHES-WRITERS {name}: no Deny of s3:PutObject for principals other "
                            f"than the Kafka functions' roles ({', '.join(sorted(roles))})")
    return findings


def _check_least_privilege(resources: dict[str, Any], params: dict[str, Any], txn_days: int) -> list[str]:
    """Issue 24: deletes, config writes, the raw-logs policy, TLS, unused SQS actions, retention, alarms."""
    findings = []
    lake, prefix = params.get("LakeBucketName"), params.get("LakePrefix")
    config_uri = str(params.get("PipelineConfig", ""))
    if config_uri.startswith("s3://"):
        config_arn = "arn:aws:s3:::" + config_uri[len("s3://"):]
    else:
        config_arn = f"arn:aws:s3:::{lake}/{prefix}/_config/lakestream.toml"
    for name, res in sorted(resources.items()):
        if res["Type"] != "AWS::IAM::Role":
            continue
        for s in role_statements(res):
            actions = _listify(s.get("Action", []))
            if any(fnmatch.fnmatchcase("s3:DeleteObject", a) for a in actions) and name not in DELETE_ROLES:
                for r in _listify(s.get("Resource", [])):
                    if str(r).startswith("arn:aws:s3:::") and not fnmatch.fnmatchcase(str(r), PROBE_OBJECTS):
                        findings.append(f"S3-DELETE {name}: s3:DeleteObject on {r} (only {', '.join(sorted(DELETE_ROLES))} deletes lake files)")
            for a in actions:
                if str(a).startswith("sqs:") and a not in SQS_USED | SQS_USED_BY.get(name, set()):
                    findings.append(f"SQS-UNUSED {name}: {a} is granted but no code calls it")
        if effective(res, "s3:PutObject", config_arn) or effective(res, "s3:DeleteObject", config_arn):
            findings.append(f"CONFIG-WRITE {name}: can write the pipeline config {config_arn}")

    findings += _failed_batches_writers(resources)
    for name, res in sorted(resources.items()):
        if res["Type"] == "AWS::S3::Bucket" and not _tls_denied(_bucket_policies(resources, name)):
            findings.append(f"TLS-ONLY {name}: no bucket policy denies requests without TLS (aws:SecureTransport false)")
        if res["Type"] != "AWS::S3::BucketPolicy":
            continue
        statements = _statements(res["Properties"].get("PolicyDocument", {}))
        delivery = [
            s for s in statements
            if s.get("Effect") == "Allow" and "logging.s3.amazonaws.com" in json.dumps(s.get("Principal"))
        ]
        if not delivery:
            continue
        for s in delivery:
            keys = {k for op in s.get("Condition", {}).values() for k in op}
            if "aws:SourceArn" not in keys:
                findings.append(f"RAW-LOGS-POLICY {name}: the logging service's Allow has no aws:SourceArn condition")
            if "aws:SourceAccount" not in keys:
                findings.append(f"RAW-LOGS-POLICY {name}: the logging service's Allow has no aws:SourceAccount condition")
        denied = any(
            s.get("Effect") == "Deny"
            and s.get("Principal") in ("*", {"AWS": "*"})
            and any(fnmatch.fnmatchcase("s3:PutObject", a) for a in _listify(s.get("Action", [])))
            and "logging.s3.amazonaws.com" in json.dumps(s.get("Condition", {}))
            for s in statements
        )
        if not denied:
            findings.append(f"RAW-LOGS-POLICY {name}: no Deny of s3:PutObject for principals other than the logging service")

    # The notification queue: what a bucket notifies, or what an SQS event source reads.
    queues = set()
    for res in resources.values():
        for qc in res["Properties"].get("NotificationConfiguration", {}).get("QueueConfigurations", []) if res["Type"] == "AWS::S3::Bucket" else []:
            queues.add(str(qc.get("Queue", "")).rsplit(":", 1)[-1])
        if res["Type"] == "AWS::Lambda::EventSourceMapping" and ":sqs:" in str(res["Properties"].get("EventSourceArn", "")):
            queues.add(str(res["Properties"]["EventSourceArn"]).rsplit(":", 1)[-1])
    alarms = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    for q in sorted(queues):
        props = resources.get(q, {}).get("Properties", {})
        total = int(props.get("MessageRetentionPeriod", SQS_DEFAULT_RETENTION))
        dlq = str(props.get("RedrivePolicy", {}).get("deadLetterTargetArn", "")).rsplit(":", 1)[-1]
        where = q
        if dlq:
            total += int(resources.get(dlq, {}).get("Properties", {}).get("MessageRetentionPeriod", SQS_DEFAULT_RETENTION))
            where = dlq
        if total >= txn_days * 86400:
            findings.append(
                f"TXN-RETENTION {where}: a notification can live {total / 86400:g} days ({q} + its "
                f"dead-letter queue; a redrive starts a new retention period), not less than the "
                f"{txn_days} days the access-log tables keep its object's txn: lower the queues' "
                f"MessageRetentionPeriod or raise txn_retention_days"
            )
        aged = any(
            a.get("MetricName") == "ApproximateAgeOfOldestMessage"
            and a.get("Namespace") == "AWS/SQS"
            and any(str(d.get("Value", "")).endswith(f":{q}") or d.get("Value") == q for d in a.get("Dimensions", []))
            for a in alarms
        )
        if not aged:
            findings.append(f"QUEUE-AGE-ALARM {q}: no CloudWatch alarm on ApproximateAgeOfOldestMessage")
    return findings


def check(template_path: Path, overrides: dict[str, str], txn_retention_days: int | None = None) -> list[str]:
    raw = yaml_parse(template_path.read_text())
    findings = join_delimiter_findings(raw)
    params = {}
    for name, spec in raw.get("Parameters", {}).items():
        if name in overrides:
            value: Any = overrides[name]
        elif "Default" in spec:
            value = spec["Default"]
        elif spec.get("Type", "").startswith("List<"):
            value = ["placeholder-0123456789abcdef0"]
        else:
            value = PLACEHOLDERS.get(name, "placeholder")
        if spec.get("Type") == "CommaDelimitedList" and isinstance(value, str):
            value = value.split(",")
        params[name] = value
    # The translator asks boto3 for a region (no request is made); the check is region-neutral.
    os.environ.setdefault("AWS_DEFAULT_REGION", PSEUDO["AWS::Region"])
    sam = copy.deepcopy(raw)
    # As `sam validate` does: code locations are local until `sam deploy` uploads them.
    sam.get("Globals", {}).get("Function", {}).pop("CodeUri", None)
    for res in sam.get("Resources", {}).values():
        if res.get("Type") == "AWS::Serverless::Function":
            res.setdefault("Properties", {})["CodeUri"] = "s3://placeholder/code.zip"
    cfn = transform(sam, {**PSEUDO, **params}, _NoIam())
    raw_resources = cfn["Resources"]
    resolver = Resolver(cfn, params)
    resources = resolver.resources()
    shapes, esm_shape = lambda_input_shape()

    groups: dict[str, dict[str, str]] = {}
    scheduled_functions: set[str] = set()
    for name, res in resources.items():
        props = res["Properties"]
        kind = res["Type"]
        if kind == "AWS::Lambda::EventSourceMapping":
            api = {("KMSKeyArn" if k == "KmsKeyArn" else k): v for k, v in props.items() if k != "Tags"}
            findings += [f"ESM-SHAPE {name}: {e}" for e in validate_shape(api, esm_shape, shapes, name)]
            findings += _check_source(name, props, resources, groups)
        elif kind == "AWS::Scheduler::Schedule":
            raw_name = raw_resources[name]["Properties"].get("Name")
            if raw_name is not None and "AWS::StackName" not in json.dumps(raw_name):
                findings.append(f"SCHEDULE-NAME {name}: fixed Name {props.get('Name')!r}")
            target = props.get("Target", {})
            if "RetryPolicy" not in target:
                findings.append(f"SCHEDULE-RETRY {name}: no RetryPolicy (default: 185 retries over 24 h)")
            if "DeadLetterConfig" not in target:
                findings.append(f"SCHEDULE-RETRY {name}: no DeadLetterConfig (undeliverable events vanish)")
            owner = function_role(resources, target.get("Arn", ""))
            if owner:
                scheduled_functions.add(owner[0])
        elif kind == "AWS::S3::Bucket":
            if props.get("VersioningConfiguration", {}).get("Status") == "Suspended":
                findings.append(f"BUCKET-VERSIONING {name}: Status Suspended")
        elif kind == "AWS::IAM::Role":
            findings += _check_role_s3(name, role_statements(res))
    findings += _check_log_sources(resources)
    findings += _check_refine_notices(resources)
    findings += _check_catalog_scope(resources)
    landing = str(params.get("CdcLandingBucketName", ""))
    findings += _check_cdc_landing(resources, landing, str(params.get("LakeBucketName", "")), _landing_prefixes(params))
    findings += _check_landing_read(resources, landing, _landing_prefixes(params))
    findings += _check_kms_option(resources, params)

    invoke_configs = {
        function_role(resources, r["Properties"].get("FunctionName", ""))[0]: r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::EventInvokeConfig"
        and function_role(resources, r["Properties"].get("FunctionName", ""))
    }
    for fn in sorted(scheduled_functions):
        cfg = invoke_configs.get(fn)
        if cfg is None or "MaximumRetryAttempts" not in cfg:
            findings.append(f"ASYNC-FAILURE {fn}: async retries not bounded by an EventInvokeConfig")
        elif "OnFailure" not in cfg.get("DestinationConfig", {}):
            findings.append(f"ASYNC-FAILURE {fn}: no on-failure destination for async errors")
        else:
            dest = cfg["DestinationConfig"]["OnFailure"].get("Destination", "")
            role = function_role(resources, f"{fn.lower()}-physical-id")
            if ":sqs:" in dest and role and not allows(role_statements(role[1]), "sqs:SendMessage", dest):
                findings.append(f"ASYNC-FAILURE {fn}: role cannot sqs:SendMessage to its on-failure queue")

    findings += _check_least_privilege(
        resources, params, txn_retention_days if txn_retention_days is not None else txn_retention_days_default()
    )

    log_groups = {n: r for n, r in resources.items() if r["Type"] == "AWS::Logs::LogGroup"}
    for name, res in resources.items():
        if res["Type"] != "AWS::Lambda::Function":
            continue
        group = res["Properties"].get("LoggingConfig", {}).get("LogGroup")
        target = next((g for n, g in log_groups.items() if group == f"{n.lower()}-physical-id"), None)
        if target is None or "RetentionInDays" not in target["Properties"]:
            findings.append(f"LOG-RETENTION {name}: logs go to a group without retention")
        if "maintenance" in name.lower() and res["Properties"].get("ReservedConcurrentExecutions") != 1:
            findings.append(
                f"MAINTENANCE-CONCURRENCY {name}: ReservedConcurrentExecutions is "
                f"{res['Properties'].get('ReservedConcurrentExecutions')!r}"
            )
    return findings


def _s3_fed_queues(resources: dict[str, Any]) -> set[str]:
    """Queue ARNs S3 may send notifications to (a queue policy allowing s3.amazonaws.com)."""
    out = set()
    for r in resources.values():
        if r["Type"] != "AWS::SQS::QueuePolicy":
            continue
        for st in _listify(r["Properties"].get("PolicyDocument", {}).get("Statement", [])):
            if "s3.amazonaws.com" in json.dumps(st.get("Principal")) and "sqs:SendMessage" in _listify(st.get("Action", [])):
                out.update(str(x) for x in _listify(st.get("Resource", [])))
    return out


# Every Glue call lakestream-catalog makes (crates/lakestream-catalog/src/glue.rs).
CATALOG_ACTIONS = (
    "glue:GetDatabase", "glue:CreateDatabase", "glue:GetTable", "glue:CreateTable", "glue:UpdateTable",
    "glue:GetPartitions", "glue:BatchCreatePartition", "glue:BatchDeletePartition",
)


def _check_catalog_scope(resources: dict[str, Any]) -> list[str]:
    """CATALOG-SCOPE (issue 29)."""
    findings = []
    glue = "arn:aws:glue:us-east-1:123456789012"
    for fn, res in resources.items():
        if res["Type"] != "AWS::Lambda::Function":
            continue
        role = function_role(resources, f"{fn.lower()}-physical-id")
        statements = role_statements(role[1]) if role else []
        db = res["Properties"].get("Environment", {}).get("Variables", {}).get("LAKESTREAM_CATALOG_DATABASE")
        if db is None:
            if any(allows(statements, a) for a in CATALOG_ACTIONS + ("glue:DeleteTable", "glue:*")):
                findings.append(f"CATALOG-SCOPE {fn}: has Glue permissions but does not sync the catalog")
            continue
        db = str(db)
        for a in CATALOG_ACTIONS:
            on = [f"{glue}:catalog", f"{glue}:database/{db}"] + ([f"{glue}:table/{db}/raw_order"] if "Database" not in a else [])
            for r in on:
                if not allows(statements, a, r):
                    findings.append(f"CATALOG-SCOPE {fn}: role cannot {a} on {r}")
            for r in (f"{glue}:database/{db}x", f"{glue}:table/other_db/raw_order"):
                if allows(statements, a, r):
                    findings.append(f"CATALOG-SCOPE {fn}: role may {a} on {r}, outside database {db}")
    return findings


def _check_refine_notices(resources: dict[str, Any]) -> list[str]:
    """REFINE-NOTICES and FRESHNESS-ALARM (issue 28)."""
    findings = []
    s3_fed = _s3_fed_queues(resources)
    ingest = set()
    for esm in resources.values():
        props = esm["Properties"]
        if esm["Type"] != "AWS::Lambda::EventSourceMapping":
            continue
        arn = str(props.get("EventSourceArn", ""))
        owner = function_role(resources, props.get("FunctionName", ""))
        if owner and (":kafka:" in arn or arn in s3_fed):
            ingest.add(owner[0])
    refine_fns = set()
    senders: dict[str, set[str]] = {}
    for fn in sorted(ingest):
        env = resources[fn]["Properties"].get("Environment", {}).get("Variables", {})
        url = str(env.get("LAKESTREAM_REFINE_QUEUE_URL", ""))
        queue = next((n for n in resources if url == f"{n.lower()}-physical-id"), None)
        if queue is None:
            findings.append(f"REFINE-NOTICES {fn}: LAKESTREAM_REFINE_QUEUE_URL does not name a queue of the stack ({url!r})")
            continue
        qprops = resources[queue]["Properties"]
        arn = f"arn:aws:sqs:us-east-1:123456789012:{queue}"
        if not qprops.get("FifoQueue"):
            findings.append(f"REFINE-NOTICES {queue}: not a FIFO queue (notices of one job would not coalesce)")
        role = function_role(resources, f"{fn.lower()}-physical-id")
        if role is None or not allows(role_statements(role[1]), "sqs:SendMessage", arn):
            findings.append(f"REFINE-NOTICES {fn}: role cannot sqs:SendMessage to {queue}")
        senders.setdefault(arn, set()).add(str(resources[fn]["Properties"].get("Role", "")))
        consumers = [
            e["Properties"] for e in resources.values()
            if e["Type"] == "AWS::Lambda::EventSourceMapping" and e["Properties"].get("EventSourceArn") == arn
        ]
        if not consumers:
            findings.append(f"REFINE-NOTICES {queue}: no function consumes it")
        for c in consumers:
            owner = function_role(resources, c.get("FunctionName", ""))
            if owner is None:
                continue
            refine_fns.add(owner[0])
            if "ReportBatchItemFailures" not in _listify(c.get("FunctionResponseTypes", [])):
                findings.append(f"REFINE-NOTICES {owner[0]}: consumes {queue} without ReportBatchItemFailures")
            timeout = int(resources[owner[0]]["Properties"].get("Timeout", 3))
            if int(qprops.get("VisibilityTimeout", 30)) < timeout:
                findings.append(f"REFINE-NOTICES {queue}: VisibilityTimeout below {owner[0]}'s timeout {timeout}")
    findings += _refine_senders(resources, senders)
    scheduled = {
        owner[0]
        for r in resources.values()
        if r["Type"] == "AWS::Scheduler::Schedule"
        for owner in [function_role(resources, r["Properties"].get("Target", {}).get("Arn", ""))]
        if owner
    }
    for fn in sorted(refine_fns - scheduled):
        findings.append(f"REFINE-NOTICES {fn}: no schedule runs it (a lost notice would wait forever)")
    alarmed = any(
        r["Type"] == "AWS::CloudWatch::Alarm"
        and r["Properties"].get("Namespace") == "Lakestream"
        and r["Properties"].get("MetricName") == "JobsBehindTarget"
        and {"Name": "Function", "Value": "refine"} in r["Properties"].get("Dimensions", [])
        and r["Properties"].get("TreatMissingData") == "breaching"
        for r in resources.values()
    )
    if refine_fns and not alarmed:
        findings.append("FRESHNESS-ALARM RefineFunction: no alarm on Lakestream JobsBehindTarget (Function=refine) treating missing data as breaching")
    return findings


def _refine_senders(resources: dict[str, Any], senders: dict[str, set[str]]) -> list[str]:
    """REFINE-SENDERS: each refine notices queue (by ARN, with the roles of the functions that
    send to it) has a queue policy that denies sqs:SendMessage to every principal whose
    aws:PrincipalArn is not one of exactly those roles, and denies requests without TLS."""
    findings = []
    for arn, roles in sorted(senders.items()):
        statements = [
            st
            for r in resources.values()
            if r["Type"] == "AWS::SQS::QueuePolicy"
            for st in _listify(r["Properties"].get("PolicyDocument", {}).get("Statement", []))
            if arn in _listify(st.get("Resource", []))
        ]
        only_senders = tls = False
        for st in statements:
            if st.get("Effect") != "Deny" or st.get("Principal") not in ("*", {"AWS": "*"}):
                continue
            actions = _listify(st.get("Action", []))
            cond = st.get("Condition", {})
            allowed = {str(v) for op in ("ArnNotEquals", "ArnNotLike")
                       for v in _listify(cond.get(op, {}).get("aws:PrincipalArn", []))}
            only_senders |= (any(fnmatch.fnmatchcase("sqs:SendMessage", a) for a in actions)
                             and allowed == roles)
            tls |= str(cond.get("Bool", {}).get("aws:SecureTransport")).lower() == "false"
        queue = arn.rsplit(":", 1)[-1]
        if not only_senders:
            findings.append(f"REFINE-SENDERS {queue}: no Deny of sqs:SendMessage for principals other than "
                            f"the ingest functions' roles ({', '.join(sorted(roles))})")
        if not tls:
            findings.append(f"REFINE-SENDERS {queue}: no Deny of requests without TLS")
    return findings


def _check_log_sources(resources: dict[str, Any]) -> list[str]:
    """LOG-SOURCES: each function an SQS queue of S3 notifications triggers names its buckets."""
    findings = []
    s3_fed = _s3_fed_queues(resources)
    for esm in resources.values():
        props = esm["Properties"]
        if esm["Type"] != "AWS::Lambda::EventSourceMapping" or str(props.get("EventSourceArn", "")) not in s3_fed:
            continue
        owner = function_role(resources, props.get("FunctionName", ""))
        if owner is None:
            continue
        fn, role = owner
        env = resources[fn]["Properties"].get("Environment", {}).get("Variables", {})
        buckets = [b.strip() for b in str(env.get("LAKESTREAM_LOG_BUCKETS", "")).split(",") if b.strip()]
        if not buckets:
            findings.append(f"LOG-SOURCES {fn}: no LAKESTREAM_LOG_BUCKETS")
            continue
        lake = str(env.get("LAKESTREAM_LAKE_ROOT", "")).removeprefix("s3://").split("/", 1)[0]
        for b in buckets:
            if b == lake:
                findings.append(f"LOG-SOURCES {fn}: LAKESTREAM_LOG_BUCKETS names the lake bucket {b}")
            elif not allows(role_statements(role), "s3:GetObject", f"arn:aws:s3:::{b}/key"):
                findings.append(f"LOG-SOURCES {fn}: role cannot s3:GetObject in log bucket {b}")
    return findings


def _landing_prefixes(params: dict[str, Any]) -> list[str]:
    """CdcLandingPrefixes as a list (the parameter is one comma-separated string)."""
    value = params.get("CdcLandingPrefixes", "")
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(p) for p in items if str(p)]


def _lists(statements: list[dict[str, Any]], bucket_arn: str, key: str) -> bool:
    """An Allow of s3:ListBucket on the bucket whose s3:prefix condition (if any) admits `key`:
    S3 answers a missing key 404, not 403, only then (it checks ListBucket with the key as
    s3:prefix)."""
    for s in statements:
        if not any(fnmatch.fnmatchcase("s3:ListBucket", a) for a in _listify(s.get("Action", []))):
            continue
        if not any(fnmatch.fnmatchcase(bucket_arn, r) for r in _listify(s.get("Resource", []))):
            continue
        cond = s.get("Condition", {})
        like = [str(v) for v in _listify(cond.get("StringLike", {}).get("s3:prefix", []))]
        equal = [str(v) for v in _listify(cond.get("StringEquals", {}).get("s3:prefix", []))]
        if not like and not equal:
            return True
        if any(fnmatch.fnmatchcase(key, v) for v in like) or key in equal:
            return True
    return False


def _check_landing_read(resources: dict[str, Any], landing: str, prefixes: list[str]) -> list[str]:
    """LANDING-READ (issue 38, 10): every role's grants on the landing bucket stay under the
    families' prefixes. Probed with keys outside them: the bucket's root, another folder, and a
    sibling of each prefix (`dms/erpx/` next to `dms/erp/`)."""
    if not landing:
        return []
    findings = []
    bucket = f"arn:aws:s3:::{landing}"
    outside = [f"{bucket}/x.csv", f"{bucket}/outside-the-families/public/t/x.csv"]
    outside += [f"{bucket}/{p.rstrip('/')}x/public/t/x.csv" for p in prefixes]
    shown = ", ".join(prefixes) or "none"
    for name, res in sorted(resources.items()):
        if res["Type"] != "AWS::IAM::Role":
            continue
        statements = role_statements(res)
        read = next((o for o in outside if allows(statements, "s3:GetObject", o)), None)
        if read is not None:
            findings.append(f"LANDING-READ {name}: may s3:GetObject {read}, outside the families' prefixes ({shown})")
        for s in statements:
            if not any(fnmatch.fnmatchcase("s3:ListBucket", a) for a in _listify(s.get("Action", []))):
                continue
            if not any(fnmatch.fnmatchcase(bucket, r) for r in _listify(s.get("Resource", []))):
                continue
            cond = s.get("Condition", {})
            values = [str(v) for op in ("StringLike", "StringEquals")
                      for v in _listify(cond.get(op, {}).get("s3:prefix", []))]
            wide = [v for v in values if not any(v.startswith(p) for p in prefixes)]
            if not values:
                findings.append(f"LANDING-READ {name}: s3:ListBucket on {bucket} without an s3:prefix condition (lists the whole bucket)")
            elif wide:
                findings.append(f"LANDING-READ {name}: s3:ListBucket on {bucket} for s3:prefix {wide[0]!r}, outside the families' prefixes ({shown})")
    return findings


def _check_kms_option(resources: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """KMS-OPTION (issue 38, 10): LakeKmsKeyArn encrypts the stack's buckets (Bucket Keys on),
    every role touching them may use the key through S3; CdcLandingKmsKeyArn lets the landing
    readers decrypt; no key: SSE-S3 and no KMS grant at all."""
    findings = []
    key = str(params.get("LakeKmsKeyArn", ""))
    landing = str(params.get("CdcLandingBucketName", ""))
    landing_key = str(params.get("CdcLandingKmsKeyArn", "")) if landing else ""
    via = f"s3.{PSEUDO['AWS::Region']}.amazonaws.com"
    encrypted = []
    for name, res in sorted(resources.items()):
        if res["Type"] != "AWS::S3::Bucket":
            continue
        sse = _listify(res["Properties"].get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [{}]))[0]
        default = sse.get("ServerSideEncryptionByDefault", {})
        algorithm, key_id = default.get("SSEAlgorithm"), default.get("KMSMasterKeyID")
        log_target = any(
            s.get("Effect") == "Allow" and "logging.s3.amazonaws.com" in json.dumps(s.get("Principal"))
            for doc in _bucket_policies(resources, name) for s in _statements(doc)
        )
        if log_target or not key:
            if algorithm not in (None, "AES256"):
                why = ("S3 server access log delivery does not support SSE-KMS default encryption"
                       if log_target else "LakeKmsKeyArn is empty")
                findings.append(f"KMS-OPTION {name}: encrypted with {algorithm}, not SSE-S3 (AES256): {why}")
            continue
        if algorithm != "aws:kms" or key_id != key:
            findings.append(f"KMS-OPTION {name}: encrypted with {algorithm} {key_id or ''}".rstrip()
                            + f", not aws:kms with LakeKmsKeyArn {key}")
        if str(sse.get("BucketKeyEnabled")).lower() != "true":
            findings.append(f"KMS-OPTION {name}: no S3 Bucket Key (BucketKeyEnabled): a KMS request per object read or written")
        encrypted.append(str(res["Properties"].get("BucketName") or f"{name.lower()}-physical-id"))
    keys = {k for k in (key, landing_key) if k}
    for name, res in sorted(resources.items()):
        if res["Type"] != "AWS::IAM::Role":
            continue
        statements = role_statements(res)
        for s in statements:
            if not any(str(a).startswith("kms:") for a in _listify(s.get("Action", []))):
                continue
            on = [str(r) for r in _listify(s.get("Resource", []))]
            if not keys:
                findings.append(f"KMS-OPTION {name}: KMS actions granted on {', '.join(on)} though no key parameter is set")
                continue
            if any(r not in keys for r in on):
                findings.append(f"KMS-OPTION {name}: KMS actions on {', '.join(r for r in on if r not in keys)}, "
                                "not LakeKmsKeyArn or CdcLandingKmsKeyArn")
            vias = _listify(s.get("Condition", {}).get("StringEquals", {}).get("kms:ViaService", []))
            if not vias or any(v != via for v in vias):
                findings.append(f"KMS-OPTION {name}: KMS grant not limited to S3 (Condition StringEquals kms:ViaService {via})")
        for bucket in encrypted:
            touches = any(
                any(fnmatch.fnmatchcase(a, act) for a in ("s3:GetObject", "s3:PutObject")
                    for act in _listify(s.get("Action", [])))
                and any(str(r).startswith(f"arn:aws:s3:::{bucket}/") or fnmatch.fnmatchcase(f"arn:aws:s3:::{bucket}/x", str(r))
                        for r in _listify(s.get("Resource", [])))
                for s in statements
            )
            for action in ("kms:Decrypt", "kms:GenerateDataKey"):
                if touches and not allows(statements, action, key):
                    findings.append(f"KMS-OPTION {name}: reads or writes {bucket} (SSE-KMS) but cannot {action} with LakeKmsKeyArn")
        reads_landing = landing and any(
            allows(statements, "s3:GetObject", f"arn:aws:s3:::{landing}/{p}public/t/x.csv") for p in _landing_prefixes(params)
        )
        if landing_key and reads_landing and not allows(statements, "kms:Decrypt", landing_key):
            findings.append(f"KMS-OPTION {name}: reads the landing bucket {landing} but cannot kms:Decrypt with CdcLandingKmsKeyArn")
    return findings


def _check_cdc_landing(resources: dict[str, Any], landing: str, lake: str, prefixes: list[str]) -> list[str]:
    """CDC-LANDING: the landing bucket of DMS / files families is readable by the function the
    notification queue triggers under each family prefix, may send to that queue, and is not the
    lake bucket."""
    if not landing:
        return []
    findings = []
    if landing == lake:
        findings.append(f"CDC-LANDING: the landing bucket {landing} is the lake bucket")
    bucket = f"arn:aws:s3:::{landing}"
    s3_fed = _s3_fed_queues(resources)
    for esm in resources.values():
        props = esm["Properties"]
        if esm["Type"] != "AWS::Lambda::EventSourceMapping" or str(props.get("EventSourceArn", "")) not in s3_fed:
            continue
        owner = function_role(resources, props.get("FunctionName", ""))
        if owner is None:
            continue
        fn, role = owner
        if not prefixes:
            findings.append(f"CDC-LANDING {fn}: no landing prefix (CdcLandingPrefixes) to read under")
        for p in prefixes:
            key = f"{p}public/orders/LOAD00000001.csv"
            if not allows(role_statements(role), "s3:GetObject", f"{bucket}/{key}"):
                findings.append(f"CDC-LANDING {fn}: role cannot s3:GetObject under {p} in the landing bucket {landing}")
            if not _lists(role_statements(role), bucket, key):
                findings.append(f"CDC-LANDING {fn}: role cannot s3:ListBucket for keys under {p} in the landing "
                                "bucket (a deleted object would be a 403, retried, not a 404)")
        queue_arn = str(props.get("EventSourceArn", ""))
        queue = queue_arn.rsplit(":", 1)[-1]
        senders = [
            s
            for r in resources.values()
            if r["Type"] == "AWS::SQS::QueuePolicy"
            for s in _listify(r["Properties"].get("PolicyDocument", {}).get("Statement", []))
            if "sqs:SendMessage" in _listify(s.get("Action", []))
            and queue_arn in _listify(s.get("Resource", []))
            and bucket in json.dumps(s.get("Condition", {}))
        ]
        if not senders:
            findings.append(f"CDC-LANDING {queue}: the queue policy does not let {landing} send notifications")
    return findings


def _check_source(name: str, props: dict[str, Any], resources: dict[str, Any], groups: dict[str, dict[str, str]]) -> list[str]:
    findings = []
    arn = str(props.get("EventSourceArn", ""))
    owner = function_role(resources, props.get("FunctionName", ""))
    statements = role_statements(owner[1]) if owner else []
    fn = owner[0] if owner else str(props.get("FunctionName"))
    if ":kafka:" in arn or "SelfManagedEventSource" in props:
        config = props.get("AmazonManagedKafkaEventSourceConfig") or props.get("SelfManagedKafkaEventSourceConfig") or {}
        group = config.get("ConsumerGroupId")
        if not group:
            findings.append(f"KAFKA-GROUP {name}: no ConsumerGroupId (Lambda generates one per mapping; set it)")
        elif group in groups.setdefault(fn, {}):
            findings.append(f"KAFKA-GROUP {name}: consumer group {group!r} also used by {groups[fn][group]}")
        else:
            groups[fn][group] = name
        destination = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        retries = props.get("MaximumRetryAttempts")
        bounded = retries is not None and int(retries) >= 0
        if not bounded and destination is None:
            findings.append(f"KAFKA-RETRY {name}: retries until the records expire (no MaximumRetryAttempts, no on-failure destination)")
        if destination is not None and not (destination.startswith("arn:aws:s3:::") or destination.startswith("kafka://")):
            findings.append(f"KAFKA-DESTINATION {name}: {destination} keeps only metadata")
        provisioned = "ProvisionedPollerConfig" in props
        needs = [k for k in ("MaximumRetryAttempts", "BisectBatchOnFunctionError", "MaximumRecordAgeInSeconds") if k in props]
        if destination is not None and destination.startswith("kafka://"):
            needs.append("kafka:// destination")
        if needs and not provisioned:
            findings.append(f"KAFKA-PROVISIONED {name}: {', '.join(needs)} without ProvisionedPollerConfig")
        for action in KAFKA_ACTIONS:
            if not allows(statements, action):
                findings.append(f"KAFKA-IAM {name}: role of {fn} lacks {action}")
        if destination is not None and destination.startswith("arn:aws:s3:::"):
            for action, res in (("s3:PutObject", destination + "/x"), ("s3:ListBucket", destination)):
                if not allows(statements, action, res):
                    findings.append(f"KAFKA-IAM {name}: role of {fn} lacks {action} on the on-failure bucket")
    elif ":sqs:" in arn:
        queue = arn.rsplit(":", 1)[-1]
        queue_props = resources.get(queue, {}).get("Properties", {})
        if "RedrivePolicy" not in queue_props:
            findings.append(f"SQS-SOURCE {name}: queue {queue} has no RedrivePolicy (poison messages loop forever)")
        if "MaximumConcurrency" not in props.get("ScalingConfig", {}):
            findings.append(f"SQS-SOURCE {name}: no ScalingConfig.MaximumConcurrency")
        for action in SQS_ACTIONS:
            if not allows(statements, action, arn):
                findings.append(f"SQS-SOURCE {name}: role of {fn} lacks {action} on the queue")
    return findings


def _check_role_s3(role: str, statements: list[dict[str, Any]]) -> list[str]:
    findings = []
    for s in statements:
        actions = _listify(s.get("Action", []))
        for resource in _listify(s.get("Resource", [])):
            m = re.fullmatch(r"arn:aws:s3:::([^/]+)/(.*)", str(resource))
            if not m:
                continue
            bucket_arn = f"arn:aws:s3:::{m.group(1)}"
            if "s3:GetObject" in actions and not allows(statements, "s3:ListBucket", bucket_arn):
                findings.append(f"S3-LIST {role}: s3:GetObject on {resource} without s3:ListBucket on {bucket_arn}")
            reads_lake = "s3:GetObject" in actions
            if "s3:PutObject" in actions and reads_lake and not allows(statements, "s3:AbortMultipartUpload", str(resource)):
                findings.append(f"S3-MULTIPART {role}: s3:PutObject on {resource} without s3:AbortMultipartUpload")
    return findings


def check_samconfig(path: Path, arch: str) -> list[str]:
    """samconfig.toml must deploy the architecture that was built."""
    if not path.exists():
        return []
    config = tomllib.loads(path.read_text())
    overrides = ""
    for env in config.values():
        if isinstance(env, dict):
            overrides += " " + str(env.get("deploy", {}).get("parameters", {}).get("parameter_overrides", ""))
    m = re.search(r"Architecture=\\?\"?([a-z0-9_]+)", overrides)
    if m is None:
        return [
            f"ARCH {path}: parameter_overrides does not pin Architecture, so the stack keeps "
            f"whatever it had; add Architecture=\\\"{arch}\\\" (the functions were built for {arch})"
        ]
    if m.group(1) != arch:
        return [
            f"ARCH {path}: deploys Architecture={m.group(1)} but the functions were built for "
            f"{arch}; run `make deploy ARCH={m.group(1)}` or change Architecture in {path}"
        ]
    return []


def main(argv: list[str]) -> int:
    if argv[:1] == ["samconfig"]:
        p = argparse.ArgumentParser(prog="template_contract.py samconfig")
        p.add_argument("--arch", required=True)
        p.add_argument("file", nargs="?", default="samconfig.toml")
        a = p.parse_args(argv[1:])
        findings = check_samconfig(Path(a.file), a.arch)
    else:
        p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("template", nargs="?", default="template.yaml")
        p.add_argument("--param", action="append", default=[], metavar="K=V")
        a = p.parse_args(argv)
        overrides = dict(kv.split("=", 1) for kv in a.param)
        findings = check(Path(a.template), overrides)
        label = " ".join(a.param) or "defaults"
        if not findings:
            print(f"contract: {a.template} ({label}): ok")
    for f in findings:
        print(f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
