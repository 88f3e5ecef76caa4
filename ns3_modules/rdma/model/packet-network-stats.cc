/*
 * HeteroSim: bulk export of a packet network's counters, port table and sampled series.
 */
#include "packet-network-stats.h"

#include "ns3/log.h"
#include "ns3/node.h"
#include "ns3/rdma-switch.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PacketNetworkStats");

PacketNetworkStats::PacketNetworkStats(Ptr<PacketNetwork> network)
    : m_net(network)
{
    NS_LOG_FUNCTION(this);
}

void
PacketNetworkStats::CopyPortStats(int32_t* node,
                                  int32_t* link,
                                  uint8_t* direction,
                                  uint64_t* bytesSent,
                                  uint64_t* maxQueue,
                                  double* meanQueue,
                                  uint64_t* pauseSent,
                                  uint64_t* pauseReceived,
                                  int64_t* pausedNs,
                                  uint64_t* ecnMarks,
                                  uint64_t* drops,
                                  uint64_t* framesSent,
                                  uint64_t* trims) const
{
    uint32_t nPorts = m_net->GetNPorts();
    Ptr<TopologyDescription> desc = m_net->GetTopology();
    std::vector<uint64_t> fluidBytes;
    if (Ptr<FluidNetwork> fluid = m_net->GetHostFluid())
    {
        fluidBytes.assign(nPorts, 0);
        std::vector<int64_t> busy(nPorts, 0);
        fluid->CopyLinkStats(fluidBytes.data(), busy.data());
    }
    for (uint32_t gp = 0; gp < nPorts; ++gp)
    {
        const QbbNetDevice* dev = PeekPointer(m_net->GetPortDevice(gp));
        uint32_t l = gp / 2;
        direction[gp] = static_cast<uint8_t>(gp % 2);
        link[gp] = static_cast<int32_t>(l);
        node[gp] = static_cast<int32_t>(gp % 2 == 0 ? desc->GetLinkA(l) : desc->GetLinkB(l));
        bytesSent[gp] = dev->GetTxBytes() + (fluidBytes.empty() ? 0 : fluidBytes[gp]);
        maxQueue[gp] = dev->GetMaxQueueBytes();
        meanQueue[gp] = dev->GetMeanQueueBytes();
        pauseSent[gp] = dev->GetPauseSent();
        pauseReceived[gp] = dev->GetPauseReceived();
        pausedNs[gp] = dev->GetPausedNs();
        ecnMarks[gp] = dev->GetEcnMarks();
        drops[gp] = dev->GetDrops();
        framesSent[gp] = dev->GetTxFrames();
        trims[gp] = dev->GetTrims();
    }
}

void
PacketNetworkStats::CopyFlowStats(uint32_t n,
                                  const uint32_t* ids,
                                  uint64_t* retransmits,
                                  uint64_t* cnps,
                                  uint64_t* rateChanges,
                                  uint64_t* timeouts,
                                  uint64_t* bytesAcked,
                                  uint64_t* bytesDelivered) const
{
    Ptr<SocketTransport> socket = m_net->GetSocketTransport();
    for (uint32_t i = 0; i < n; ++i)
    {
        const RdmaQueuePair* qp = m_net->FindQueuePair(ids[i]);
        if (qp == nullptr)
        {
            retransmits[i] = cnps[i] = rateChanges[i] = timeouts[i] = bytesAcked[i] =
                bytesDelivered[i] = 0;
            if (socket && socket->HasFlow(ids[i]))
            {
                socket->GetFlowStats(ids[i], &retransmits[i], &timeouts[i], &bytesDelivered[i]);
                bytesAcked[i] = bytesDelivered[i];
            }
            continue;
        }
        bool first = qp->flowId == ids[i];
        retransmits[i] = first ? qp->retransmits : 0;
        cnps[i] = first ? qp->cnps : 0;
        rateChanges[i] = first ? qp->cc->GetRateChanges() : 0;
        timeouts[i] = first ? qp->timeouts : 0;
        m_net->GetMessageProgress(ids[i], &bytesAcked[i], &bytesDelivered[i]);
    }
}

void
PacketNetworkStats::CopyReorderStats(uint32_t n,
                                     const uint32_t* ids,
                                     uint64_t* outOfOrder,
                                     uint64_t* maxDepth) const
{
    for (uint32_t i = 0; i < n; ++i)
    {
        const RdmaQueuePair* qp = m_net->FindQueuePair(ids[i]);
        bool first = qp != nullptr && qp->flowId == ids[i];
        outOfOrder[i] = first ? qp->oooPackets : 0;
        maxDepth[i] = first ? qp->maxReorderDepth : 0;
    }
}

