"""BrokerAccess turns client errors into option errors by their type, not their text."""

from __future__ import annotations

import pytest

from rocketq.client.testing import free_port
from rocketq.connector.access import BrokerAccess
from rocketq.connector.errors import OptionError


def test_an_unreachable_name_server_names_the_name_server_option() -> None:
    access = BrokerAccess(f"127.0.0.1:{free_port()}", timeout_ms=1000)  # nobody listens there
    try:
        with pytest.raises(OptionError) as info:
            access.route("AnyTopic", missing_ok=True)  # not "missing": the NameServer never answered
    finally:
        access.close()
    assert info.value.option == "nameServer" and "answered" in info.value.problem
