"""The deploy contract (scripts/template_contract.py): the fixed template passes in every mode,
the pre-issue-14 copy is rejected for what would fail on AWS, and each rule catches its mistake
when it is put back into the fixed template. Offline: the SAM translator and botocore's model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import template_contract as contract  # noqa: E402

TEMPLATE = ROOT / "template.yaml"
BEFORE = ROOT / "tests" / "fixtures" / "deploy" / "template-before-issue-14.yaml"


def rules(findings: list[str]) -> set[str]:
    return {f.split(" ", 1)[0] for f in findings}


# Issue 38 (10): a landing bucket with two families, and the KMS keys.
LANDING = {"CdcLandingBucketName": "lakestream-landing", "CdcLandingPrefixes": "dms/erp/,files/crm/"}
LAKE_KEY = {"LakeKmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/0a1b2c3d-4e5f-6789-abcd-ef0123456789"}
LANDING_KEY = {**LANDING, "CdcLandingKmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/mrk-0123456789abcdef"}


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"MskPollerMode": "Provisioned"},
        {"LogIngestMode": "drain"},
        {"MskTopic2": "", "MskConsumerGroupPrefix": "prod"},
        {"MskTopic3": "clicks", "MskTopic4": "views", "MskPollerMode": "Provisioned"},
        {"CdcLandingBucketName": "lakestream-landing"},
        LANDING,
        {**LANDING, "CdcLandingPrefixes": "dms/erp/,dms/hr/,files/crm/,exports/year=2026/"},
        LAKE_KEY,
        {**LANDING_KEY, **LAKE_KEY, "LogIngestMode": "drain"},
    ],
)
def test_fixed_template_holds_the_contract(params: dict[str, str]) -> None:
    assert contract.check(TEMPLATE, params) == []


def test_template_before_issue_14_is_rejected_for_what_would_fail_on_aws() -> None:
    findings = contract.check(BEFORE, {})
    text = "\n".join(findings)
    # 1. one Kafka event source with two topics: the API takes exactly one.
    assert "ESM-SHAPE MskIngestFunctionKafka: MskIngestFunctionKafka.Topics: 2 items, the API allows at most 1" in text
    # 2. a !Sub as Fn::Join's delimiter (CloudFormation rejects it).
    assert any(f.startswith("JOIN-DELIMITER ") and "Fn::Sub" in f for f in findings)
    # 3. schedule names fixed by logical id: the second stack in an account fails.
    named = {f.split(" ")[1].rstrip(":") for f in findings if f.startswith("SCHEDULE-NAME ")}
    assert named == {
        "LogIngestFunctionDrain",
        "MaintenanceFunctionCheckpoint",
        "MaintenanceFunctionManifest",
        "MaintenanceFunctionOptimize",
        "MaintenanceFunctionVacuum",
        "RefineFunctionCurated",
        "RefineFunctionProcessed",
    }
    # 5. a failing Kafka batch is retried until its records expire.
    assert any(f.startswith("KAFKA-RETRY MskIngestFunctionKafka") for f in findings)
    # 6-9: the missing permission, ListBucket, maintenance overlap, unbounded SQS concurrency.
    assert "KAFKA-IAM MskIngestFunctionKafka: role of MskIngestFunction lacks kafka-cluster:DescribeClusterDynamicConfiguration" in text
    assert any(f.startswith("S3-LIST LogIngestFunctionRole") for f in findings)
    assert "MAINTENANCE-CONCURRENCY MaintenanceFunction: ReservedConcurrentExecutions is None" in text
    assert "SQS-SOURCE LogIngestFunctionNotifications: no ScalingConfig.MaximumConcurrency" in text
    assert {"LOG-RETENTION", "BUCKET-VERSIONING", "S3-MULTIPART", "ASYNC-FAILURE"} <= rules(findings)


def mutated(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    text = TEMPLATE.read_text()
    assert text.count(old) >= count, f"fixture text not found: {old!r}"
    out = tmp_path / "template.yaml"
    out.write_text(text.replace(old, new, count))
    return out


MUTATIONS = [
    # (rule, old text, new text)
    ("ESM-SHAPE", "      Topics: [!Ref MskTopic1]", "      Topics: [!Ref MskTopic1, !Ref MskTopic2]"),
    ("ESM-SHAPE", "      StartingPosition: TRIM_HORIZON", "      StartingPosition: EARLIEST"),
    ("KAFKA-GROUP", '          - "${Prefix}-${MskTopic2}"', '          - "${Prefix}-${MskTopic1}"'),
    (
        "KAFKA-DESTINATION",
        "          Destination: !GetAtt FailedBatchesBucket.Arn",
        "          Destination: !GetAtt ScheduleFailuresQueue.Arn",
    ),
    (
        "KAFKA-RETRY",
        "      DestinationConfig:\n        OnFailure:\n          Destination: !GetAtt FailedBatchesBucket.Arn\n",
        "",
    ),
    (
        "KAFKA-PROVISIONED",
        "      MaximumRetryAttempts: !If [ProvisionedPollers, !Ref MskMaximumRetryAttempts, !Ref AWS::NoValue]",
        "      MaximumRetryAttempts: !Ref MskMaximumRetryAttempts",
    ),
    ("KAFKA-IAM", "                - kafka-cluster:DescribeClusterDynamicConfiguration\n", ""),
    (
        "KAFKA-IAM",
        "            - Sid: FailedBatchesList\n              Effect: Allow\n              Action: s3:ListBucket\n",
        "            - Sid: FailedBatchesList\n              Effect: Allow\n              Action: s3:GetBucketLocation\n",
    ),
    ("SQS-SOURCE", "      ScalingConfig:\n        MaximumConcurrency: !Ref LogIngestMaxConcurrency\n", ""),
    ("SQS-SOURCE", "                - sqs:DeleteMessage\n", ""),
    ("SCHEDULE-NAME", "            OmitName: true\n            Input: '{\"job\":\"vacuum\"}'", "            Input: '{\"job\":\"vacuum\"}'"),
    ("SCHEDULE-RETRY", "            DeadLetterConfig: {Arn: !GetAtt ScheduleFailuresQueue.Arn}\n", ""),
    ("ASYNC-FAILURE", "        MaximumRetryAttempts: 1\n", ""),
    (
        "ASYNC-FAILURE",
        "        MaximumRetryAttempts: 1\n        MaximumEventAgeInSeconds: 3600\n        DestinationConfig:\n"
        "          OnFailure:\n            Type: SQS\n            Destination: !GetAtt ScheduleFailuresQueue.Arn\n",
        "        MaximumRetryAttempts: 1\n        MaximumEventAgeInSeconds: 3600\n",
    ),
    ("MAINTENANCE-CONCURRENCY", "      ReservedConcurrentExecutions: 1\n", ""),
    ("S3-LIST", "            - Sid: RawLogsList\n              Effect: Allow\n              Action: s3:ListBucket\n", "            - Sid: RawLogsList\n              Effect: Allow\n              Action: s3:GetBucketLocation\n"),
    ("S3-MULTIPART", "[s3:GetObject, s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload]", "[s3:GetObject, s3:PutObject, s3:DeleteObject]"),
    ("LOG-RETENTION", "      RetentionInDays: !Ref LogRetentionDays\n  LogIngestLogGroup:", "  LogIngestLogGroup:"),
    # s3-log-ingest reads only the raw-logs bucket (issue 24 defect 2): the variable is set, to a
    # bucket its role can read, never the lake's own.
    ("LOG-SOURCES", "          LAKESTREAM_LOG_BUCKETS: !Ref RawLogsBucketName\n", ""),
    ("LOG-SOURCES", "LAKESTREAM_LOG_BUCKETS: !Ref RawLogsBucketName", "LAKESTREAM_LOG_BUCKETS: !Ref LakeBucketName"),
    ("LOG-SOURCES", "LAKESTREAM_LOG_BUCKETS: !Ref RawLogsBucketName", "LAKESTREAM_LOG_BUCKETS: some-other-bucket"),
    ("JOIN-DELIMITER", '    Value: !Sub "s3://${LakeBucketName}/${LakePrefix}"\n', '    Value: !Join [!Ref LakePrefix, ["a", "b"]]\n'),
    # Issue 24 defect 10: least privilege.
    (
        "S3-DELETE",
        "              Action: [s3:GetObject, s3:PutObject, s3:AbortMultipartUpload]",
        "              Action: [s3:GetObject, s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload]",
    ),
    (
        "S3-DELETE",
        '/${LakePrefix}/_lakestream/probe/*"',
        '/${LakePrefix}/*"',
    ),
    ("CONFIG-WRITE", "              Action: [s3:PutObject, s3:DeleteObject]\n              Resource: !Sub \"arn:${AWS::Partition}:s3:::${LakeBucketName}/${LakePrefix}/_config/*\"",
     "              Action: [s3:DeleteObject]\n              Resource: !Sub \"arn:${AWS::Partition}:s3:::${LakeBucketName}/${LakePrefix}/_config/*\""),
    ("RAW-LOGS-POLICY", '              ArnLike: {"aws:SourceArn": !Sub "arn:${AWS::Partition}:s3:::${AccessLoggedBuckets}"}\n', ""),
    ("RAW-LOGS-POLICY", "              StringEquals: {\"aws:SourceAccount\": !Ref AWS::AccountId}\n          - Sid: DenyWritesByAnyoneElse",
     "          - Sid: DenyWritesByAnyoneElse"),
    ("RAW-LOGS-POLICY", "          - Sid: DenyWritesByAnyoneElse\n            Effect: Deny", "          - Sid: DenyWritesByAnyoneElse\n            Effect: Allow"),
    ("TLS-ONLY", '              Bool: {"aws:SecureTransport": "false"}', '              Bool: {"aws:SecureTransport": "true"}'),
    ("TLS-ONLY", '              - !Sub "${FailedBatchesBucket.Arn}/*"\n', ""),
    ("SQS-UNUSED", "                - sqs:DeleteMessage\n", "                - sqs:DeleteMessage\n                - sqs:ChangeMessageVisibility\n"),
    ("TXN-RETENTION", "      MessageRetentionPeriod: 864000", "      MessageRetentionPeriod: 1209600"),
    ("QUEUE-AGE-ALARM", "      MetricName: ApproximateAgeOfOldestMessage", "      MetricName: NumberOfMessagesSent"),
    # The failed-batches bucket: only the Kafka function's role writes (redrive trusts its objects).
    ("FAILED-BATCHES-WRITERS", 'ArnNotEquals: {"aws:PrincipalArn": !GetAtt MskIngestFunctionRole.Arn}',
     'ArnNotEquals: {"aws:PrincipalArn": !GetAtt RefineFunctionRole.Arn}'),
    ("FAILED-BATCHES-WRITERS", '            Action: s3:PutObject\n            Resource: !Sub "${FailedBatchesBucket.Arn}/*"',
     '            Action: s3:GetObject\n            Resource: !Sub "${FailedBatchesBucket.Arn}/*"'),
    # Issue 28: refine notices and the freshness alarm.
    ("REFINE-NOTICES", "          LAKESTREAM_REFINE_QUEUE_URL: !Ref RefineNoticesQueue\n", ""),
    ("REFINE-NOTICES", "            - Sid: RefineNotices\n              Effect: Allow\n              Action: sqs:SendMessage\n",
     "            - Sid: RefineNotices\n              Effect: Allow\n              Action: sqs:GetQueueUrl\n"),
    ("REFINE-NOTICES", "      FifoQueue: true\n      ContentBasedDeduplication: false\n", ""),
    ("REFINE-NOTICES", "      EventSourceArn: !GetAtt RefineNoticesQueue.Arn\n      BatchSize: 10\n      FunctionResponseTypes: [ReportBatchItemFailures]\n",
     "      EventSourceArn: !GetAtt RefineNoticesQueue.Arn\n      BatchSize: 10\n"),
    ("SQS-SOURCE", "            - Sid: RefineNoticesQueue\n              Effect: Allow\n              Action:\n                - sqs:ReceiveMessage\n",
     "            - Sid: RefineNoticesQueue\n              Effect: Allow\n              Action:\n"),
    ("REFINE-NOTICES", "      VisibilityTimeout: !Ref RefineTimeout\n", "      VisibilityTimeout: 30\n"),
    ("FRESHNESS-ALARM", "      MetricName: JobsBehindTarget\n", "      MetricName: JobsFailed\n"),
    # Issue 38 (10): only the ingest functions send refine notices; TLS only.
    ("REFINE-SENDERS", "aws:PrincipalArn: [!GetAtt MskIngestFunctionRole.Arn, !GetAtt LogIngestFunctionRole.Arn]",
     "aws:PrincipalArn: [!GetAtt MskIngestFunctionRole.Arn, !GetAtt RefineFunctionRole.Arn]"),
    ("REFINE-SENDERS", "          - Sid: OnlyTheIngestFunctionsSend\n            Effect: Deny",
     "          - Sid: OnlyTheIngestFunctionsSend\n            Effect: Allow"),
    ("REFINE-SENDERS", '            Action: "sqs:*"\n            Resource: !GetAtt RefineNoticesQueue.Arn\n            Condition:\n              Bool: {"aws:SecureTransport": "false"}',
     '            Action: "sqs:*"\n            Resource: !GetAtt RefineNoticesQueue.Arn\n            Condition:\n              Bool: {"aws:SecureTransport": "true"}'),
    ("CATALOG-SCOPE", ":table/${CatalogDatabase}/*\"\n", ":table/*\"\n"),
    ("CATALOG-SCOPE", "                - glue:BatchCreatePartition\n", ""),
    ("CATALOG-SCOPE", "          LAKESTREAM_CATALOG_DATABASE: !Ref CatalogDatabase\n", ""),
    ("FRESHNESS-ALARM", "      TreatMissingData: breaching\n", "      TreatMissingData: notBreaching\n"),
    (
        "BUCKET-VERSIONING",
        "      BucketName: !Ref LakeBucketName\n",
        "      BucketName: !Ref LakeBucketName\n      VersioningConfiguration: {Status: Suspended}\n",
    ),
]


@pytest.mark.parametrize("rule,old,new", MUTATIONS, ids=[f"{m[0]}-{i}" for i, m in enumerate(MUTATIONS)])
def test_each_rule_catches_its_mistake(tmp_path: Path, rule: str, old: str, new: str) -> None:
    findings = contract.check(mutated(tmp_path, old, new), {})
    assert rule in rules(findings), findings


LANDING_OBJECTS = '"arn:${AWS::Partition}:s3:::${CdcLandingBucketName}/${Prefix}*"'
LANDING_LIST = '"s3:prefix": !Split [",", !Sub ["${Prefixes}*", {Prefixes: !Join ["*,", !Split [",", !Ref CdcLandingPrefixes]]}]]'
KMS_VIA_S3 = '                Condition:\n                  StringEquals: {"kms:ViaService": !Sub "s3.${AWS::Region}.amazonaws.com"}\n'

# Rules that hold only for some parameters: (rule, parameters, old text, new text).
PARAM_MUTATIONS = [
    # Issue 38 (10): s3-log-ingest reads only the families' prefixes of the landing bucket.
    ("LANDING-READ", LANDING, LANDING_OBJECTS, '"arn:${AWS::Partition}:s3:::${CdcLandingBucketName}/*"'),
    ("LANDING-READ", LANDING, f"                Condition:\n                  StringLike:\n                    {LANDING_LIST}\n", ""),
    ("LANDING-READ", LANDING, LANDING_LIST, '"s3:prefix": ["*"]'),
    (
        "LANDING-READ",
        LANDING,
        '              Action: [s3:GetObject, s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload]\n'
        '              Resource: !Sub "arn:${AWS::Partition}:s3:::${LakeBucketName}/${LakePrefix}/*"\n',
        '              Action: [s3:GetObject, s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload]\n'
        '              Resource:\n                - !Sub "arn:${AWS::Partition}:s3:::${LakeBucketName}/${LakePrefix}/*"\n'
        '                - !Sub "arn:${AWS::Partition}:s3:::${CdcLandingBucketName}/*"\n',
    ),
    # ... and every prefix is readable, and listable (a deleted object is a 404, not a 403).
    ("CDC-LANDING", LANDING, 'Prefix: !Select [1, !Split [",", !Sub "${CdcLandingPrefixes},,,"]]',
     'Prefix: !Select [0, !Split [",", !Sub "${CdcLandingPrefixes},,,"]]'),
    ("CDC-LANDING", LANDING, LANDING_LIST, '"s3:prefix": [!Sub ["${P}*", {P: !Select [0, !Split [",", !Ref CdcLandingPrefixes]]}]]'),
    # The KMS option: the stack's buckets use the key with a Bucket Key, every role touching them
    # may use it through S3 only; the raw-logs bucket keeps SSE-S3; no key, no KMS at all.
    ("KMS-OPTION", LAKE_KEY, '              - {SSEAlgorithm: "aws:kms", KMSMasterKeyID: !Ref LakeKmsKeyArn}\n',
     "              - {SSEAlgorithm: AES256}\n"),
    ("KMS-OPTION", LAKE_KEY, "            BucketKeyEnabled: !If [HasLakeKmsKey, true, !Ref AWS::NoValue]\n", ""),
    ("KMS-OPTION", LAKE_KEY, "                Action: [kms:Decrypt, kms:GenerateDataKey]\n", "                Action: kms:Decrypt\n"),
    ("KMS-OPTION", LAKE_KEY, KMS_VIA_S3, ""),
    (
        "KMS-OPTION",
        LAKE_KEY,
        "(the logs would not arrive).\n      BucketEncryption:\n        ServerSideEncryptionConfiguration:\n"
        "          - ServerSideEncryptionByDefault: {SSEAlgorithm: AES256}\n",
        "(the logs would not arrive).\n      BucketEncryption:\n        ServerSideEncryptionConfiguration:\n"
        '          - ServerSideEncryptionByDefault: {SSEAlgorithm: "aws:kms", KMSMasterKeyID: !Ref LakeKmsKeyArn}\n'
        "            BucketKeyEnabled: true\n",
    ),
    ("KMS-OPTION", {}, '  HasLakeKmsKey: !Not [!Equals [!Ref LakeKmsKeyArn, ""]]', '  HasLakeKmsKey: !Equals [!Ref LakeKmsKeyArn, ""]'),
    ("KMS-OPTION", LANDING_KEY, '  HasCdcLandingKmsKey: !And [!Condition HasCdcLanding, !Not [!Equals [!Ref CdcLandingKmsKeyArn, ""]]]',
     '  HasCdcLandingKmsKey: !Equals ["yes", "no"]'),
]


@pytest.mark.parametrize("rule,params,old,new", PARAM_MUTATIONS, ids=[f"{m[0]}-{i}" for i, m in enumerate(PARAM_MUTATIONS)])
def test_each_parameter_rule_catches_its_mistake(tmp_path: Path, rule: str, params: dict[str, str], old: str, new: str) -> None:
    assert contract.check(TEMPLATE, params) == []
    findings = contract.check(mutated(tmp_path, old, new), params)
    assert rule in rules(findings), findings


def test_landing_grants_are_the_families_prefixes_only() -> None:
    """s3-log-ingest reads and lists exactly the families' prefixes, one resource each (before
    issue 38 (10) it had s3:GetObject on <landing>/* and an unconditioned s3:ListBucket)."""
    resources = _resources({**LANDING, "CdcLandingPrefixes": "dms/erp/,files/crm/,x/"})
    statements = {s.get("Sid"): s for s in contract.role_statements(resources["LogIngestFunctionRole"])}
    assert statements["CdcLandingObjects"]["Resource"] == [
        "arn:aws:s3:::lakestream-landing/dms/erp/*",
        "arn:aws:s3:::lakestream-landing/files/crm/*",
        "arn:aws:s3:::lakestream-landing/x/*",
    ]
    assert statements["CdcLandingList"]["Condition"] == {"StringLike": {"s3:prefix": ["dms/erp/*", "files/crm/*", "x/*"]}}
    assert "CdcLandingKmsKey" not in statements


def _resources(params: dict[str, str]) -> dict[str, dict]:
    """The resolved resources of today's template for these parameters (the rest at defaults)."""
    import copy

    raw = contract.yaml_parse(TEMPLATE.read_text())
    cfn_params = {k: params.get(k, v.get("Default", contract.PLACEHOLDERS.get(k, "placeholder")))
                  for k, v in raw["Parameters"].items()}
    sam = copy.deepcopy(raw)
    sam.get("Globals", {}).get("Function", {}).pop("CodeUri", None)
    for res in sam["Resources"].values():
        if res.get("Type") == "AWS::Serverless::Function":
            res["Properties"]["CodeUri"] = "s3://placeholder/code.zip"
    return contract.Resolver(contract.transform(sam, {**contract.PSEUDO, **cfn_params}, contract._NoIam()), cfn_params).resources()


def test_without_a_key_the_buckets_are_as_before() -> None:
    """Empty LakeKmsKeyArn: SSE-S3 exactly as before the option (no BucketKeyEnabled), no KMS grant."""
    resources = _resources({})
    for bucket in ("LakeBucket", "RawLogsBucket", "FailedBatchesBucket"):
        assert resources[bucket]["Properties"]["BucketEncryption"] == {
            "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        }, bucket
    for name, res in resources.items():
        if res["Type"] == "AWS::IAM::Role":
            assert "kms:" not in str(contract.role_statements(res)), name
    keyed = _resources(LAKE_KEY)
    assert keyed["RawLogsBucket"]["Properties"]["BucketEncryption"] == resources["RawLogsBucket"]["Properties"]["BucketEncryption"]
    assert keyed["LakeBucket"]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": LAKE_KEY["LakeKmsKeyArn"]},
         "BucketKeyEnabled": True}
    ]


def test_samconfig_must_deploy_the_built_architecture(tmp_path: Path) -> None:
    cfg = tmp_path / "samconfig.toml"
    assert contract.check_samconfig(cfg, "x86_64") == []  # first deploy: --guided gets ARCH
    cfg.write_text(
        'version = 0.1\n[default.deploy.parameters]\nstack_name = "lakestream"\n'
        'parameter_overrides = "MskClusterArn=\\"arn:x\\" Architecture=\\"arm64\\" LakePrefix=\\"lake\\""\n'
    )
    assert contract.check_samconfig(cfg, "arm64") == []
    [finding] = contract.check_samconfig(cfg, "x86_64")
    assert "deploys Architecture=arm64 but the functions were built for x86_64" in finding
    cfg.write_text('version = 0.1\n[default.deploy.parameters]\nparameter_overrides = "LakePrefix=\\"lake\\""\n')
    [finding] = contract.check_samconfig(cfg, "arm64")
    assert "does not pin Architecture" in finding


BEFORE_24 = ROOT / "tests" / "fixtures" / "deploy" / "template-before-issue-24.yaml"


def test_template_before_issue_24_is_rejected_for_excess_privilege() -> None:
    """Issue 24 defect 10: each least-privilege rule names what the old template got wrong."""
    findings = contract.check(BEFORE_24, {})
    text = "\n".join(findings)
    # s3:DeleteObject on the whole lake for functions that never delete (only maintenance does).
    deleters = {f.split(" ")[1].rstrip(":") for f in findings if f.startswith("S3-DELETE ")}
    assert deleters == {"MskIngestFunctionRole", "LogIngestFunctionRole", "RefineFunctionRole"}, text
    # Every function can rewrite the shared config object.
    writers = {f.split(" ")[1].rstrip(":") for f in findings if f.startswith("CONFIG-WRITE ")}
    assert writers == {"MskIngestFunctionRole", "LogIngestFunctionRole", "RefineFunctionRole",
                       "MaintenanceFunctionRole"}, text
    # The raw-logs bucket policy lets the logging service in without aws:SourceArn and keeps no
    # one else out.
    assert "RAW-LOGS-POLICY RawLogsBucketPolicy: the logging service's Allow has no aws:SourceArn condition" in text
    assert "RAW-LOGS-POLICY RawLogsBucketPolicy: no Deny of s3:PutObject for principals other than the logging service" in text
    # No bucket refuses plain HTTP.
    no_tls = {f.split(" ")[1].rstrip(":") for f in findings if f.startswith("TLS-ONLY ")}
    assert no_tls == {"LakeBucket", "RawLogsBucket", "FailedBatchesBucket"}, text
    # sqs:ChangeMessageVisibility is granted and never called.
    assert "SQS-UNUSED LogIngestFunctionRole: sqs:ChangeMessageVisibility is granted but no code calls it" in text
    # The access-log txn retention (default 14 days) does not exceed the DLQ's 14 days.
    assert any(f.startswith("TXN-RETENTION LogNotificationsDeadLetterQueue:") for f in findings), text
    # Anyone with s3:PutObject could forge a failed batch that redrive turns into rows.
    assert any(f.startswith("FAILED-BATCHES-WRITERS FailedBatchesBucket:") for f in findings), text
    # No alarm on the age of the oldest notification (the drain could stop and messages expire).
    assert "QUEUE-AGE-ALARM LogNotificationsQueue: no CloudWatch alarm on ApproximateAgeOfOldestMessage" in text


def test_txn_retention_default_is_one_truth() -> None:
    """The contract's txn retention is the Rust default, and the example config says the same."""
    days = contract.txn_retention_days_default()
    assert days == 21
    assert f"txn_retention_days = {days} " in (ROOT / "lakestream.toml").read_text()


@pytest.mark.parametrize("params", [{}, {"LogIngestMode": "drain"}, {"AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:ops"}])
def test_every_function_keeps_what_its_code_needs(params: dict[str, str]) -> None:
    """The least-privilege rules take nothing the code uses: every function reads and writes the
    lake and deletes its probe object; maintenance deletes anywhere in the lake but the config."""
    raw = contract.yaml_parse(TEMPLATE.read_text())
    assert contract.check(TEMPLATE, params) == []
    cfn_params = {k: params.get(k, v.get("Default", contract.PLACEHOLDERS.get(k, "placeholder")))
                  for k, v in raw["Parameters"].items()}
    import copy
    sam = copy.deepcopy(raw)
    sam.get("Globals", {}).get("Function", {}).pop("CodeUri", None)
    for res in sam["Resources"].values():
        if res.get("Type") == "AWS::Serverless::Function":
            res["Properties"]["CodeUri"] = "s3://placeholder/code.zip"
    resources = contract.Resolver(contract.transform(sam, {**contract.PSEUDO, **cfn_params}, contract._NoIam()), cfn_params).resources()
    lake = "arn:aws:s3:::lakestream-lake/lake"
    for role in ("MskIngestFunctionRole", "LogIngestFunctionRole", "RefineFunctionRole", "MaintenanceFunctionRole"):
        r = resources[role]
        assert contract.effective(r, "s3:GetObject", f"{lake}/_config/lakestream.toml"), role
        assert contract.effective(r, "s3:PutObject", f"{lake}/raw/order/_delta_log/00000000000000000001.json"), role
        assert contract.effective(r, "s3:DeleteObject", f"{lake}/_lakestream/probe/0f0e"), role
        assert not contract.effective(r, "s3:PutObject", f"{lake}/_config/lakestream.toml"), role
        deletes = contract.effective(r, "s3:DeleteObject", f"{lake}/raw/order/part-0.parquet")
        assert deletes == (role == "MaintenanceFunctionRole"), role


def _parameter(name: str) -> dict:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "template.yaml").read_text(), Loader=Loader)["Parameters"][name]


def test_landing_prefixes_pattern_takes_one_to_four_plain_prefixes() -> None:
    """CdcLandingPrefixes: each prefix ends in `/` (a family's location is a folder) and has no IAM
    wildcard; at most four (one IAM resource each), so a fifth is refused at deploy, not dropped."""
    import re

    spec = _parameter("CdcLandingPrefixes")
    ok = lambda v: re.fullmatch(spec["AllowedPattern"], v) is not None  # noqa: E731 - CloudFormation matches the whole value
    assert ok(spec["Default"])
    for good in ["dms/", "dms/erp/,files/crm/", "a/,b/,c/,d/", "exports/year=2026/", "crm-landing/dms.v2/"]:
        assert ok(good), good
    for bad in ["", "dms", "dms/erp", "/dms/", "dms//x/", "dms/,", ",dms/", "dms/, files/", "dms/*/", "d?s/",
                "a/,b/,c/,d/,e/", "${x}/"]:
        assert not ok(bad), bad
    for name in ("LakeKmsKeyArn", "CdcLandingKmsKeyArn"):
        key = _parameter(name)
        fits = lambda v: re.fullmatch(key["AllowedPattern"], v) is not None  # noqa: E731
        assert key["Default"] == "" and fits("")
        assert fits("arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd") and fits(LAKE_KEY["LakeKmsKeyArn"])
        assert not fits("arn:aws:kms:eu-west-1:123456789012:alias/lake"), name  # IAM grants on an alias grant nothing


def test_lake_prefix_pattern_allows_only_plain_segments() -> None:
    """LakePrefix is the lake root's key prefix, the probe object's and every IAM resource's:
    `..`, `.`, empty or `_`-leading segments would make them point at different keys."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    spec = yaml.load((ROOT / "template.yaml").read_text(), Loader=Loader)["Parameters"]["LakePrefix"]
    ok = lambda v: re.fullmatch(spec["AllowedPattern"], v) is not None  # noqa: E731 - CloudFormation matches the whole value
    assert ok(spec["Default"])
    for good in ["lake", "data/lake", "my-lake.v2", "a/b_c/d"]:
        assert ok(good), good
    for bad in ["", "..", "a/../b", "a//b", "/lake", "lake/", "./lake", "_lake", "a/_b", "a/./b", "lake?x"]:
        assert not ok(bad), bad
