"""ACL request signing (rocketq.client.remoting.acl): golden vectors and the client hook.

The expected signatures were computed outside Python with
``printf '<content>' | openssl dgst -sha1 -hmac <secret> -binary | base64``, where the content
is the ext-field values in Java TreeMap key order followed by the body.
"""

from __future__ import annotations

import pytest

from rocketq.client.config import ClientConfig
from rocketq.client.errors import ClientError
from rocketq.client.remoting.acl import (
    SessionCredentials,
    calc_signature,
    request_content,
    sign_request,
)
from rocketq.client.remoting.command import RemotingCommand


def test_content_is_sorted_values_then_body() -> None:
    fields = {"topic": "TopicTest", "queueId": "1", "AccessKey": "RocketMQ", "Signature": "old"}
    assert request_content(fields, b"hello") == b"RocketMQ1TopicTesthello"


def test_content_leaves_out_the_unique_key_query_flag() -> None:
    assert request_content({"_UNIQUE_KEY_QUERY": "true", "a": "x"}, None) == b"x"


def test_sort_is_java_string_order() -> None:
    # Java compares UTF-16 code units: uppercase before '_' before lowercase
    assert request_content({"b": "3", "_x": "2", "B": "1"}, b"") == b"123"


def test_golden_signature_of_a_send() -> None:
    cmd = RemotingCommand.request(10, {"topic": "TopicTest", "queueId": "1"}, b"hello")
    sign_request(cmd, SessionCredentials(access_key="RocketMQ", secret_key="12345678"))
    assert cmd.ext_fields["AccessKey"] == "RocketMQ"
    assert cmd.ext_fields["Signature"] == "hJTj3eWR5ivsSryiYPX4YZj2r8c="
    assert "SecurityToken" not in cmd.ext_fields


def test_golden_signature_with_security_token_and_no_body() -> None:
    cmd = RemotingCommand.request(34, {"a": "value", "b": "X", "_UNIQUE_KEY_QUERY": "false"})
    creds = SessionCredentials(
        access_key="rocketq-admin", secret_key="secret-key-123", security_token="TOKEN"
    )
    sign_request(cmd, creds)
    assert cmd.ext_fields["SecurityToken"] == "TOKEN"
    assert cmd.ext_fields["Signature"] == "ZbpehYgyjS2gx7PceGI/zQ5Iy+o="


def test_signing_twice_gives_the_same_signature() -> None:
    cmd = RemotingCommand.request(105, {"topic": "T"})
    creds = SessionCredentials(access_key="RocketMQ", secret_key="12345678")
    sign_request(cmd, creds)
    first = cmd.ext_fields["Signature"]
    sign_request(cmd, creds)
    assert cmd.ext_fields["Signature"] == first


def test_calc_signature_of_access_key_only() -> None:
    assert calc_signature(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_credentials_never_show_the_secret() -> None:
    creds = SessionCredentials(access_key="RocketMQ", secret_key="12345678")
    assert "12345678" not in repr(creds)
    assert "12345678" not in repr(ClientConfig(access_key="RocketMQ", secret_key="12345678"))


def test_client_config_credentials() -> None:
    assert ClientConfig().credentials is None
    cfg = ClientConfig.from_properties({"accessKey": "RocketMQ", "secretKey": "12345678"})
    assert cfg.credentials == SessionCredentials(access_key="RocketMQ", secret_key="12345678")
    with pytest.raises(ClientError, match="both"):
        ClientConfig(access_key="RocketMQ")
    with pytest.raises(ClientError, match="access key and a secret key"):
        ClientConfig(access_key="", secret_key="x")


def test_content_orders_names_by_utf16_units_like_java_treemap() -> None:
    # U+1F600 is a surrogate pair (D83D DE00) in Java: it sorts before U+FF01, unlike code points
    fields = {"\uff01": "b", "\U0001f600": "a", "A": "0"}
    assert request_content(fields, None) == b"0ab"
    assert request_content({"b": "2", "a": "1", "B": "0"}, b"!") == b"012!"
