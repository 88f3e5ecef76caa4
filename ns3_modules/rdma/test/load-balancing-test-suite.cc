/*
 * HeteroSim: TestSuite for load balancing at switches (LoadBalancer) and the NIC's selective
 * loss recovery (RdmaNic Transport=irn).
 */
#include "flow-runner-test-helper.h"

#include "ns3/node.h"
#include "ns3/packet-network-stats.h"
#include "ns3/packet-network.h"
#include "ns3/rdma-switch.h"
#include "ns3/simulator.h"
#include "ns3/star-topology-helper.h"
#include "ns3/test.h"
#include "ns3/two-tier-topology-helper.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace ns3;

namespace
{

using rdmatest::Flows;
using rdmatest::Outcome;
using rdmatest::RunFlows;

/** Build a network on \p topo with \p attrs (NoCongestionControl, 1000-byte MTU). */
Ptr<PacketNetwork>
BuildNetwork(Ptr<TopologyDescription> topo, const std::map<std::string, std::string>& attrs)
{
    return rdmatest::BuildNetwork(
        topo, {{"Cc", "ns3::NoCongestionControl"}, {"Mtu", "1000"}}, attrs);
}

/** Two cross-leaf flows over four spines (100 Gb/s, 1 us links), 1 MB each. */
Flows
CrossLeafFlows()
{
    return Flows{{0, 1}, {2, 3}, {1000000, 1000000}};
}

} // namespace

/**
 * \brief Random spraying over four spines reorders packets; the IRN receiver still delivers
 * every byte of every flow in order, and a second run with the same seed counts the same.
 */
class SprayDeliversInOrderTestCase : public TestCase
{
  public:
    SprayDeliversInOrderTestCase()
        : TestCase("spraying reorders packets; every byte is delivered in order")
    {
    }

  private:
    Outcome
    Run()
    {
        Simulator::Destroy();
        TwoTierTopologyHelper topo(2, 4, 100e9, 400e9, MicroSeconds(1));
        Ptr<PacketNetwork> net = BuildNetwork(
            topo.Create(),
            {{"LoadBalancing", "spray"}, {"RdmaNic::Transport", "irn"}, {"PfcEnabled", "false"}});
        Outcome out = RunFlows(net, CrossLeafFlows());
        net->Dispose();
        Simulator::Destroy();
        return out;
    }

    void
    DoRun() override
    {
        Outcome out = Run();
        NS_TEST_ASSERT_MSG_EQ(out.finished, 2, "both flows finished");
        uint64_t ooo = 0;
        for (uint32_t i = 0; i < 2; ++i)
        {
            NS_TEST_ASSERT_MSG_EQ(out.delivered[i], 1000000, "every byte delivered in order");
            ooo += out.outOfOrder[i];
        }
        NS_TEST_ASSERT_MSG_GT(ooo, 0, "sprayed packets arrived out of order");
        NS_TEST_ASSERT_MSG_GT(std::max(out.maxDepth[0], out.maxDepth[1]), 0, "a reorder depth");
        Outcome again = Run();
        NS_TEST_ASSERT_MSG_EQ(again.outOfOrder[0], out.outOfOrder[0], "reproducible");
        NS_TEST_ASSERT_MSG_EQ(again.end[1], out.end[1], "reproducible");
    }
};

/**
 * \brief Round-robin spraying puts each destination's packets on the uplinks in turn: the four
 * uplinks of the sending leaf carry the same number of frames, give or take one per flow.
 */
class SprayRoundRobinTestCase : public TestCase
{
  public:
    SprayRoundRobinTestCase()
        : TestCase("round-robin spraying spreads packets evenly over the uplinks")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        TwoTierTopologyHelper topo(2, 4, 100e9, 400e9, MicroSeconds(1));
        Ptr<PacketNetwork> net = BuildNetwork(
            topo.Create(), {{"LoadBalancing", "spray_rr"}, {"RdmaNic::Transport", "irn"}});
        Outcome out = RunFlows(net, CrossLeafFlows());
        NS_TEST_ASSERT_MSG_EQ(out.finished, 2, "both flows finished");
        std::vector<uint64_t> frames;
        for (uint32_t s = 0; s < 4; ++s)
        {
            frames.push_back(net->GetPortDevice(2 * topo.GetUplink(0, s))->GetTxFrames());
        }
        uint64_t lo = *std::min_element(frames.begin(), frames.end());
        uint64_t hi = *std::max_element(frames.begin(), frames.end());
        NS_TEST_ASSERT_MSG_GT(lo, 0, "every uplink used");
        NS_TEST_ASSERT_MSG_LT_OR_EQ(hi - lo, 2, "within one frame per flow");
        net->Dispose();
        Simulator::Destroy();
    }
};

