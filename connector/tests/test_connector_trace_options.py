"""The connector's message-trace options: ``enableMsgTrace`` and ``traceTopic`` (source and sink)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from rocketq.connector.errors import OptionError
from rocketq.connector.options import parse_sink_options, parse_source_options

BASE = {"nameServer": "127.0.0.1:9876", "topic": "T"}


def test_off_by_default() -> None:
    assert parse_sink_options(BASE).trace == (False, None)
    src = parse_source_options(BASE)
    assert (src.enable_msg_trace, src.trace_topic) == (False, None)


def test_sink_and_source_options() -> None:
    opts = {**BASE, "enableMsgTrace": "true", "traceTopic": "MyTrace"}
    assert parse_sink_options(opts).trace == (True, "MyTrace")
    src = parse_source_options({**opts, "group": "g"})
    assert (src.enable_msg_trace, src.trace_topic, src.group) == (True, "MyTrace", "g")


@pytest.mark.parametrize("parse", [parse_sink_options, parse_source_options])
def test_a_bad_trace_topic_names_the_option(parse: Callable[[Mapping[str, str]], object]) -> None:
    with pytest.raises(OptionError, match="traceTopic"):
        parse({**BASE, "traceTopic": "no spaces"})
