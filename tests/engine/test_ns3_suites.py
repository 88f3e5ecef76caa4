"""The ns-3 TestSuites of ns3_modules/*/test/, built into the test library and run by ns-3's
TestRunner: one pytest case per suite (each CC algorithm, the switch MMU, PFC on one link and
through a switch, load balancing, the UET transport and NSCC, the executor, the frame pool, the
socket transport, the episode cache)."""

from __future__ import annotations

import pytest

from heterosim.engine import native

pytestmark = pytest.mark.ns3

EXPECTED = {
    "heterosim-dcqcn",
    "heterosim-hpcc",
    "heterosim-timely",
    "heterosim-dctcp",
    "heterosim-no-congestion-control",
    "heterosim-switch-mmu",
    "heterosim-pfc",
    "heterosim-load-balancing",
    "heterosim-uet",
    "heterosim-episode-cache",
    "heterosim-plan-executor",
    "heterosim-shiftable-scheduler",
    "heterosim-topology-planes",
    "heterosim-rdma-frame-pool",
    "heterosim-qbb-pfc",
    "heterosim-qbb-trace-helper",
    "heterosim-socket-transport",
}


def test_every_module_part_has_its_suites():
    assert EXPECTED <= set(native.ns3_test_suite_names())


@pytest.mark.parametrize("suite", sorted(EXPECTED))
def test_ns3_test_suite_passes(native_lib, suite, tmp_path, capfd):
    status = native.run_ns3_test_suite(suite, tmp_path)
    report = capfd.readouterr().out
    assert status == 0, report[-4000:]
    assert "PASS" in report and suite in report
