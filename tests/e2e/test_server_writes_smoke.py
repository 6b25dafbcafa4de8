"""Smoke run of ``benchmarks.server_writes`` in-process: a tiny synthetic store (no model), two
seconds a phase, so that the script cannot rot unnoticed; the table's shape, not its numbers."""

from __future__ import annotations

import pytest

RECORDS = 240  # 40 synthetic parents of 5 segments


@pytest.fixture
def server_writes():
    from benchmarks import server_writes

    return server_writes


def table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| phase")]


@pytest.mark.parametrize("mode", ["embedded", pytest.param("server", marks=pytest.mark.integration)])
def test_server_writes_smoke(server_writes, mode, tmp_path, capsys):
    from hseg.store import HierarchicalStore

    out, db = tmp_path / "server_writes.md", tmp_path / "db"
    assert server_writes.main(["--store", "synthetic", "--path", str(db), "--records", str(RECORDS), "--dim", "16",
                               "--mode", mode, "--seconds", "2", "--interval", "0.5", "--warmup", "2",
                               "--out", str(out)]) == 0
    report = out.read_text(encoding="utf-8")
    assert report in capsys.readouterr().out
    assert f"synthetic, {RECORDS} records" in report
    rows = table_rows(report)
    assert [r[0] for r in rows] == ["reader alone", "writer every 0.5 s", "writer continuously"]
    assert all(len(r) == 14 and int(r[1]) >= 1 for r in rows)  # every phase asked at least one question
    assert rows[0][2] == "0 / 0"  # a reader alone never fails
    assert rows[0][3] == "—" and all(int(r[3]) >= 1 for r in rows[1:])  # the writer wrote while the reader read
    assert rows[0][11] == "1.00 / 1.00" and rows[0][12] == "1.00 / 1.00"  # alone is its own unit
    assert "Target, default search under writes" in report
    # the writer's documents are deleted when the run ends: the store is the size it was built to
    assert HierarchicalStore(server_writes.SYNTHETIC_COLLECTION, path=str(db)).count() == RECORDS
