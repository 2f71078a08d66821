"""The hostile-input suite's own helpers list what they should (so a walk that sees nothing cannot
pass a test by accident)."""
from lake_support import delta_tables_under, files_under


def test_walk_helpers_see_nested_tables(tmp_path):
    (tmp_path / "a" / "_delta_log").mkdir(parents=True)
    (tmp_path / "a" / "b" / "_delta_log").mkdir(parents=True)
    (tmp_path / "a" / "b" / "_delta_log" / "0.json").write_text("{}")
    assert delta_tables_under(tmp_path) == ["a", "a/b"]
    assert files_under(tmp_path) == ["a/b/_delta_log/0.json"]
