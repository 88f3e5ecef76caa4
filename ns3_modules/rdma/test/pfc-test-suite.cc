/*
 * HeteroSim: TestSuite for PFC in the packet network (an incast through one switch).
 */
#include "ns3/packet-network-stats.h"
#include "ns3/packet-network.h"
#include "ns3/simulator.h"
#include "ns3/star-topology-helper.h"
#include "ns3/test.h"

#include <array>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

/** What an incast run left behind. */
struct IncastOutcome
{
    uint64_t drops{0};
    uint64_t pauses{0};
    uint64_t retransmits{0};
    uint32_t finished{0};
    std::vector<uint64_t> delivered;
};

/**
 * Three hosts send 2 MiB each at line rate to a fourth through one 100 Gb/s switch with a
 * 1 MB buffer, without congestion control: 4 MiB must wait in the network.
 */
IncastOutcome
RunIncast(bool pfc)
{
    Simulator::Destroy();
    Ptr<TopologyDescription> topo = StarTopologyHelper(4, 100e9, 400e9, NanoSeconds(1000)).Create();
    Ptr<PacketNetwork> net = CreateObject<PacketNetwork>();
    net->SetComponentAttribute("Cc", "ns3::NoCongestionControl");
    net->SetComponentAttribute("PfcEnabled", pfc ? "true" : "false");
    net->SetComponentAttribute("BufferSize", "1000000");
    net->SetComponentAttribute("Mtu", "1000");
    NS_ABORT_MSG_UNLESS(net->Build(topo), "the network builds");
    const uint32_t n = 3;
    std::array<uint32_t, n> ids{0, 1, 2};
    std::array<uint32_t, n> src{0, 1, 2};
    std::array<uint32_t, n> dst{3, 3, 3};
    std::array<uint64_t, n> bytes{2 << 20, 2 << 20, 2 << 20};
    std::array<int64_t, n> start{0, 0, 0};
    std::array<uint8_t, n> priority{3, 3, 3};
    net->ScheduleFlows(
        n, ids.data(), src.data(), dst.data(), bytes.data(), start.data(), priority.data());
    net->SetStopAfterFlows(n);
    Simulator::Stop(MilliSeconds(200));
    Simulator::Run();

    IncastOutcome out;
    PacketNetworkStats stats(net);
    std::array<uint64_t, PacketNetworkStats::N_COUNTERS> counters{};
    stats.CopyCounters(counters.data());
    out.drops = counters[2];
    out.retransmits = counters[3];
    out.pauses = counters[4];
    out.finished = static_cast<uint32_t>(net->GetFinishedCount());
    std::array<uint64_t, n> retx{};
    std::array<uint64_t, n> cnps{};
    std::array<uint64_t, n> changes{};
    std::array<uint64_t, n> timeouts{};
    std::array<uint64_t, n> acked{};
    std::array<uint64_t, n> delivered{};
    stats.CopyFlowStats(n,
                        ids.data(),
                        retx.data(),
                        cnps.data(),
                        changes.data(),
                        timeouts.data(),
                        acked.data(),
                        delivered.data());
    out.delivered.assign(delivered.begin(), delivered.end());
    net->Dispose();
    Simulator::Destroy();
    return out;
}

} // namespace

/** \brief With PFC the incast is lossless: switches pause the senders instead of dropping. */
class PfcLosslessTestCase : public TestCase
{
  public:
    PfcLosslessTestCase()
        : TestCase("with PFC an incast pauses the senders and drops nothing")
    {
    }

  private:
    void
    DoRun() override
    {
        IncastOutcome out = RunIncast(true);
        NS_TEST_ASSERT_MSG_GT(out.pauses, 0, "the buffer filled: PFC paused the senders");
        NS_TEST_ASSERT_MSG_EQ(out.drops, 0, "lossless");
        NS_TEST_ASSERT_MSG_EQ(out.retransmits, 0, "nothing to retransmit");
        NS_TEST_ASSERT_MSG_EQ(out.finished, 3, "every flow finished");
        for (uint64_t d : out.delivered)
        {
            NS_TEST_ASSERT_MSG_EQ(d, 2u << 20, "every byte delivered once");
        }
    }
};

/** \brief Without PFC the same incast overflows the buffer; retransmissions still deliver. */
class PfcOffTestCase : public TestCase
{
  public:
    PfcOffTestCase()
        : TestCase("without PFC the incast drops and recovers by retransmission")
    {
    }

  private:
    void
    DoRun() override
    {
        IncastOutcome out = RunIncast(false);
        NS_TEST_ASSERT_MSG_EQ(out.pauses, 0, "no pause frames");
        NS_TEST_ASSERT_MSG_GT(out.drops, 0, "the 1 MB buffer overflowed");
        NS_TEST_ASSERT_MSG_GT(out.retransmits, 0, "dropped frames were sent again");
        NS_TEST_ASSERT_MSG_EQ(out.finished, 3, "every flow finished");
        for (uint64_t d : out.delivered)
        {
            NS_TEST_ASSERT_MSG_EQ(d, 2u << 20, "every byte delivered");
        }
    }
};

/** \brief PFC's TestSuite. */
class PfcTestSuite : public TestSuite
{
  public:
    PfcTestSuite()
        : TestSuite("heterosim-pfc", Type::SYSTEM)
    {
        AddTestCase(new PfcLosslessTestCase, Duration::QUICK);
        AddTestCase(new PfcOffTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static PfcTestSuite g_pfcTestSuite;
