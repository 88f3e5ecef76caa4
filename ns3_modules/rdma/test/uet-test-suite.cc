/*
 * HeteroSim: TestSuite for the Ultra Ethernet transport (RdmaNic Transport=uet), packet
 * trimming, and its congestion controls NSCC (ns3::Nscc) and RCCC (ns3::Rccc).
 */
#include "flow-runner-test-helper.h"

#include "ns3/nscc.h"
#include "ns3/packet-network-stats.h"
#include "ns3/packet-network.h"
#include "ns3/simulator.h"
#include "ns3/star-topology-helper.h"
#include "ns3/test.h"
#include "ns3/two-tier-topology-helper.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

using namespace ns3;

namespace
{

using rdmatest::Ids;
using UetFlows = rdmatest::Flows;
using UetOutcome = rdmatest::Outcome;

/** A lossy (PFC off) network on \p topo with a 1000-byte MTU and \p attrs. */
Ptr<PacketNetwork>
BuildUetNetwork(Ptr<TopologyDescription> topo, const std::map<std::string, std::string>& attrs)
{
    return rdmatest::BuildNetwork(topo, {{"Mtu", "1000"}, {"PfcEnabled", "false"}}, attrs);
}

/** \return bytes acknowledged per flow so far */
std::vector<uint64_t>
Acked(Ptr<PacketNetwork> net, uint32_t n)
{
    std::vector<uint32_t> ids = Ids(n);
    std::vector<uint64_t> retx(n), cnps(n), changes(n), timeouts(n), acked(n), delivered(n);
    PacketNetworkStats(net).CopyFlowStats(n,
                                          ids.data(),
                                          retx.data(),
                                          cnps.data(),
                                          changes.data(),
                                          timeouts.data(),
                                          acked.data(),
                                          delivered.data());
    return acked;
}

/** Schedule \p flows on \p net and run until they finish (or 100 ms). */
UetOutcome
RunUetFlows(Ptr<PacketNetwork> net, const UetFlows& flows)
{
    return rdmatest::RunFlows(net, flows);
}

/** Jain's fairness index of \p x. */
double
Jain(const std::vector<double>& x)
{
    double sum = 0;
    double squares = 0;
    for (double v : x)
    {
        sum += v;
        squares += v * v;
    }
    return squares > 0 ? sum * sum / (static_cast<double>(x.size()) * squares) : 0;
}

} // namespace

/**
 * \brief ECMP switches spray a UET flow by its per-packet entropy: two cross-leaf flows over
 * four spines use every uplink of their leaf (RoCE's flow hash pins each to one), arrive out
 * of order, and every byte is delivered in order; the same seed gives the same run.
 */
class UetSprayTestCase : public TestCase
{
  public:
    UetSprayTestCase()
        : TestCase("uet: entropy sprays a flow over ECMP paths; every byte is delivered")
    {
    }

  private:
    /** \return the outcome and the frames on the four uplinks of leaf 0 */
    std::pair<UetOutcome, std::vector<uint64_t>>
    Run(const std::string& transport)
    {
        Simulator::Destroy();
        TwoTierTopologyHelper topo(2, 4, 100e9, 400e9, MicroSeconds(1));
        Ptr<PacketNetwork> net =
            BuildUetNetwork(topo.Create(),
                            {{"RdmaNic::Transport", transport},
                             {"Cc", transport == "uet" ? "ns3::Nscc" : "ns3::Dcqcn"}});
        UetOutcome out = RunUetFlows(net, UetFlows{{0, 1}, {2, 3}, {1000000, 1000000}, {0, 0}});
        std::vector<uint64_t> frames;
        for (uint32_t s = 0; s < 4; ++s)
        {
            frames.push_back(net->GetPortDevice(2 * topo.GetUplink(0, s))->GetTxFrames());
        }
        net->Dispose();
        Simulator::Destroy();
        return {out, frames};
    }

