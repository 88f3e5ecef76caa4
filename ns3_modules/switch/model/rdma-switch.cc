/*
 * HeteroSim: an output-queued switch of the RDMA fabric (leaf, spine, NVSwitch, PCIe switch).
 */
#include "rdma-switch.h"

#include "ns3/assert.h"
#include "ns3/boolean.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/trace-source-accessor.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaSwitch");
NS_OBJECT_ENSURE_REGISTERED(RdmaSwitch);

TypeId
RdmaSwitch::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RdmaSwitch")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<RdmaSwitch>()
            .AddAttribute("Trimming",
                          "Packet trimming: with a lossy buffer (PFC off), an RDMA data frame the "
                          "buffer cannot admit is cut to its header and forwarded ahead of data "
                          "instead of being dropped (NDP, SIGCOMM 2017; optional in UET 1.0)",
                          BooleanValue(false),
                          MakeBooleanAccessor(&RdmaSwitch::m_trimming),
                          MakeBooleanChecker())
            .AddAttribute("TrimBytes",
                          "Bytes a trimmed frame keeps, headers included, before the physical-"
                          "layer overhead (64: the header size of NDP and of the UEC reference "
                          "simulator htsim; the minimum Ethernet frame)",
                          UintegerValue(64),
                          MakeUintegerAccessor(&RdmaSwitch::m_trimBytes),
                          MakeUintegerChecker<uint32_t>(64))
            .AddTraceSource("Trim",
                            "A data frame was cut to its header (frame, egress port)",
                            MakeTraceSourceAccessor(&RdmaSwitch::m_trimTrace),
                            "ns3::RdmaSwitch::TrimTracedCallback");
    return tid;
}

RdmaSwitch::RdmaSwitch()
{
    NS_LOG_FUNCTION(this);
}

RdmaSwitch::~RdmaSwitch()
{
    NS_LOG_FUNCTION(this);
}

void
RdmaSwitch::Setup(uint32_t nodeId,
                  Ptr<TopologyDescription> desc,
                  const std::vector<Ptr<QbbNetDevice>>& ports,
                  const std::vector<uint32_t>& portLinks,
                  RdmaFramePool* pool,
                  Ptr<SwitchMmu> mmu,
                  Ptr<RedEcnMarker> marker,
                  uint64_t bufferBytes,
                  bool pfcEnabled,
                  bool intEnabled,
                  uint32_t maxFrameBytes)
{
    m_nodeId = nodeId;
    m_ports = ports;
    m_pool = pool;
    m_mmu = mmu;
    m_marker = marker;
    m_int = intEnabled;
    if (m_marker)
    {
        m_marker->SetStream(nodeId);
    }
    m_desc = desc;
    m_portLinks = portLinks;
    m_dstSlot.clear();
    m_nextPorts.clear();
    BuildForwarding();
    // Headroom: everything that can still arrive after XOFF is decided: the frame the
    // switch is sending on the reverse direction, the PFC frame, the upstream's frame in
    // progress, the crossing frame itself, and two propagation delays of line-rate data.
    std::vector<uint64_t> rates(ports.size());
    m_headroom.assign(ports.size(), 0);
    for (uint32_t p = 0; p < ports.size(); ++p)
    {
        rates[p] = ports[p]->GetRateBps();
        int64_t delayNs = desc->GetLinkDelayNs(portLinks[p]);
        double inflight =
            2.0 * static_cast<double>(rates[p]) * static_cast<double>(delayNs) * 1e-9 / 8.0;
        m_headroom[p] = static_cast<uint64_t>(inflight) + 3ULL * maxFrameBytes + 84;
    }
    m_mmu->Configure(rates, m_headroom, pfcEnabled, bufferBytes);
    m_trimActive = m_trimming && !pfcEnabled;
    m_refresh.assign(ports.size() * QbbNetDevice::N_PRIORITIES, EventId());
    for (uint32_t p = 0; p < ports.size(); ++p)
    {
        ports[p]->SetHandler(this, p, pool);
    }
}