/**
 * \brief Adaptive routing keeps a flow off a degraded uplink: with one of two uplinks cut to
 * 10 Gb/s midway, the flow still finishes within 15% of its 100 Gb/s time, and the degraded
 * port's queue never exceeds a few frames (the reaction is per packet). ECMP, whose hash may
 * pin the flow to the slow link, is run on the path it chose for comparison.
 */
class AdaptiveAvoidsDegradedLinkTestCase : public TestCase
{
  public:
    AdaptiveAvoidsDegradedLinkTestCase()
        : TestCase("adaptive routing avoids a degraded link within one packet")
    {
    }

  private:
    /** \return (finish time ns, max queue bytes of the degraded port) */
    std::pair<int64_t, uint64_t>
    Run(const std::string& mode)
    {
        Simulator::Destroy();
        TwoTierTopologyHelper topo(1, 2, 100e9, 400e9, MicroSeconds(1));
        Ptr<TopologyDescription> desc = topo.Create();
        Ptr<PacketNetwork> net = BuildNetwork(
            desc,
            {{"LoadBalancing", mode},
             {"RdmaNic::Transport", "irn"},
             // the slow path lags the fast one by up to ~20 packets: no spurious resends
             {"RdmaNic::SackReorderThreshold", "64"}});
        Flows flows{{0}, {1}, {4000000}};
        // degrade the uplink the ECMP hash picks for this flow (so ECMP meets it)
        uint32_t slow = topo.GetUplink(0, 0);
        Simulator::Schedule(MicroSeconds(100), [net, slow]() { net->SetLinkRate(slow, 10e9); });
        Outcome out = RunFlows(net, flows);
        std::vector<uint32_t> path = net->GetFlowPath(0);
        bool ecmpOnSlow = std::find(path.begin(), path.end(), slow) != path.end();
        uint64_t queue = net->GetPortDevice(2 * slow)->GetMaxQueueBytes();
        int64_t end = out.end[0];
        net->Dispose();
        Simulator::Destroy();
        NS_ABORT_MSG_UNLESS(out.finished == 1, "the flow finished");
        return {mode == "ecmp" && !ecmpOnSlow ? -1 : end, queue};
    }

    void
    DoRun() override
    {
        // 4 MB at 100 Gb/s: 320 us of payload, 346 us with the 82-byte frame overhead
        auto [adaptiveEnd, adaptiveQueue] = Run("adaptive");
        NS_TEST_ASSERT_MSG_LT(adaptiveEnd, 346000 * 115 / 100, "finishes near 100 Gb/s");
        NS_TEST_ASSERT_MSG_LT_OR_EQ(adaptiveQueue, 3 * 1082, "at most a few frames queued");
        auto [ecmpEnd, ecmpQueue] = Run("ecmp");
        if (ecmpEnd >= 0)
        {
            NS_TEST_ASSERT_MSG_GT(ecmpEnd, 2 * adaptiveEnd, "ECMP stays on the slow link");
            NS_TEST_ASSERT_MSG_GT(ecmpQueue, 100 * 1082, "and queues there");
        }
    }
};

/**
 * \brief One data packet dropped on a lossy fabric: IRN retransmits that packet alone,
 * go-back-N the whole window sent after it; both deliver every byte.
 */
class SelectiveRetransmitTestCase : public TestCase
{
  public:
    SelectiveRetransmitTestCase()
        : TestCase("selective retransmission resends one lost packet, go-back-N the window")
    {
    }

  private:
    /** \return (retransmits, fault drops, delivered bytes) */
    std::tuple<uint64_t, uint64_t, uint64_t>
    Run(const std::string& transport)
    {
        Simulator::Destroy();
        Ptr<TopologyDescription> desc =
            StarTopologyHelper(2, 100e9, 400e9, MicroSeconds(1)).Create();
        Ptr<PacketNetwork> net =
            BuildNetwork(desc, {{"RdmaNic::Transport", transport}, {"PfcEnabled", "false"}});
        // the receiving NIC (node 3) ends link 3 as its A end: port 6; frames of 1082 bytes
        // arrive every 86.6 ns at 100 Gb/s, so an 86 ns loss window takes one
        Ptr<QbbNetDevice> rx = net->GetPortDevice(6);
        Simulator::Schedule(MicroSeconds(40), [rx]() { rx->SetLossProbability(1.0, 7); });
        Simulator::Schedule(MicroSeconds(40) + NanoSeconds(86),
                            [rx]() { rx->SetLossProbability(0.0, 7); });
        Outcome out = RunFlows(net, Flows{{0}, {1}, {2000000}});
        uint64_t drops = rx->GetFaultDrops();
        net->Dispose();
        Simulator::Destroy();
        return {out.retransmits[0], drops, out.delivered[0]};
    }