    void
    DoRun() override
    {
        auto [out, frames] = Run("uet");
        NS_TEST_ASSERT_MSG_EQ(out.finished, 2, "both flows finished");
        for (uint32_t i = 0; i < 2; ++i)
        {
            NS_TEST_ASSERT_MSG_EQ(out.delivered[i], 1000000, "every byte delivered in order");
            NS_TEST_ASSERT_MSG_GT(out.outOfOrder[i], 0, "sprayed packets arrive out of order");
        }
        // 2000 data packets over 4 uplinks: each carries a share, none idle
        uint64_t total = std::accumulate(frames.begin(), frames.end(), uint64_t{0});
        NS_TEST_ASSERT_MSG_GT_OR_EQ(total, 2000, "every data packet crossed a spine");
        NS_TEST_ASSERT_MSG_GT(*std::min_element(frames.begin(), frames.end()),
                              total / 8,
                              "every uplink carries a share of the packets");
        auto [again, framesAgain] = Run("uet");
        NS_TEST_ASSERT_MSG_EQ(again.end[0], out.end[0], "reproducible");
        NS_TEST_ASSERT_MSG_EQ(framesAgain[3], frames[3], "reproducible");
        auto [roce, roceFrames] = Run("roce");
        uint64_t idle = std::count(roceFrames.begin(), roceFrames.end(), uint64_t{0});
        NS_TEST_ASSERT_MSG_GT_OR_EQ(idle, 2, "RoCE's flow hash keeps each flow on one uplink");
        NS_TEST_ASSERT_MSG_EQ(roce.outOfOrder[0] + roce.outOfOrder[1], 0, "RoCE: in order");
    }
};

/**
 * \brief One data packet dropped on a lossy fabric: UET resends that packet alone and
 * delivers every byte.
 */
class UetSingleLossTestCase : public TestCase
{
  public:
    UetSingleLossTestCase()
        : TestCase("uet: a single loss is recovered by resending one packet")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        Ptr<TopologyDescription> desc =
            StarTopologyHelper(2, 100e9, 400e9, MicroSeconds(1)).Create();
        Ptr<PacketNetwork> net =
            BuildUetNetwork(desc, {{"RdmaNic::Transport", "uet"}, {"Cc", "ns3::Nscc"}});
        // the receiving NIC (node 3) ends link 3 as its A end: port 6; frames of 1082 bytes
        // arrive every 86.6 ns at 100 Gb/s, so an 86 ns loss window takes one
        Ptr<QbbNetDevice> rx = net->GetPortDevice(6);
        Simulator::Schedule(MicroSeconds(40), [rx]() { rx->SetLossProbability(1.0, 7); });
        Simulator::Schedule(MicroSeconds(40) + NanoSeconds(86),
                            [rx]() { rx->SetLossProbability(0.0, 7); });
        UetOutcome out = RunUetFlows(net, UetFlows{{0}, {1}, {2000000}, {0}});
        NS_TEST_ASSERT_MSG_EQ(rx->GetFaultDrops(), 1, "one packet lost");
        NS_TEST_ASSERT_MSG_EQ(out.finished, 1, "the flow finished");
        NS_TEST_ASSERT_MSG_EQ(out.delivered[0], 2000000, "every byte delivered");
        NS_TEST_ASSERT_MSG_EQ(out.retransmits[0], 1, "the lost packet alone is resent");
        net->Dispose();
        Simulator::Destroy();
    }
};

/**
 * \brief Packet trimming (RdmaSwitch Trimming, RdmaNic UetTrimming): a 4-to-1 incast starting
 * at once into a 100 KB switch buffer overflows it (four initial windows of 1.5 BDP). Without
 * trimming the switch drops packets; with it the same overflow drops nothing: every packet the
 * buffer cannot take is trimmed, NACKed and resent once (resends = trims = NACKs of trimmed
 * packets), no timeout fires, every byte is delivered, and the flows finish sooner. The trims
 * are counted at the egress port toward the receiver as well (the ports' trims add up to the
 * switch's).
 */
class UetTrimmingIncastTestCase : public TestCase
{
  public:
    UetTrimmingIncastTestCase()
        : TestCase("uet: trimming turns incast drops into trims, each resent once, no timeout")
    {
    }

  private:
    /** What one run of the incast gives. */
    struct Result
    {
        UetOutcome out;        //!< per-flow counters
        uint64_t drops{0};     //!< switch drops
        uint64_t trims{0};     //!< switch trims
        uint64_t portTrims{0}; //!< trims of all ports together
        uint64_t maxPort{0};   //!< trims of the port that trimmed most
        uint64_t timeouts{0};  //!< retransmission timeouts
        uint64_t trimNacks{0}; //!< NACKs of trimmed packets received by the senders
        int64_t lastEnd{0};    //!< last flow completion, ns
    };

