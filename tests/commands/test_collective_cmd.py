"""``heterosim collective``: nccl-tests table, results.json contract, plot, errors."""

from __future__ import annotations

import json

import pytest

from heterosim.cli import main

pytestmark = pytest.mark.ns3


def test_size_range_writes_results_and_plot(native_lib, repo_root, tmp_path, capsys):
    cluster = repo_root / "topologies" / "two_host_h100.yaml"
    rc = main(
        [
            "collective",
            "--cluster",
            str(cluster),
            "--op",
            "allreduce",
            "--size",
            "1KiB..1MiB",
            "--ranks",
            "0-15",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "busbw" in out and "algorithm" in out
    doc = json.loads((tmp_path / "results.json").read_text())
    sizes = doc["sizes"]
    assert [s["size_bytes"] for s in sizes] == [2**k for k in range(10, 21)]
    for row in sizes:
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * 2 * 15 / 16)
        assert row["algbw_GBps"] == pytest.approx(row["size_bytes"] / row["time_s"] / 1e9)
        assert row["algorithm"] and row["protocol"]
    assert sizes[0]["protocol"] == "ll"  # small messages: the low-latency protocol
    assert (tmp_path / "busbw_vs_size.png").stat().st_size > 1000


def test_single_size_keys(native_lib, repo_root, tmp_path):
    cluster = repo_root / "topologies" / "two_host_h100.yaml"
    rc = main(
        [
            "collective",
            "--cluster",
            str(cluster),
            "--op",
            "allgather",
            "--size",
            "4MiB",
            "--ranks",
            "0-7",
            "--algo",
            "ring",
            "--protocol",
            "simple",
            "--out",
            str(tmp_path),
            "--chakra",
            str(tmp_path / "et"),
        ]
    )
    assert rc == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    assert {"time_s", "algbw_GBps", "busbw_GBps"} <= set(doc)
    assert doc["busbw_GBps"] == pytest.approx(doc["algbw_GBps"] * 7 / 8)
    assert (doc["algorithm"], doc["protocol"]) == ("ring", "simple")
    names = sorted(p.name for p in (tmp_path / "et").iterdir() if not p.name.startswith("."))
    assert names == [f"collective.{r}.et" for r in range(8)]


def test_bad_input_exits_2(repo_root, capsys):
    cluster = repo_root / "topologies" / "two_host_h100.yaml"
    assert main(["collective", "--cluster", str(cluster), "--ranks", "0-99"]) == 2
    assert main(["collective", "--cluster", str(cluster), "--op", "allsum"]) == 2
    assert main(["collective", "--cluster", str(cluster), "--ranks", "a-b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("heterosim collective: error:") for line in err)
