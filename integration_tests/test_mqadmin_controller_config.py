"""mqadmin updateControllerConfig against real controllers: standalone and embedded in mqnamesrv.

A runtime key changes (getControllerConfig shows it), is written into the file the controller was
started with and survives a restart; a key that cannot change at runtime (Java's black-listed
``configStorePath``, and ``listenPort``) is refused with its name and exit status 1, a bad value
too; bad usage exits 2.  With several ``-a`` addresses every controller is changed.
"""

from __future__ import annotations

from pathlib import Path

from rocketq.client.launcher import (
    CONTROLLER_BOOT_RE,
    free_port,
    restart_controller,
    spawn_controllers,
    spawn_namesrv,
)
from rocketq.client.testing import run_mqadmin


def _config(addr: str) -> dict[str, str]:
    done = run_mqadmin("getControllerConfig", "-a", addr)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()[1:]
    return {key.strip(): value for key, _, value in (line.partition("=  ") for line in lines)}


def _update(addr: str, key: str, value: str) -> tuple[int, str, str]:
    done = run_mqadmin("updateControllerConfig", "-a", addr, "-k", key, "-v", value)
    return done.returncode, done.stdout, done.stderr


def test_standalone_controllers_change_persist_and_refuse(tmp_path: Path) -> None:
    controllers = spawn_controllers(tmp_path, 2)
    try:
        both = ";".join(c.addr for c in controllers)
        assert all(_config(c.addr)["enableElectUncleanMaster"] == "false" for c in controllers)
        code, out, err = _update(both, "enableElectUncleanMaster", "true")
        assert code == 0, err
        assert out.splitlines() == [
            f"update controller config success![{controllers[0].addr}, {controllers[1].addr}]",
            "enableElectUncleanMaster : true",
        ]
        assert all(_config(c.addr)["enableElectUncleanMaster"] == "true" for c in controllers)
        conf = tmp_path / "controller-n0.conf"
        assert "enableElectUncleanMaster=true" in conf.read_text(encoding="utf-8").splitlines()
        assert "controllerDLegerSelfId=n0" in conf.read_text(encoding="utf-8")  # other lines kept

        code, out, err = _update(controllers[0].addr, "scanNotActiveBrokerInterval", "2500")
        assert code == 0, err
        assert _config(controllers[0].addr)["scanNotActiveBrokerInterval"] == "2500"

        for key in ("configStorePath", "listenPort"):
            code, _, err = _update(controllers[0].addr, key, "1")
            assert code == 1 and key in err and "cannot change at runtime" in err, err
        code, _, err = _update(controllers[0].addr, "electMasterMaxRetryCount", "many")
        assert code == 1 and "electMasterMaxRetryCount" in err, err
        assert _config(controllers[0].addr)["electMasterMaxRetryCount"] == "3"  # unchanged
        missing_value = run_mqadmin("updateControllerConfig", "-a", controllers[0].addr, "-k", "x")
        assert missing_value.returncode == 2 and "-v" in missing_value.stderr, missing_value.stderr
        no_address = run_mqadmin("updateControllerConfig", "-k", "enableElectUncleanMaster", "-v", "true")
        assert no_address.returncode == 2, no_address.stderr

        controllers[0].kill9()
        controllers[0] = restart_controller(controllers[0])
        after = _config(controllers[0].addr)
        assert after["enableElectUncleanMaster"] == "true" and after["scanNotActiveBrokerInterval"] == "2500"
    finally:
        for proc in controllers:
            proc.kill9()


def test_controller_embedded_in_namesrv_changes_and_persists(tmp_path: Path) -> None:
    port, raft_port = free_port(), free_port()
    conf = tmp_path / "namesrv.properties"
    conf.write_text(
        "enableControllerInNamesrv=true\n"
        f"controllerDLegerPeers=n0-127.0.0.1:{port}:{raft_port}\n"
        "controllerDLegerSelfId=n0\n"
        f"controllerStorePath={tmp_path / 'controller-store'}\n",
        encoding="utf-8",
    )
    namesrv = spawn_namesrv(tmp_path, "-c", str(conf))
    try:
        match = CONTROLLER_BOOT_RE.search(namesrv.log_text())
        assert match is not None
        controller = match.group(1)
        code, _, err = _update(controller, "notifyBrokerRoleChanged", "false")
        assert code == 0, err
        assert _config(controller)["notifyBrokerRoleChanged"] == "false"
        assert "notifyBrokerRoleChanged=false" in conf.read_text(encoding="utf-8").splitlines()
        code, _, err = _update(controller, "controllerDLegerPeers", "n0-127.0.0.1:1")
        assert code == 1 and "controllerDLegerPeers" in err, err
        # the NameServer's own port does not take controller requests
        code, _, err = _update(namesrv.addr, "notifyBrokerRoleChanged", "true")
        assert code == 1, err
        namesrv.kill9()
        namesrv = spawn_namesrv(tmp_path, "-c", str(conf))
        assert _config(controller)["notifyBrokerRoleChanged"] == "false"
    finally:
        namesrv.kill9()