    Result
    Run(bool trimming)
    {
        Simulator::Destroy();
        StarTopologyHelper star(5, 100e9, 400e9, MicroSeconds(1));
        Ptr<TopologyDescription> desc = star.Create();
        std::string on = trimming ? "true" : "false";
        Ptr<PacketNetwork> net = BuildUetNetwork(desc,
                                                 {{"RdmaNic::Transport", "uet"},
                                                  {"Cc", "ns3::Nscc"},
                                                  {"BufferSize", "100000"},
                                                  {"RdmaSwitch::Trimming", on},
                                                  {"RdmaNic::UetTrimming", on}});
        Result r;
        r.out = RunUetFlows(
            net,
            UetFlows{
                {0, 1, 2, 3}, {4, 4, 4, 4}, {2000000, 2000000, 2000000, 2000000}, {0, 0, 0, 0}});
        std::vector<uint64_t> trims(desc->GetNNodes());
        PacketNetworkStats stats(net);
        stats.CopySwitchTrims(trims.data());
        r.trims = std::accumulate(trims.begin(), trims.end(), uint64_t{0});
        uint32_t nPorts = net->GetNPorts();
        std::vector<int32_t> node(nPorts);
        std::vector<int32_t> link(nPorts);
        std::vector<uint8_t> direction(nPorts);
        std::vector<double> meanQueue(nPorts);
        std::vector<int64_t> pausedNs(nPorts);
        std::vector<uint64_t> bytes(nPorts);
        std::vector<uint64_t> maxQueue(nPorts);
        std::vector<uint64_t> pauseSent(nPorts);
        std::vector<uint64_t> pauseReceived(nPorts);
        std::vector<uint64_t> marks(nPorts);
        std::vector<uint64_t> portDrops(nPorts);
        std::vector<uint64_t> frames(nPorts);
        std::vector<uint64_t> portTrims(nPorts);
        stats.CopyPortStats(node.data(),
                            link.data(),
                            direction.data(),
                            bytes.data(),
                            maxQueue.data(),
                            meanQueue.data(),
                            pauseSent.data(),
                            pauseReceived.data(),
                            pausedNs.data(),
                            marks.data(),
                            portDrops.data(),
                            frames.data(),
                            portTrims.data());
        r.portTrims = std::accumulate(portTrims.begin(), portTrims.end(), uint64_t{0});
        r.maxPort = *std::max_element(portTrims.begin(), portTrims.end());
        std::array<uint64_t, PacketNetworkStats::N_COUNTERS> counters{};
        stats.CopyCounters(counters.data());
        r.drops = counters[2];
        r.timeouts = counters[8];
        for (uint32_t slot = 0; slot < net->GetNQueuePairs(); ++slot)
        {
            r.trimNacks += net->GetQueuePair(slot)->trimNacks;
        }
        r.lastEnd = *std::max_element(r.out.end.begin(), r.out.end.end());
        net->Dispose();
        Simulator::Destroy();
        return r;
    }

    void
    DoRun() override
    {
        Result dropping = Run(false);
        Result trimming = Run(true);
        for (const Result* r : {&dropping, &trimming})
        {
            NS_TEST_ASSERT_MSG_EQ(r->out.finished, 4, "every flow finished");
            for (uint32_t i = 0; i < 4; ++i)
            {
                NS_TEST_ASSERT_MSG_EQ(r->out.delivered[i], 2000000, "every byte delivered");
            }
        }
        NS_TEST_ASSERT_MSG_GT(dropping.drops, 0, "without trimming the overflow drops packets");
        NS_TEST_ASSERT_MSG_EQ(dropping.trims, 0, "no trims without trimming");
        NS_TEST_ASSERT_MSG_EQ(trimming.drops, 0, "with trimming nothing is dropped");
        NS_TEST_ASSERT_MSG_GT(trimming.trims, 0, "the overflow is trimmed");
        NS_TEST_ASSERT_MSG_EQ(dropping.portTrims, 0, "no port trims without trimming");
        NS_TEST_ASSERT_MSG_EQ(
            trimming.portTrims, trimming.trims, "the ports' trims are the switch's");
        NS_TEST_ASSERT_MSG_EQ(
            trimming.maxPort, trimming.trims, "all at the port toward the receiver");
        uint64_t retx = std::accumulate(
            trimming.out.retransmits.begin(), trimming.out.retransmits.end(), uint64_t{0});
        NS_TEST_ASSERT_MSG_EQ(trimming.trimNacks, trimming.trims, "every trim is NACKed");
        NS_TEST_ASSERT_MSG_EQ(retx, trimming.trims, "every trimmed packet is resent exactly once");
        NS_TEST_ASSERT_MSG_EQ(trimming.timeouts, 0, "no retransmission timeout");
        NS_TEST_ASSERT_MSG_LT(trimming.lastEnd, dropping.lastEnd, "trimming recovers sooner");
    }
};

