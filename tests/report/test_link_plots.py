"""Link throughput series (both fidelities) conserve the bytes the links carried; the timeline
groups ranks by stage and GPU type at any scale and says which ranks it shows; plots are written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from heterosim.report.link_series import link_rates, port_queues
from heterosim.report.plots import (
    merged_segments,
    plot_link_utilization,
    plot_queues,
    plot_timeline,
    timeline_rows,
)

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_experiment.yaml"


def test_timeline_rows_group_by_stage_and_gpu_and_thin_evenly_past_the_limit():
    stage = np.repeat([1, 0, 2, 3], 100)  # 400 ranks, stage order not rank order
    gpu = ["A100"] * 100 + ["H100"] * 60 + ["H800"] * 40 + ["H100"] * 100 + ["L40S"] * 100
    rows, groups = timeline_rows(stage, gpu, max_rows=100)
    labels = [label.split("\n")[0] for label, _, _ in groups]
    assert labels == [
        "stage 0 · H100",
        "stage 0 · H800",
        "stage 1 · A100",
        "stage 2 · H100",
        "stage 3 · L40S",
    ]
    assert sum(count for _, _, count in groups) == rows.size <= 100 + len(groups)
    for (label, first, count), (lo, hi) in zip(
        groups, [(100, 159), (160, 199), (0, 99), (200, 299), (300, 399)]
    ):
        shown = rows[first : first + count]
        assert shown[0] == lo and shown[-1] == hi  # each group's first and last rank are drawn
        assert f"ranks {lo}-{hi}" in label
    all_rows, _ = timeline_rows(stage, gpu, max_rows=400)
    assert sorted(all_rows.tolist()) == list(range(400))


def test_timeline_labels_name_a_folded_replicas_global_ranks():
    # replica 0 of a 16-GPU job folded by data parallelism: its ranks are 0, 1, 8, 9
    stage = np.array([0, 0, 1, 1])
    rows, groups = timeline_rows(stage, ["H100"] * 4, rank_ids=np.array([0, 1, 8, 9]))
    assert rows.tolist() == [0, 1, 2, 3]  # rows stay positions in the replica
    assert [label.split("\n")[1] for label, _, _ in groups] == ["ranks 0-1", "ranks 8-9"]
    _, plain = timeline_rows(stage, ["H100"] * 4)
    assert [label.split("\n")[1] for label, _, _ in plain] == ["ranks 0-1", "ranks 2-3"]


@pytest.fixture(scope="module", params=["flow", "packet"])
def tiny_run(request, native_lib):
    from heterosim.config.experiment import load_experiment
    from heterosim.simulate import run_experiment

    return run_experiment(load_experiment(TINY), fidelity=request.param)


@pytest.mark.ns3
def test_link_throughput_over_time_adds_up_to_the_bytes_each_link_carried(tiny_run):
    run = tiny_run
    engine, topo = run.engine, run.topology
    rates = link_rates(engine.series, topo)
    assert (
        rates is not None
        and rates.network.any()
        and rates.direction.size == 16 + 8 * (engine.fidelity == "flow")
    )  # packet fidelity samples fabric ports and NIC uplinks only
    carried = rates.rate_bps * np.diff(rates.time_ns)[:, None] * 1e-9 / 8
    links = engine.links
    key = np.asarray(links["link"], np.int64) * 2 + np.asarray(links["direction"], np.int64)
    total = dict(zip(key.tolist(), np.asarray(links["bytes"], np.float64).tolist()))
    interval_ns = run.experiment.simulation.sample_interval_ns
    end_ns = max(engine.makespan_ns, int(rates.time_ns[-1]))
    for i, direction in enumerate(rates.direction.tolist()):
        up_to_last_sample = carried[:, i].sum()
        tail = rates.capacity_bps[i] / 8 * (end_ns - rates.time_ns[-1]) * 1e-9
        assert total[direction] - tail - 1 <= up_to_last_sample <= total[direction] + 1
        assert end_ns - rates.time_ns[-1] <= interval_ns
    # no interval runs faster than the link (payload: capacity; wire bytes: within one frame)
    assert np.all(rates.utilization <= 1.0 + 1e-6 + 4096 * 8 / (interval_ns * 1e-9) / rates.capacity_bps)


@pytest.mark.ns3
def test_plots_are_written_for_both_fidelities(tiny_run, tmp_path):
    run = tiny_run
    engine, plan = run.engine, run.tables.plan
    stage = np.array([run.workload.layout.pp_index(r) for r in range(len(run.rank_gpu))])
    gpu = [run.experiment.cluster.gpu_type[int(g)] for g in run.rank_gpu]
    plot_timeline(
        tmp_path / "timeline.png", plan, engine.task_start_ns, engine.task_end_ns, run.rank_gpu, stage, gpu
    )
    plot_link_utilization(tmp_path / "link.png", link_rates(engine.series, run.topology), 48)
    queues = port_queues(engine.series, run.topology)
    assert (queues is None) == (engine.fidelity == "flow")  # the fluid model has no queues
    if queues is not None:
        assert queues.depth_bytes.max() > 0 and all("->" in name for name in queues.names)
        plot_queues(tmp_path / "queues.png", queues, 48)
    for png in tmp_path.glob("*.png"):
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_merged_segments_are_the_union_of_each_rows_spans():
    rng = np.random.default_rng(7)
    row = rng.integers(0, 6, 3000)
    start = rng.integers(0, 200_000, 3000)
    end = start + rng.integers(1, 500, 3000)
    out_row, first, last = merged_segments(row, start, end, gap=0)
    for r in range(6):
        covered = np.zeros(201_000, dtype=bool)
        for s, e in zip(start[row == r], end[row == r]):
            covered[s:e] = True
        merged = np.zeros_like(covered)
        mine = out_row == r
        assert np.all(first[mine][1:] > last[mine][:-1])  # disjoint, in time order
        for s, e in zip(first[mine], last[mine]):
            merged[s:e] = True
        assert np.array_equal(covered, merged)
    _, wide_first, _ = merged_segments(row, start, end, gap=10_000)
    assert wide_first.size < first.size  # closing gaps below a pixel merges more


@pytest.mark.ns3
def test_fluid_series_of_the_busiest_directions_gives_the_rates_of_the_whole_series(native_lib, monkeypatch):
    """The engine keeps the rows of the busiest directions only (LINK_SERIES_KEEP per kind) with
    every sample time and total: the rates of the busiest directions are those computed from
    every row of every direction."""
    from heterosim.config.experiment import load_experiment
    from heterosim.engine import network_model
    from heterosim.simulate import run_experiment

    monkeypatch.setattr(network_model, "LINK_SERIES_KEEP", 100_000)  # every direction: the whole series
    whole = run_experiment(load_experiment(TINY), fidelity="flow")
    monkeypatch.setattr(network_model, "LINK_SERIES_KEEP", 3)
    kept = run_experiment(load_experiment(TINY), fidelity="flow")
    table = whole.engine.series["link"]
    assert np.unique(table["direction"]).size == table["directions_sampled"] > 2 * 3
    assert kept.engine.series["link"]["direction"].size < table["direction"].size
    plain = {key: table[key] for key in ("time_ns", "direction", "bytes")}  # no totals: all rows
    expected = link_rates({**whole.engine.series, "link": plain}, whole.topology, 3, 3)
    got = link_rates(kept.engine.series, kept.topology, 3, 3)
    assert expected is not None and got is not None
    np.testing.assert_array_equal(got.direction, expected.direction)
    np.testing.assert_array_equal(got.time_ns, expected.time_ns)
    np.testing.assert_array_equal(got.rate_bps, expected.rate_bps)
    with pytest.raises(ValueError, match="3 directions per kind"):
        link_rates(kept.engine.series, kept.topology, 4, 3)


def test_link_rates_do_not_depend_on_the_row_chunk(monkeypatch):
    """The sample table is read a chunk of rows at a time; any chunk gives the same rates."""
    from types import SimpleNamespace

    import heterosim.report.link_series as link_series

    rng = np.random.default_rng(3)
    times = np.arange(1, 41, dtype=np.int64) * 10_000
    rows_t, rows_d, rows_b = [], [], []
    carried = np.zeros(8, np.uint64)
    for t in times:  # each direction carries at random moments; cumulative bytes only grow
        for d in np.flatnonzero(rng.random(8) < 0.5):
            carried[d] += np.uint64(rng.integers(1, 10**6))
            rows_t.append(t)
            rows_d.append(d)
            rows_b.append(carried[d])
    series = {
        "link": {
            "time_ns": np.array(rows_t, np.int64),
            "direction": np.array(rows_d, np.uint32),
            "bytes": np.array(rows_b, np.uint64),
            "sample_time_ns": times,
            "direction_bytes": carried.copy(),
            "kept_per_kind": 4,
        }
    }
    topo = SimpleNamespace(
        link_kind=np.array([1, 1, 2, 2]),  # two PCIe links, two access links
        link_rate_bps=np.full(4, 100e9),
        link_a=np.arange(4),
        link_b=np.arange(4) + 4,
        node_name=[f"n{i}" for i in range(8)],
    )
    whole = link_series.link_rates(series, topo, 2, 2)
    for chunk in (1, 7):
        monkeypatch.setattr(link_series, "ROW_CHUNK", chunk)
        part = link_series.link_rates(series, topo, 2, 2)
        assert part.names == whole.names
        assert np.array_equal(part.rate_bps, whole.rate_bps)
    # the rate of a direction over an interval is the bytes it moved there (by hand, one of them)
    first = int(whole.direction[0])
    cumulative = np.maximum.accumulate(np.concatenate([[0], _cumulative_at(series["link"], first, times)]))
    moved = np.diff(cumulative)
    assert np.allclose(whole.rate_bps[:, 0], moved * 8.0 / np.diff(np.concatenate([[0], times])) * 1e9)


def _cumulative_at(table, direction, times):
    """Cumulative bytes of ``direction`` at each sample time (0 before its first row)."""
    out = np.zeros(times.size)
    rows = table["direction"] == direction
    out[np.searchsorted(times, table["time_ns"][rows])] = table["bytes"][rows]
    return out