void
PacketNetworkStats::CopyCounters(uint64_t* out) const
{
    uint64_t drops = 0;
    uint64_t pauses = 0;
    uint64_t marks = 0;
    uint64_t frames = 0;
    for (uint32_t gp = 0; gp < m_net->GetNPorts(); ++gp)
    {
        const QbbNetDevice* dev = PeekPointer(m_net->GetPortDevice(gp));
        drops += dev->GetDrops();
        pauses += dev->GetPauseSent();
        marks += dev->GetEcnMarks();
        frames += dev->GetTxFrames();
    }
    uint64_t retx = 0;
    uint64_t cnps = 0;
    uint64_t timeouts = 0;
    for (uint32_t slot = 0; slot < m_net->GetNQueuePairs(); ++slot)
    {
        const RdmaQueuePair* qp = m_net->GetQueuePair(slot);
        retx += qp->retransmits;
        cnps += qp->cnps;
        timeouts += qp->timeouts;
    }
    if (Ptr<SocketTransport> socket = m_net->GetSocketTransport())
    {
        drops += socket->GetHostDrops();
        retx += socket->GetRetransmits();
        timeouts += socket->GetTimeouts();
    }
    out[0] = m_net->GetFlowsStarted();
    out[1] = m_net->GetBytesStarted();
    out[2] = drops;
    out[3] = retx;
    out[4] = pauses;
    out[5] = marks;
    out[6] = cnps;
    out[7] = frames;
    out[8] = timeouts;
}

bool
PacketNetworkStats::CopySwitchTrims(uint64_t* trims) const
{
    bool any = false;
    Ptr<TopologyDescription> desc = m_net->GetTopology();
    std::fill(trims, trims + desc->GetNNodes(), 0);
    for (uint32_t gp = 0; gp < m_net->GetNPorts(); ++gp)
    {
        Ptr<RdmaSwitch> sw = m_net->GetPortDevice(gp)->GetNode()->GetObject<RdmaSwitch>();
        if (sw)
        {
            uint32_t l = gp / 2;
            uint32_t node = gp % 2 == 0 ? desc->GetLinkA(l) : desc->GetLinkB(l);
            trims[node] = sw->GetTrims();
            any = any || sw->IsTrimming();
        }
    }
    return any;
}

void
PacketNetworkStats::CopyQueuePairIds(uint32_t* out) const
{
    for (uint32_t slot = 0; slot < m_net->GetNQueuePairs(); ++slot)
    {
        out[slot] = m_net->GetQueuePair(slot)->flowId;
    }
}

uint64_t
PacketNetworkStats::GetNQueueSamples() const
{
    return m_net->GetSampler().GetQueueSeries().timeNs.size();
}

void
PacketNetworkStats::CopyQueueSeries(int64_t* timeNs,
                                    uint32_t* port,
                                    uint64_t* bytes,
                                    uint64_t* txBytes) const
{
    const PacketNetworkSampler::QueueSeries& q = m_net->GetSampler().GetQueueSeries();
    std::copy(q.timeNs.begin(), q.timeNs.end(), timeNs);
    std::copy(q.port.begin(), q.port.end(), port);
    std::copy(q.bytes.begin(), q.bytes.end(), bytes);
    std::copy(q.txBytes.begin(), q.txBytes.end(), txBytes);
}

uint64_t
PacketNetworkStats::GetNRateSamples() const
{
    return m_net->GetSampler().GetRateSeries().timeNs.size();
}

void
PacketNetworkStats::CopyRateSeries(int64_t* timeNs,
                                   uint32_t* flow,
                                   double* rateBps,
                                   uint64_t* bytesAcked) const
{
    const PacketNetworkSampler::RateSeries& r = m_net->GetSampler().GetRateSeries();
    std::copy(r.timeNs.begin(), r.timeNs.end(), timeNs);
    std::copy(r.flow.begin(), r.flow.end(), flow);
    std::copy(r.rateBps.begin(), r.rateBps.end(), rateBps);
    std::copy(r.bytesAcked.begin(), r.bytesAcked.end(), bytesAcked);
}

void
PacketNetworkStats::CopyFastForwardStats(uint64_t* out) const
{
    if (Ptr<PacketFastForward> ff = m_net->GetFastForward())
    {
        ff->CopyStats(out);
    }
    else
    {
        std::fill(out, out + PacketFastForward::N_STATS, 0);
    }
}

void
PacketNetworkStats::CopyMemoStats(uint64_t* out) const
{
    if (Ptr<PacketEpisodeCache> memo = m_net->GetEpisodeCache())
    {
        memo->CopyStats(out);
    }
    else
    {
        std::fill(out, out + PacketEpisodeCache::N_STATS, 0);
    }
}

} // namespace ns3
