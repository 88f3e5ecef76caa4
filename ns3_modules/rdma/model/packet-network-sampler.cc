/*
 * HeteroSim: periodic samples of a packet network's queues and queue-pair rates.
 */
#include "packet-network-sampler.h"

#include "ns3/log.h"
#include "ns3/shiftable-scheduler.h"
#include "ns3/simulator.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PacketNetworkSampler");

PacketNetworkSampler::PacketNetworkSampler()
    : m_interval(Time(0))
{
    NS_LOG_FUNCTION(this);
}

PacketNetworkSampler::~PacketNetworkSampler()
{
    NS_LOG_FUNCTION(this);
}

void
PacketNetworkSampler::Setup(Ptr<TopologyDescription> desc,
                            const std::vector<Ptr<QbbNetDevice>>* ports,
                            const std::vector<std::unique_ptr<RdmaQueuePair>>* qps,
                            Ptr<SocketTransport> socket,
                            Time interval,
                            bool allPorts,
                            Callback<bool> pending)
{
    NS_LOG_FUNCTION(this << interval << allPorts);
    m_ports = ports;
    m_qps = qps;
    m_socket = socket;
    m_interval = interval;
    m_pending = pending;
    m_samplePorts.clear();
    for (uint32_t gp = 0; gp < ports->size(); ++gp)
    {
        uint32_t link = gp / 2;
        uint32_t node = gp % 2 == 0 ? desc->GetLinkA(link) : desc->GetLinkB(link);
        uint8_t kind = desc->GetNodeKind(node);
        uint8_t lkind = desc->GetLinkKind(link);
        bool fabricPort =
            lkind == TopologyDescription::ACCESS || lkind == TopologyDescription::FABRIC;
        if (allPorts || (fabricPort && kind != TopologyDescription::GPU))
        {
            m_samplePorts.push_back(gp);
        }
    }
}

bool
PacketNetworkSampler::IsEnabled() const
{
    return m_interval.IsStrictlyPositive();
}

void
PacketNetworkSampler::AddQueuePair(uint32_t slot)
{
    if (IsEnabled())
    {
        m_liveSlots.push_back(slot);
    }
}

void
PacketNetworkSampler::Arm()
{
    if (IsEnabled() && !m_event.IsPending())
    {
        int64_t period = m_interval.GetNanoSeconds();
        int64_t now = Simulator::Now().GetNanoSeconds();
        int64_t next = (now / period + 1) * period;
        m_event = Simulator::Schedule(NanoSeconds(next - now), &PacketNetworkSampler::Sample, this);
    }
}

void
PacketNetworkSampler::ShiftClock(int64_t deltaNs, std::vector<const EventImpl*>* moved)
{
    ShiftEventId(m_event, deltaNs, moved);
}

void
PacketNetworkSampler::Stop()
{
    NS_LOG_FUNCTION(this);
    m_event.Cancel();
    m_liveSlots.clear();
    m_ports = nullptr;
    m_qps = nullptr;
    m_socket = nullptr;
    m_pending = Callback<bool>();
}

const PacketNetworkSampler::QueueSeries&
PacketNetworkSampler::GetQueueSeries() const
{
    return m_queue;
}

const PacketNetworkSampler::RateSeries&
PacketNetworkSampler::GetRateSeries() const
{
    return m_rate;
}

void
PacketNetworkSampler::Sample()
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    for (uint32_t gp : m_samplePorts)
    {
        const QbbNetDevice* dev = PeekPointer((*m_ports)[gp]);
        m_queue.timeNs.push_back(now);
        m_queue.port.push_back(gp);
        m_queue.bytes.push_back(dev->GetTotalQueueBytes());
        m_queue.txBytes.push_back(dev->GetTxBytes());
    }
    // Only queue pairs not yet finished are visited (in slot order, as they were created);
    // finished ones leave the list, so a sample costs the live queue pairs, not every flow so far.
    std::size_t keep = 0;
    for (uint32_t slot : m_liveSlots)
    {
        const RdmaQueuePair* qp = (*m_qps)[slot].get();
        if (qp->active)
        {
            m_rate.timeNs.push_back(now);
            m_rate.flow.push_back(qp->flowId);
            m_rate.rateBps.push_back(qp->cc->GetRate());
            m_rate.bytesAcked.push_back(qp->sndUna + qp->ffBytes);
        }
        if (!qp->IsFinished())
        {
            m_liveSlots[keep++] = slot;
        }
    }
    m_liveSlots.resize(keep);
    if (m_socket)
    {
        m_socket->AppendProgress(
            now, m_rate.timeNs, m_rate.flow, m_rate.rateBps, m_rate.bytesAcked);
    }
    if (m_pending())
    {
        m_event = Simulator::Schedule(m_interval, &PacketNetworkSampler::Sample, this);
    }
}

} // namespace ns3