void
RdmaSwitch::BuildForwarding()
{
    // Forwarding table: destination endpoint -> ECMP set of local ports.
    uint32_t nNodes = m_desc->GetNNodes();
    std::vector<int32_t> oldSlot = std::move(m_dstSlot);
    std::vector<std::vector<uint16_t>> oldPorts = std::move(m_nextPorts);
    m_dstSlot.assign(nNodes, -1);
    m_nextPorts.clear();
    for (uint32_t d = 0; d < nNodes; ++d)
    {
        uint8_t kind = m_desc->GetNodeKind(d);
        if (kind != TopologyDescription::GPU && kind != TopologyDescription::NIC)
        {
            continue;
        }
        const auto& links = m_desc->GetNextHops(m_nodeId, d);
        if (links.empty())
        {
            if (d < oldSlot.size() && oldSlot[d] >= 0)
            {
                m_dstSlot[d] = static_cast<int32_t>(m_nextPorts.size());
                m_nextPorts.push_back(oldPorts[oldSlot[d]]);
            }
            continue;
        }
        std::vector<uint16_t> set;
        for (uint32_t link : links)
        {
            for (uint32_t p = 0; p < m_portLinks.size(); ++p)
            {
                if (m_portLinks[p] == link)
                {
                    set.push_back(static_cast<uint16_t>(p));
                    break;
                }
            }
        }
        NS_ASSERT_MSG(set.size() == links.size(), "route uses a link not attached to the switch");
        m_dstSlot[d] = static_cast<int32_t>(m_nextPorts.size());
        m_nextPorts.push_back(std::move(set));
    }
}

void
RdmaSwitch::UpdateRoutes()
{
    NS_LOG_FUNCTION(this << m_nodeId);
    BuildForwarding();
}

void
RdmaSwitch::HandleFrame(RdmaFrame* frame, uint32_t port)
{
    int32_t slot = frame->dst < m_dstSlot.size() ? m_dstSlot[frame->dst] : -1;
    NS_ASSERT_MSG(slot >= 0, "switch " << m_nodeId << " has no route to node " << frame->dst);
    const std::vector<uint16_t>& set = m_nextPorts[slot];
    uint32_t out;
    if (set.size() == 1)
    {
        out = set[0];
    }
    else if (m_lb && frame->type == RdmaFrame::DATA)
    {
        out = m_lb->Select(frame, set);
    }
    else
    {
        out = set[TopologyDescription::EcmpIndex(frame->hash, frame->hop, set.size())];
    }
    ++frame->hop;
    QbbNetDevice* egress = PeekPointer(m_ports[out]);
    if (!frame->IsData() || frame->trimmed)
    {
        egress->Enqueue(frame, QbbNetDevice::CONTROL_QUEUE);
        return;
    }
    uint8_t prio = frame->priority;
    if (!m_mmu->Admit(port, prio, frame->wireBytes))
    {
        if (m_trimActive && frame->type == RdmaFrame::DATA)
        {
            Trim(frame, egress, out);
            return;
        }
        ++m_drops;
        egress->CountDrop(frame);
        m_pool->Free(frame);
        return;
    }
    frame->inPort = static_cast<uint16_t>(port);
    if (m_marker && m_marker->MarksAtEnqueue() && !frame->ce &&
        m_marker->ShouldMark(egress->GetQueueBytes(prio), egress->GetRateBps()))
    {
        frame->ce = 1;
        egress->CountEcnMark(frame);
    }
    egress->Enqueue(frame, prio);
    CheckPause(port, prio);
}

void
RdmaSwitch::Trim(RdmaFrame* frame, QbbNetDevice* egress, uint32_t out)
{
    NS_LOG_DEBUG("switch " << m_nodeId << " trims flow slot " << frame->flow << " seq "
                           << frame->seq << " on port " << out);
    frame->trimmed = 1;
    frame->wireBytes = std::min(frame->wireBytes, m_trimBytes + m_phyBytes);
    frame->nHops = 0;
    ++m_trims;
    egress->CountTrim(frame);
    m_trimTrace(frame, out);
    egress->Enqueue(frame, QbbNetDevice::CONTROL_QUEUE);
}