/**
 * \brief NSCC on a lossy fabric (PFC off): four senders to one receiver, starting 100 us
 * apart, converge to a fair share of the receiver's 100 Gb/s link. Over a steady window after
 * the last start, Jain's index of the acknowledged bytes is at least 0.95 and the link stays
 * busy; the windows were cut (the algorithm acted) and no packet was lost.
 */
class NsccIncastFairnessTestCase : public TestCase
{
  public:
    NsccIncastFairnessTestCase()
        : TestCase("nscc: a 4-to-1 incast without PFC converges to a fair share")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        StarTopologyHelper star(5, 100e9, 400e9, MicroSeconds(1));
        // ECN marking as NSCC expects it: the UEC reference simulator marks between 20% and 80%
        // of a queue (htsim main_uec.cpp: ecn_low = 0.2 queuesize, ecn_high = 0.8 queuesize),
        // here of one reference BDP (100 Gb/s x 12 us = 150 KB), with probability rising to 1
        Ptr<PacketNetwork> net = BuildUetNetwork(star.Create(),
                                                 {{"RdmaNic::Transport", "uet"},
                                                  {"Cc", "ns3::Nscc"},
                                                  {"EcnKmin", "30000"},
                                                  {"EcnKmax", "120000"},
                                                  {"EcnPmax", "1"},
                                                  {"EcnScaleWithRate", "false"}});
        const uint32_t n = 4;
        // steady window: from 300 us after the last start; 10 MB each lasts past its end
        std::vector<uint64_t> at1;
        std::vector<uint64_t> at2;
        Simulator::Schedule(MicroSeconds(600), [&]() { at1 = Acked(net, n); });
        Simulator::Schedule(MicroSeconds(2100), [&]() { at2 = Acked(net, n); });
        UetOutcome out = RunUetFlows(net,
                                     UetFlows{{0, 1, 2, 3},
                                              {4, 4, 4, 4},
                                              {10000000, 10000000, 10000000, 10000000},
                                              {0, 100000, 200000, 300000}});
        NS_TEST_ASSERT_MSG_EQ(out.finished, n, "every flow finished");
        NS_TEST_ASSERT_MSG_EQ(at2.size(), n, "sampled");
        std::vector<double> share;
        double total = 0;
        for (uint32_t i = 0; i < n; ++i)
        {
            NS_TEST_ASSERT_MSG_EQ(out.delivered[i], 10000000, "every byte delivered");
            NS_TEST_ASSERT_MSG_LT(at2[i], 10000000, "still running at the window's end");
            share.push_back(static_cast<double>(at2[i] - at1[i]));
            total += share.back();
        }
        double jain = Jain(share);
        NS_TEST_ASSERT_MSG_GT_OR_EQ(jain, 0.95, "fair share (Jain's index)");
        // 1500 us of a 100 Gb/s link carries 18.75 MB of frames, 17.3 MB of 1000-byte payloads
        NS_TEST_ASSERT_MSG_GT(total, 0.9 * 17.3e6, "the bottleneck stays busy");
        uint64_t decreases = 0;
        for (uint32_t i = 0; i < n; ++i)
        {
            decreases += DynamicCast<Nscc>(net->GetFlowCc(i))->GetDecreases() +
                         DynamicCast<Nscc>(net->GetFlowCc(i))->GetQuickAdapts();
        }
        NS_TEST_ASSERT_MSG_GT(decreases, 0, "NSCC cut the windows");
        uint64_t retx = std::accumulate(out.retransmits.begin(), out.retransmits.end(), 0ULL);
        NS_TEST_ASSERT_MSG_EQ(retx, 0, "no loss: NSCC keeps the queue within the buffer");
        net->Dispose();
        Simulator::Destroy();
    }
};

