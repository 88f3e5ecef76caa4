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


def test_instance_fills_the_host_type_and_own_keys_win():
    cluster = parse_cluster(
        {
            "host_types": {
                "p4d": {"instance": "aws/p4d.24xlarge"},
                "p3": {"instance": "AWS/p3.8xlarge", "nic_speed": "25Gbps"},
            },
            "hosts": [{"type": "p4d", "count": 1}, {"type": "p3", "count": 1}],
        },
        "i.yaml",
    )
    p4d, p3 = cluster.host_types["p4d"], cluster.host_types["p3"]
    assert (p4d.gpu, p4d.gpus, p4d.fabric, p4d.nics, p4d.transport) == (
        "A100-40GB-SXM",
        8,
        "nvswitch",
        4,
        "rdma",
    )
    assert p4d.nic_speed_bps == pytest.approx(100e9)  # 400 Gbps over 4 NICs
    assert (p3.gpus, p3.transport, p3.nic_speed_bps) == (4, "socket", pytest.approx(25e9))


def test_every_catalogued_instance_makes_a_valid_host(repo_root):
    from heterosim.catalog.instances import instance_types

    for name, entry in instance_types().items():
        assert "source" in entry and entry["source"]
        cluster = parse_cluster({"host_types": {"t": {"instance": name}}, "hosts": [{"type": "t"}]}, "i.yaml")
        assert cluster.world_size == entry["gpus"]


def test_unknown_instance_is_a_one_line_error():
    with pytest.raises(UserError) as err:
        parse_cluster({"host_types": {"t": {"instance": "aws/p9.huge"}}, "hosts": [{"type": "t"}]}, "i.yaml")
    assert "host_types.t.instance: unknown instance type" in str(err.value) and "\n" not in str(err.value)