void
RdmaSwitch::OnDequeue(RdmaFrame* frame, uint32_t port)
{
    if (!frame->IsData() || frame->trimmed)
    {
        return;
    }
    QbbNetDevice* egress = PeekPointer(m_ports[port]);
    uint8_t prio = frame->priority;
    m_mmu->Release(frame->inPort, prio, frame->wireBytes);
    if (m_marker && !m_marker->MarksAtEnqueue() && !frame->ce &&
        m_marker->ShouldMark(egress->GetQueueBytes(prio), egress->GetRateBps()))
    {
        frame->ce = 1;
        egress->CountEcnMark(frame);
    }
    if (m_int && frame->nHops < RdmaFrame::MAX_INT_HOPS)
    {
        IntHop& hop = frame->hops[frame->nHops++];
        hop.rateBps = egress->GetRateBps();
        hop.tsNs = Simulator::Now().GetNanoSeconds();
        hop.txBytes = egress->GetTxBytes();
        hop.qlenBytes = static_cast<uint32_t>(egress->GetTotalQueueBytes());
    }
    CheckPause(frame->inPort, prio);
}

void
RdmaSwitch::CheckPause(uint32_t port, uint8_t priority)
{
    if (!m_mmu->IsPfcEnabled())
    {
        return;
    }
    std::size_t key = static_cast<std::size_t>(port) * QbbNetDevice::N_PRIORITIES + priority;
    if (m_mmu->ShouldPause(port, priority))
    {
        m_mmu->SetPaused(port, priority, true);
        uint16_t quanta = m_mmu->GetPauseQuanta();
        m_ports[port]->SendPfc(priority, quanta);
        uint64_t bits = static_cast<uint64_t>(quanta) * 512;
        Time half =
            NanoSeconds(static_cast<int64_t>(bits * 500000000ULL / m_ports[port]->GetRateBps()));
        m_refresh[key].Cancel();
        m_refresh[key] = Simulator::Schedule(half, &RdmaSwitch::RefreshPause, this, port, priority);
    }
    else if (m_mmu->ShouldResume(port, priority))
    {
        m_mmu->SetPaused(port, priority, false);
        m_refresh[key].Cancel();
        m_ports[port]->SendPfc(priority, 0);
    }
}

void
RdmaSwitch::RefreshPause(uint32_t port, uint8_t priority)
{
    if (!m_mmu->IsPaused(port, priority))
    {
        return;
    }
    std::size_t key = static_cast<std::size_t>(port) * QbbNetDevice::N_PRIORITIES + priority;
    if (m_mmu->ShouldResume(port, priority))
    {
        m_mmu->SetPaused(port, priority, false);
        m_ports[port]->SendPfc(priority, 0);
        return;
    }
    // Still congested: re-send XOFF before the previous one expires.
    uint16_t quanta = m_mmu->GetPauseQuanta();
    m_ports[port]->SendPfc(priority, quanta);
    uint64_t bits = static_cast<uint64_t>(quanta) * 512;
    Time half =
        NanoSeconds(static_cast<int64_t>(bits * 500000000ULL / m_ports[port]->GetRateBps()));
    m_refresh[key] = Simulator::Schedule(half, &RdmaSwitch::RefreshPause, this, port, priority);
}

void
RdmaSwitch::SetLoadBalancer(Ptr<LoadBalancer> lb, uint64_t stream)
{
    m_lb = lb;
    if (m_lb)
    {
        m_lb->Setup(m_ports, stream, m_desc->GetNNodes());
    }
}

Ptr<LoadBalancer>
RdmaSwitch::GetLoadBalancer() const
{
    return m_lb;
}

Ptr<SwitchMmu>
RdmaSwitch::GetMmu() const
{
    return m_mmu;
}

uint64_t
RdmaSwitch::GetDrops() const
{
    return m_drops;
}

uint64_t
RdmaSwitch::GetTrims() const
{
    return m_trims;
}

bool
RdmaSwitch::IsTrimming() const
{
    return m_trimActive;
}

void
RdmaSwitch::SetPhyBytes(uint32_t bytes)
{
    m_phyBytes = bytes;
}

uint64_t
RdmaSwitch::GetHeadroom(uint32_t port) const
{
    return port < m_headroom.size() ? m_headroom[port] : 0;
}

void
RdmaSwitch::DoDispose()
{
    for (auto& ev : m_refresh)
    {
        ev.Cancel();
    }
    for (auto& dev : m_ports)
    {
        dev->SetHandler(nullptr, 0, nullptr);
    }
    m_ports.clear();
    m_mmu = nullptr;
    m_marker = nullptr;
    if (m_lb)
    {
        m_lb->Dispose();
        m_lb = nullptr;
    }
    m_desc = nullptr;
    Object::DoDispose();
}

} // namespace ns3
