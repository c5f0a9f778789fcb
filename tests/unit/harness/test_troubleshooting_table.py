"""docs/troubleshooting.md's error table, as the bad-input catalogue reads it.

The catalogue (tests/integration/test_bad_input_catalogue.py) checks each error message against
its row of that table. This cheaper test keeps the table itself readable by the parser when the
page is edited: the section is there, every row has a message and a fix, and the messages the
docs promise for common mistakes are listed.
"""

from __future__ import annotations

from mysqlcdc_harness.readme_errors import ERRORS_PAGE, SECTION, error_table_first_cells, message_regex


def test_the_section_and_its_rows_are_there() -> None:
    text = ERRORS_PAGE.read_text(encoding="utf-8")
    assert SECTION in text
    cells = error_table_first_cells()
    assert len(cells) >= 80, f"only {len(cells)} rows under {SECTION!r}"
    assert all(c.strip() for c in cells)


def test_common_mistakes_are_listed() -> None:
    cells = " ".join(error_table_first_cells())
    for start in (
        "binlog_format: found 'STATEMENT', need ROW",
        "table pattern '<pattern>' matches no table",
        "TLS with host:port failed",
    ):
        assert start in cells, start


def test_a_placeholder_pattern_matches_a_real_message() -> None:
    rx = message_regex("N batch(es) have no snapshot result (<batch ids>)")
    assert rx.search("2 batch(es) have no snapshot result (batch-0001, batch-0003)")