/**
 * \brief RCCC (network.cc: rccc): four senders start at once towards one receiver behind a
 * 100 Gb/s link, PFC off. The receiver's credit splits its downlink equally: over a steady
 * window after the initial credit has drained, Jain's index of the acknowledged bytes is at
 * least 0.95 and the link stays busy, while the queue in front of the receiver stays within a
 * few packets (every sample at most 4 frames; NSCC, reacting to a delay target, holds several
 * tens of KB there); nothing is lost or resent, and credit was granted.
 */
class RcccIncastTestCase : public TestCase
{
  public:
    RcccIncastTestCase()
        : TestCase("rccc: receiver credit shares a 4-to-1 incast fairly with a near-empty queue")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        StarTopologyHelper star(5, 100e9, 400e9, MicroSeconds(1));
        Ptr<PacketNetwork> net =
            BuildUetNetwork(star.Create(), {{"RdmaNic::Transport", "uet"}, {"Cc", "ns3::Rccc"}});
        const uint32_t n = 4;
        // the switch's port towards the receiver: host 4's NIC is the A end of its access link
        // 9, the switch its B end (port 2 x 9 + 1)
        Ptr<QbbNetDevice> down = net->GetPortDevice(19);
        std::vector<uint64_t> at1;
        std::vector<uint64_t> at2;
        std::vector<uint64_t> queue;
        Simulator::Schedule(MicroSeconds(100), [&]() { at1 = Acked(net, n); });
        Simulator::Schedule(MicroSeconds(500), [&]() { at2 = Acked(net, n); });
        for (int t = 100; t < 500; t += 5)
        {
            Simulator::Schedule(MicroSeconds(t),
                                [&]() { queue.push_back(down->GetTotalQueueBytes()); });
        }
        UetOutcome out = RunUetFlows(
            net,
            UetFlows{
                {0, 1, 2, 3}, {4, 4, 4, 4}, {2000000, 2000000, 2000000, 2000000}, {0, 0, 0, 0}});
        NS_TEST_ASSERT_MSG_EQ(out.finished, n, "every flow finished");
        NS_TEST_ASSERT_MSG_EQ(at2.size(), n, "sampled");
        std::vector<double> share;
        double total = 0;
        for (uint32_t i = 0; i < n; ++i)
        {
            NS_TEST_ASSERT_MSG_EQ(out.delivered[i], 2000000, "every byte delivered");
            NS_TEST_ASSERT_MSG_EQ(out.retransmits[i], 0, "nothing lost");
            NS_TEST_ASSERT_MSG_LT(at2[i], 2000000, "still running at the window's end");
            share.push_back(static_cast<double>(at2[i] - at1[i]));
            total += share.back();
        }
        NS_TEST_ASSERT_MSG_GT_OR_EQ(Jain(share), 0.95, "fair share (Jain's index)");
        // 400 us of a 100 Gb/s link carry 5 MB of frames, 4.62 MB of 1000-byte payloads
        NS_TEST_ASSERT_MSG_GT(total, 0.9 * 4.62e6, "the downlink stays busy");
        uint64_t deepest = *std::max_element(queue.begin(), queue.end());
        NS_TEST_ASSERT_MSG_LT_OR_EQ(deepest, 4 * 1082, "near-empty queue at the last hop");
        net->Dispose();
        Simulator::Destroy();
    }
};

/**
 * \brief RCCC survives a lost REQUEST: the link into the switch drops everything the sender
 * sends in the first 20 us (its REQUEST and its initial credit's data); the timeout resends the
 * lost packets, the next one finds the sender without credit and asks again, and the flow
 * completes (without the second request it would wait for credit forever).
 */
class RcccLostRequestTestCase : public TestCase
{
  public:
    RcccLostRequestTestCase()
        : TestCase("rccc: a lost credit request is sent again and the flow completes")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        StarTopologyHelper star(2, 100e9, 400e9, MicroSeconds(1));
        Ptr<PacketNetwork> net =
            BuildUetNetwork(star.Create(), {{"RdmaNic::Transport", "uet"}, {"Cc", "ns3::Rccc"}});
        // host 0's access link is link 1, its NIC the A end: the switch's port is 2 x 1 + 1
        Ptr<QbbNetDevice> in = net->GetPortDevice(3);
        in->SetLossProbability(1.0, 7);
        Simulator::Schedule(MicroSeconds(20), [in]() { in->SetLossProbability(0.0, 7); });
        UetOutcome out = RunUetFlows(net, UetFlows{{0}, {1}, {1000000}, {0}});
        NS_TEST_ASSERT_MSG_GT(in->GetFaultDrops(), 1, "the request and some data were lost");
        NS_TEST_ASSERT_MSG_EQ(out.finished, 1, "the flow finished");
        NS_TEST_ASSERT_MSG_EQ(out.delivered[0], 1000000, "every byte delivered");
        net->Dispose();
        Simulator::Destroy();
    }
};

