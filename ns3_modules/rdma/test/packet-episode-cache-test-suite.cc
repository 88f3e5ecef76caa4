/*
 * HeteroSim: TestSuite for the episode cache of the packet network (memoization).
 */
#include "ns3/packet-episode-cache.h"
#include "ns3/packet-network-stats.h"
#include "ns3/packet-network.h"
#include "ns3/simulator.h"
#include "ns3/star-topology-helper.h"
#include "ns3/test.h"

#include <array>
#include <map>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

/** What a run of repeated episodes left behind. */
struct EpisodeOutcome
{
    std::map<uint32_t, int64_t> endNs; //!< flow id -> completion time
    std::array<uint64_t, PacketEpisodeCache::N_STATS> cache{};
    std::vector<uint64_t> delivered; //!< per flow
    uint64_t portBytes{0};           //!< wire bytes over every port
};

/** Flow completion times, recorded by the network's callback. */
std::map<uint32_t, int64_t> g_ends;

/** FlowNetwork callback: flow \p id finished at \p when. */
void
RecordEnd(uint32_t id, Time when)
{
    g_ends[id] = when.GetNanoSeconds();
}

/**
 * Four rounds 1 ms apart on a 6-host 100 Gb/s star; in each round one host sends 3 MiB and
 * 2 MiB to two others (its NIC port shared round robin). Odd rounds use other hosts (the same
 * episode relabelled). With \p extra, a flow 5 -> 2 starts 100 us into round 2 (on a link of
 * that round's episode).
 */
EpisodeOutcome
RunRounds(const std::string& mode, bool extra, bool fault = false)
{
    Simulator::Destroy();
    g_ends.clear();
    Ptr<TopologyDescription> topo = StarTopologyHelper(6, 100e9, 400e9, NanoSeconds(1000)).Create();
    Ptr<PacketNetwork> net = CreateObject<PacketNetwork>();
    net->SetComponentAttribute("Acceleration", mode);
    net->SetComponentAttribute("Mtu", "4096");
    NS_ABORT_MSG_UNLESS(net->Build(topo), "the network builds");
    net->SetFlowDoneCallback(MakeCallback(&RecordEnd));
    std::vector<uint32_t> ids;
    std::vector<uint32_t> src;
    std::vector<uint32_t> dst;
    std::vector<uint64_t> bytes;
    std::vector<int64_t> start;
    for (uint32_t k = 0; k < 4; ++k)
    {
        uint32_t s = k % 2 == 0 ? 0 : 3;
        for (uint32_t j = 0; j < 2; ++j)
        {
            ids.push_back(static_cast<uint32_t>(ids.size()));
            src.push_back(s);
            dst.push_back(s + 1 + j);
            bytes.push_back(j == 0 ? 3u << 20 : 2u << 20);
            start.push_back(k * 1000000);
        }
    }
    if (extra)
    {
        ids.push_back(static_cast<uint32_t>(ids.size()));
        src.push_back(5);
        dst.push_back(2);
        bytes.push_back(2u << 20);
        start.push_back(2100000);
    }
    std::vector<uint8_t> priority(ids.size(), 3);
    auto n = static_cast<uint32_t>(ids.size());
    net->ScheduleFlows(
        n, ids.data(), src.data(), dst.data(), bytes.data(), start.data(), priority.data());
    if (fault)
    {
        // round 2's sender link drops to half its rate 50 us into the round (its replay)
        uint32_t link = 0;
        for (uint32_t l : topo->GetPath(0, 1, 0))
        {
            if (topo->GetLinkKind(l) == TopologyDescription::ACCESS)
            {
                link = l; // the NIC's uplink
                break;
            }
        }
        Simulator::Schedule(MicroSeconds(2050), &PacketNetwork::SetLinkRate, net, link, 50e9);
    }
    Simulator::Stop(MilliSeconds(20));
    Simulator::Run();

    EpisodeOutcome out;
    out.endNs = g_ends;
    PacketNetworkStats stats(net);
    stats.CopyMemoStats(out.cache.data());
    out.delivered.resize(n);
    std::vector<uint64_t> a(n);
    std::vector<uint64_t> b(n);
    std::vector<uint64_t> c(n);
    std::vector<uint64_t> d(n);
    std::vector<uint64_t> e(n);
    stats.CopyFlowStats(
        n, ids.data(), a.data(), b.data(), c.data(), d.data(), e.data(), out.delivered.data());
    for (uint32_t p = 0; p < net->GetNPorts(); ++p)
    {
        out.portBytes += net->GetPortDevice(p)->GetTxBytes();
    }
    net->Dispose();
    Simulator::Destroy();
    return out;
}

} // namespace

/** \brief Repeated episodes are replayed, with the exact run's completion times. */
class EpisodeReplayTestCase : public TestCase
{
  public:
    EpisodeReplayTestCase()
        : TestCase("a repeated episode is replayed with the exact run's completion times")
    {
    }