    void
    DoRun() override
    {
        auto [irnRetx, irnDrops, irnBytes] = Run("irn");
        NS_TEST_ASSERT_MSG_EQ(irnDrops, 1, "one packet lost");
        NS_TEST_ASSERT_MSG_EQ(irnBytes, 2000000, "every byte delivered");
        NS_TEST_ASSERT_MSG_EQ(irnRetx, 1, "IRN resends the lost packet only");
        auto [gbnRetx, gbnDrops, gbnBytes] = Run("roce");
        NS_TEST_ASSERT_MSG_EQ(gbnDrops, 1, "one packet lost");
        NS_TEST_ASSERT_MSG_EQ(gbnBytes, 2000000, "every byte delivered");
        // the window in flight when the NACK arrives: about one RTT (8 us) at 100 Gb/s
        NS_TEST_ASSERT_MSG_GT(gbnRetx, 20, "go-back-N resends the window after the loss");
    }
};

/**
 * \brief Flowlet switching keeps a flow that sends without pause on one uplink (no reordering);
 * with a gap shorter than the packet spacing every packet starts a flowlet and the flow spreads.
 */
class FlowletTestCase : public TestCase
{
  public:
    FlowletTestCase()
        : TestCase("flowlets keep a continuous flow on one path; a tiny gap spreads it")
    {
    }

  private:
    /** \return frames on the two uplinks of the sending leaf, and out-of-order packets */
    std::tuple<uint64_t, uint64_t, uint64_t>
    Run(const std::string& gap)
    {
        Simulator::Destroy();
        TwoTierTopologyHelper topo(1, 2, 100e9, 400e9, MicroSeconds(1));
        Ptr<PacketNetwork> net = BuildNetwork(topo.Create(),
                                              {{"LoadBalancing", "flowlet"},
                                               {"LoadBalancer::FlowletGap", gap},
                                               {"RdmaNic::Transport", "irn"}});
        Outcome out = RunFlows(net, Flows{{0}, {1}, {1000000}});
        uint64_t a = net->GetPortDevice(2 * topo.GetUplink(0, 0))->GetTxFrames();
        uint64_t b = net->GetPortDevice(2 * topo.GetUplink(0, 1))->GetTxFrames();
        Ptr<Node> leaf = net->GetPortDevice(2 * topo.GetUplink(0, 0))->GetNode();
        Ptr<LoadBalancer> lb = leaf->GetObject<RdmaSwitch>()->GetLoadBalancer();
        NS_ABORT_MSG_UNLESS(lb && out.finished == 1, "a balanced leaf and a finished flow");
        net->Dispose();
        Simulator::Destroy();
        return {std::min(a, b), a + b, out.outOfOrder[0]};
    }

    void
    DoRun() override
    {
        auto [idle, frames, ooo] = Run("500us");
        NS_TEST_ASSERT_MSG_EQ(frames, 1000, "1 MB in 1000-byte packets");
        NS_TEST_ASSERT_MSG_EQ(idle, 0, "one flowlet: one uplink");
        NS_TEST_ASSERT_MSG_EQ(ooo, 0, "no reordering");
        auto [idleTiny, framesTiny, oooTiny] = Run("1ns");
        NS_TEST_ASSERT_MSG_EQ(framesTiny, 1000, "1 MB in 1000-byte packets");
        NS_TEST_ASSERT_MSG_GT(idleTiny, 300, "every packet a flowlet: both uplinks carry it");
    }
};

/** \brief Load balancing and selective recovery TestSuite. */
class LoadBalancingTestSuite : public TestSuite
{
  public:
    LoadBalancingTestSuite()
        : TestSuite("heterosim-load-balancing", Type::SYSTEM)
    {
        AddTestCase(new SprayDeliversInOrderTestCase, Duration::QUICK);
        AddTestCase(new SprayRoundRobinTestCase, Duration::QUICK);
        AddTestCase(new FlowletTestCase, Duration::QUICK);
        AddTestCase(new AdaptiveAvoidsDegradedLinkTestCase, Duration::QUICK);
        AddTestCase(new SelectiveRetransmitTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static LoadBalancingTestSuite g_loadBalancingTestSuite;