/**
 * \brief NSCC's control law against its formulas, fed acknowledgements directly (at time 0, so
 * neither the eta probe nor quick adapt falls due): the window starts at 1.5 BDP; ECN with a
 * short delay leaves it; a window of acknowledged bytes without ECN above the target adds
 * FairIncrease x a MTUs; ECN above the target multiplies it by 1 - Gamma (d - T) / d with d the
 * smoothed delay (10 us here: above the MaxDecrease floor of 0.5) once per base RTT; a loss
 * takes its bytes off.
 */
class NsccControlLawTestCase : public TestCase
{
  public:
    NsccControlLawTestCase()
        : TestCase("nscc: the window follows the quadrant rules")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        Ptr<Nscc> cc = CreateObject<Nscc>();
        const double rate = 100e9;
        const int64_t baseRtt = 12000; // the reference network: scale factor a = 1
        const uint32_t mtu = 1000;
        cc->Start(rate, NanoSeconds(baseRtt), mtu);
        double bdp = rate / 8 * baseRtt * 1e-9; // 150 KB
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetCwnd(), 1.5 * bdp, 1e-6, "starts at 1.5 BDP");
        NS_TEST_ASSERT_MSG_EQ(cc->GetWindow(), static_cast<uint64_t>(1.5 * bdp), "published");
        auto ack = [&](uint64_t bytes, bool ecn, int64_t delayNs) {
            cc->ReceiveAck(RdmaAckInfo{0, 0, bytes, ecn, baseRtt + delayNs, nullptr, 0});
        };
        ack(mtu, true, 1000); // ECN, 1 us of queueing: below the 6 us target
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetCwnd(), 1.5 * bdp, 1e-6, "ECN alone: no change");
        cc->ReceiveLoss(100000);
        double w0 = 1.5 * bdp - 100000;
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetCwnd(), w0, 1e-6, "a loss takes its bytes off");
        // fair increase: W += 5 MTU x acked / W per ack; one window of acks adds about 5 MTU
        double w = w0;
        for (int i = 0; i < 125; ++i) // 125 KB: one window
        {
            ack(mtu, false, 8000);
            w += 5.0 * mtu * mtu / w;
        }
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetCwnd(), w, 1e-6, "fair increase, 5 MTU per window");
        NS_TEST_ASSERT_MSG_GT(cc->GetCwnd() - w0, 4.8 * mtu, "about 5 MTU for a window acked");
        // raise the smoothed delay to about 10 us without moving the window (no bytes acked)
        for (int i = 0; i < 600; ++i)
        {
            ack(0, false, 10000);
        }
        double before = cc->GetCwnd();
        ack(0, true, 10000);
        double d = cc->GetAvgDelayNs();
        NS_TEST_ASSERT_MSG_GT(d, 9500.0, "smoothed delay near 10 us");
        NS_TEST_ASSERT_MSG_EQ_TOL(
            cc->GetCwnd(), before * (1 - 0.8 * (d - 6000) / d), 1e-6, "multiplicative decrease");
        NS_TEST_ASSERT_MSG_EQ(cc->GetDecreases(), 1, "one decrease");
        before = cc->GetCwnd();
        ack(0, true, 10000);
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetCwnd(), before, 1e-6, "at most one decrease per RTT");
        Simulator::Destroy();
    }
};

/** \brief UET transport and NSCC TestSuite. */
class UetTestSuite : public TestSuite
{
  public:
    UetTestSuite()
        : TestSuite("heterosim-uet", Type::SYSTEM)
    {
        AddTestCase(new UetSprayTestCase, Duration::QUICK);
        AddTestCase(new UetSingleLossTestCase, Duration::QUICK);
        AddTestCase(new UetTrimmingIncastTestCase, Duration::QUICK);
        AddTestCase(new NsccControlLawTestCase, Duration::QUICK);
        AddTestCase(new NsccIncastFairnessTestCase, Duration::QUICK);
        AddTestCase(new RcccIncastTestCase, Duration::QUICK);
        AddTestCase(new RcccLostRequestTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static UetTestSuite g_uetTestSuite;
