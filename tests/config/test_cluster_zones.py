"""Clusters spanning zones: zone names, zone links (latency required), the fabric between zones."""

from __future__ import annotations

import pytest

from heterosim.cli import main
from heterosim.config.cluster import load_cluster, parse_cluster
from heterosim.engine.topology import build_topology
from heterosim.errors import UserError

HOSTS = {"t": {"gpu": "H100", "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}}


def zoned(links, zones=("a", "b")):
    return parse_cluster(
        {
            "zones": list(zones),
            "host_types": HOSTS,
            "hosts": [{"type": "t", "count": 2, "zone": "a"}, {"type": "t", "count": 2, "zone": "b"}],
            "zone_links": links,
        },
        "z.yaml",
    )


def test_zone_link_carries_its_latency_and_bandwidth():
    cluster = zoned([{"zones": ["a", "b"], "latency": "2ms", "bandwidth": "100Gbps"}])
    assert cluster.zone_of_host == (0, 0, 1, 1)
    topo = build_topology(cluster)
    path = topo.path_links(0, 16)  # host 0 (zone a) to host 2 (zone b)
    delays = [int(topo.link_delay_ns[k]) for k in path]
    assert 2_000_000 in delays
    assert min(float(topo.link_rate_bps[k]) for k in path) == pytest.approx(100e9)
    inside = topo.path_links(0, 8)  # same zone: never over the zone link
    assert max(int(topo.link_delay_ns[k]) for k in inside) < 1_000_000


@pytest.mark.parametrize(
    ("links", "needle"),
    [
        ([{"zones": ["a", "b"], "bandwidth": "10Gbps"}], "zone_links[0].latency: missing required key"),
        ([{"zones": ["a", "c"], "latency": "1ms", "bandwidth": "10Gbps"}], "unknown zone 'c'"),
        ([], "zone b holds hosts but no zone link reaches it"),
        ([{"zones": ["a", "a"], "latency": "1ms", "bandwidth": "1Gbps"}], "two different zones"),
    ],
)
def test_bad_zone_links_are_one_line_errors(links, needle):
    with pytest.raises(UserError) as err:
        zoned(links)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_zone_link_without_latency_exits_2(tmp_path, capsys):
    path = tmp_path / "z.yaml"
    path.write_text(
        "zones: [a, b]\n"
        "host_types: {t: {gpu: H100, gpus: 8, nics: 8, nic_speed: 400Gbps}}\n"
        "hosts: [{type: t, count: 1, zone: a}, {type: t, count: 1, zone: b}]\n"
        "zone_links: [{zones: [a, b], bandwidth: 100Gbps}]\n"
    )
    rc = main(["collective", "--cluster", str(path), "--size", "1MiB", "--ranks", "0-15"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "latency" in err[0]


def test_cloud_presets_load(repo_root):
    for path in sorted((repo_root / "topologies" / "cloud").glob("*.yaml")):
        cluster = load_cluster(path)
        assert build_topology(cluster).num_nodes > cluster.world_size