  private:
    void
    DoRun() override
    {
        EpisodeOutcome exact = RunRounds("exact", false);
        EpisodeOutcome memo = RunRounds("memo", false);
        NS_TEST_ASSERT_MSG_EQ(memo.cache[0], 4, "four episodes started idle (lookups)");
        NS_TEST_ASSERT_MSG_EQ(memo.cache[1], 3, "three replayed (hits), relabelled ones too");
        NS_TEST_ASSERT_MSG_EQ(memo.cache[2], 1, "one recorded");
        NS_TEST_ASSERT_MSG_EQ(exact.cache[0], 0, "no cache in exact mode");
        NS_TEST_ASSERT_MSG_EQ(memo.endNs.size(), 8, "every flow finished");
        for (const auto& [id, end] : exact.endNs)
        {
            // the episode repeats exactly in the exact run, up to one ns of rounding
            NS_TEST_ASSERT_MSG_EQ_TOL(memo.endNs[id], end, 2, "completion time of every flow");
        }
        for (uint32_t i = 0; i < 8; ++i)
        {
            uint64_t size = i % 2 == 0 ? (3u << 20) : (2u << 20);
            NS_TEST_ASSERT_MSG_EQ(memo.delivered[i], size, "delivered");
        }
        NS_TEST_ASSERT_MSG_EQ_TOL(static_cast<double>(memo.portBytes),
                                  static_cast<double>(exact.portBytes),
                                  1e-3 * static_cast<double>(exact.portBytes),
                                  "the ports carried the exact run's wire bytes");
    }
};

/** \brief A replay interrupted by another flow is materialised and finishes packet by packet. */
class EpisodeInterruptTestCase : public TestCase
{
  public:
    EpisodeInterruptTestCase()
        : TestCase("an interrupted replay continues packet by packet and delivers every byte")
    {
    }

  private:
    void
    DoRun() override
    {
        EpisodeOutcome exact = RunRounds("exact", true);
        EpisodeOutcome memo = RunRounds("memo", true);
        NS_TEST_ASSERT_MSG_EQ(memo.cache[6], 1, "one replay materialised (interrupted)");
        NS_TEST_ASSERT_MSG_EQ(memo.endNs.size(), 9, "every flow finished");
        for (uint32_t i = 0; i < 9; ++i)
        {
            NS_TEST_ASSERT_MSG_EQ(memo.delivered[i], exact.delivered[i], "delivered once");
        }
        for (const auto& [id, end] : exact.endNs)
        {
            int64_t begin = id == 8 ? 2100000 : static_cast<int64_t>(id / 2) * 1000000;
            double fct = static_cast<double>(end - begin);
            NS_TEST_ASSERT_MSG_EQ_TOL(static_cast<double>(memo.endNs[id] - begin),
                                      fct,
                                      0.05 * fct,
                                      "completion time within 5 %");
        }
    }
};

/** \brief A fault materialises the replay it hits and ends memoization. */
class EpisodeFaultTestCase : public TestCase
{
  public:
    EpisodeFaultTestCase()
        : TestCase("a fault materialises a replay and no episode is memoized after it")
    {
    }

  private:
    void
    DoRun() override
    {
        EpisodeOutcome memo = RunRounds("memo", false, true);
        NS_TEST_ASSERT_MSG_EQ(memo.cache[0], 3, "rounds 0-2 looked up, not round 3");
        NS_TEST_ASSERT_MSG_EQ(memo.cache[1], 2, "rounds 1 and 2 replayed");
        NS_TEST_ASSERT_MSG_EQ(memo.cache[6], 1, "round 2's replay materialised by the fault");
        NS_TEST_ASSERT_MSG_EQ(memo.cache[5], 1, "round 3 not eligible after the fault");
        NS_TEST_ASSERT_MSG_EQ(memo.endNs.size(), 8, "every flow finished");
        for (uint32_t i = 0; i < 8; ++i)
        {
            uint64_t size = i % 2 == 0 ? (3u << 20) : (2u << 20);
            NS_TEST_ASSERT_MSG_EQ(memo.delivered[i], size, "delivered once");
        }
        // at half rate round 2's 3 MiB flow takes longer than the replayed 431 us
        NS_TEST_ASSERT_MSG_GT(memo.endNs[4] - 2000000, 500000, "the slower link is simulated");
    }
};

/** \brief The episode cache's TestSuite. */
class PacketEpisodeCacheTestSuite : public TestSuite
{
  public:
    PacketEpisodeCacheTestSuite()
        : TestSuite("heterosim-episode-cache", Type::SYSTEM)
    {
        AddTestCase(new EpisodeReplayTestCase, Duration::QUICK);
        AddTestCase(new EpisodeInterruptTestCase, Duration::QUICK);
        AddTestCase(new EpisodeFaultTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static PacketEpisodeCacheTestSuite g_packetEpisodeCacheTestSuite;
