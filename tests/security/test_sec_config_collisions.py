"""Hostile configs (issue 24, defects 3 and 4): a table inside another (vacuuming `raw` would
delete `raw/order`), two writers of one table, outputs inside the access-log or `_lakestream/`
directories. Every command that loads such a config must refuse it, name both keys, and write
nothing: the walk of the directory around the lake finds only the config file."""
import subprocess

import pytest

from lake_support import BIN, EVENTS, EXAMPLE, files_under

ROOT_LINE = 'root = "./lake"\n'

# name -> (edit of the example config, keys the error must name)
HOSTILE = {
    # The case: `raw` next to `raw/order`.
    "topic table above another": (
        lambda t: t.replace('table = "raw/member"', 'table = "raw"'),
        ["topics[0].table", "topics[1].table"],
    ),
    "dead letters inside a topic table": (
        lambda t: t.replace('dead_letter_table = "dead_letters"', 'dead_letter_table = "raw/order/dl"'),
        ["dead_letter_table", "topics[0].table"],
    ),
    "access-log prefix is the dead-letter table": (
        lambda t: t.replace('table_prefix = "access_logs"', 'table_prefix = "dead_letters"'),
        ["access_logs.table_prefix", "dead_letter_table"],
    ),
    "access-log prefix above a topic table": (
        lambda t: t.replace('table_prefix = "access_logs"', 'table_prefix = "raw"'),
        ["access_logs.table_prefix", "topics[0].table"],
    ),
    "two refine jobs write one output": (
        lambda t: t.replace('output = "curated/order"', 'output = "processed/order"'),
        ["refine[0].output", "refine[1].output"],
    ),
    "refine output inside the access-log directory": (
        lambda t: t.replace('output = "processed/order"', 'output = "access_logs/processed"'),
        ["access_logs.table_prefix", "refine[1].output"],
    ),
    "refine output under _lakestream": (
        lambda t: t.replace('output = "processed/order"', 'output = "_lakestream/processed/tombstones"'),
        ["refine[1].output"],
    ),
    "two topics on one table with other columns": (
        lambda t: t + '\n[[topics]]\ntopic = "orders-eu"\ntable = "raw/order"\npartition_by = "processing_time"\n'
                      'kafka_metadata = ["partition", "offset"]\n'
                      'columns = [{ name = "order_id", type = "string" }]\n',
        ["topics[0].columns", "topics[2].columns"],
    ),
    # Issue 38 (9): without `{schema}`, erp's dbo.items and sales.items would share a table.
    "a DMS bronze template without {schema}": (
        lambda t: t + '\n[[cdc]]\nfamily = "erp"\nsource = "dms"\nlocation = "s3://landing/dms/"\n'
                      'bronze = "bronze/erp/{table}"\n',
        ["cdc[0].bronze"],
    ),
    "a Debezium silver template without {schema} over several schemas": (
        lambda t: t + '\n[[cdc]]\nfamily = "crm"\nsource = "debezium"\ntopics = ["crm.*.*"]\n'
                      'silver = "silver/crm/{table}"\n',
        ["cdc[0].silver"],
    ),
}

COMMANDS = {
    "validate": ["validate"],
    "invoke msk": ["invoke", "msk", "--event", str(EVENTS / "msk-orders.json")],
    "refine": ["refine"],
    "optimize --all": ["optimize", "--all"],
    "vacuum --all": ["vacuum", "--all"],
}


def hostile_config(sandbox, edit):
    text = edit(EXAMPLE)
    assert text != EXAMPLE, "example config layout changed; update the edit"
    assert ROOT_LINE in text
    text = text.replace(ROOT_LINE, f'root = "{sandbox / "lake"}"\n')
    path = sandbox / "lakestream.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_config_is_refused_and_nothing_is_written(sandbox, case, command):
    edit, keys = HOSTILE[case]
    config = hostile_config(sandbox, edit)
    out = subprocess.run([BIN, *COMMANDS[command], "--config", str(config)],
                         capture_output=True, text=True, check=False, cwd=sandbox)
    assert out.returncode != 0, f"{case}: `{command}` accepted it:\n{out.stdout}"
    for key in keys:
        assert f"`{key}`" in out.stderr, f"{case}: the error does not name `{key}`:\n{out.stderr}"
    # Nothing was written anywhere around the lake: not a table, not a probe, not a directory.
    assert files_under(sandbox) == ["lakestream.toml"], files_under(sandbox)
    assert [p.name for p in sandbox.iterdir()] in (["lakestream.toml", "lake"], ["lake", "lakestream.toml"])
    assert list((sandbox / "lake").iterdir()) == []


def test_the_example_config_and_topics_sharing_a_table_alike_are_accepted(sandbox):
    config = hostile_config(sandbox, lambda t: t.replace(ROOT_LINE, ROOT_LINE + "\n"))
    out = subprocess.run([BIN, "validate", "--config", str(config)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    # Every table the pipeline writes, with its kind (the list maintenance runs on).
    for line in ["raw/order", "raw/member", "dead_letters", "curated/order", "processed/order",
                 "access_logs/<bucket>"]:
        assert line in out.stdout, out.stdout
