"""docs/operations.md's mqadmin reference is what the command table generates, and the
generator's replacement keeps the rest of the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.client.cli.mqadmin import LISTING
from rocketq.client.cli.reference import BEGIN, END, reference_markdown, replace_reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_operations_page_holds_the_generated_reference() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert replace_reference(page) == page, "run: python -m rocketq.client.cli.reference docs/operations.md"


def test_reference_has_one_row_per_subcommand_with_its_options() -> None:
    text = reference_markdown()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(LISTING)
    set_mode = next(row for row in rows if row.startswith("| `setConsumeMode`"))
    assert "`-m`/`--mode` MODE (required): consume mode: PULL or POP" in set_mode
    assert "`-n`" not in set_mode  # the common options are said once, above the table


def test_replacement_keeps_the_rest_of_the_page() -> None:
    page = f"# T\n\nbefore\n\n{BEGIN}\nstale\n{END}\nafter\n"
    updated = replace_reference(page)
    assert updated.startswith("# T\n\nbefore\n\n" + BEGIN) and updated.endswith(END + "\nafter\n")
    assert "stale" not in updated
    with pytest.raises(ValueError, match="no generated mqadmin reference"):
        replace_reference("# no markers\n")
