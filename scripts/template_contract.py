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
}

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


def check(template_path: Path, overrides: dict[str, str]) -> list[str]:
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
