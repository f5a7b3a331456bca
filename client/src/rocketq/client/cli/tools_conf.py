"""The ACL credentials ``mqadmin`` signs with when none are given: ``conf/tools.yml``, as Java's
``MQAdminStartup`` reads it (``AclUtils.getAclRPCHook(ROCKETMQ_HOME + "/conf/tools.yml")``).

The file is YAML with two keys, ``accessKey`` and ``secretKey``.  Where it is: ``--tools-yml
PATH``, else ``$ROCKETMQ_HOME/conf/tools.yml`` (Java takes the home from ``-Drocketmq.home.dir``
or ``ROCKETMQ_HOME``).  Credentials given on the command line or in ``ROCKETMQ_ACCESS_KEY`` /
``ROCKETMQ_SECRET_KEY`` win over the file.  A home without the file means no credentials, as in
Java; a file named with ``--tools-yml`` that is missing, a file that is not YAML, or one with
only one of the two keys is an error naming the file (Java logs a warning and signs nothing,
which then surfaces as the broker's NO_PERMISSION).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from rocketq.client.errors import RocketQError

__all__ = ["TOOLS_YML", "ToolsConfError", "tools_credentials", "tools_yml_path"]

#: Java's ``MixAll.ACL_CONF_TOOLS_FILE``, relative to the RocketMQ home
TOOLS_YML = "conf/tools.yml"


class ToolsConfError(RocketQError):
    """``tools.yml`` could not be used (missing when named, not YAML, one key only)."""


def tools_yml_path(option: str | None, env: Mapping[str, str]) -> tuple[Path, bool] | None:
    """The file to read and whether it was named explicitly; None when there is no home."""
    if option:
        return Path(option), True
    home = env.get("ROCKETMQ_HOME")
    return (Path(home) / TOOLS_YML, False) if home else None


def tools_credentials(option: str | None, env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(accessKey, secretKey)`` from tools.yml, or None when there is no file to read."""
    found = tools_yml_path(option, env)
    if found is None:
        return None
    path, explicit = found
    if not path.is_file():
        if explicit:
            raise ToolsConfError(f"--tools-yml {path}: no such file")
        return None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ToolsConfError(f"{path}: cannot read it as YAML ({exc})") from exc
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise ToolsConfError(f"{path}: expected the keys accessKey and secretKey, found {type(doc).__name__}")
    access, secret = doc.get("accessKey"), doc.get("secretKey")
    access = str(access).strip() if access is not None else ""
    secret = str(secret).strip() if secret is not None else ""
    if not access and not secret:
        return None
    if not access or not secret:
        missing = "accessKey" if not access else "secretKey"
        raise ToolsConfError(f"{path}: {missing} is missing or blank (give both accessKey and secretKey)")
    return access, secret
