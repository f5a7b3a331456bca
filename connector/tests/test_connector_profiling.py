"""Unit tests of the opt-in worker profiles (ROCKETQ_CONNECTOR_PROFILE)."""

from __future__ import annotations

import pstats
from pathlib import Path

import pytest

from rocketq.connector.profiling import ENV, profiled, profiled_iter


def test_unset_profiles_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert list(profiled_iter("read", iter([1, 2]))) == [1, 2]
    with profiled("write"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_set_writes_one_profile_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "prof"))

    def rows() -> object:
        yield from (sorted(range(1000, 0, -1)) for _ in range(3))

    assert len(list(profiled_iter("read", iter(rows())))) == 3  # type: ignore[call-overload]
    with profiled("commit"):
        sorted(range(10))
    files = sorted(p.name.split("-")[0] for p in (tmp_path / "prof").iterdir())
    assert files == ["commit", "read"]
    stats = pstats.Stats(str(next((tmp_path / "prof").glob("read-*.prof"))))
    assert any(name == "<built-in method builtins.sorted>" for _, _, name in stats.stats)  # type: ignore[attr-defined]
