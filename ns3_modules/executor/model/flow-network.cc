/*
 * HeteroSim: the interface between the plan executor and a network model.
 */
#include "flow-network.h"

#include "ns3/assert.h"
#include "ns3/log.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("FlowNetwork");
NS_OBJECT_ENSURE_REGISTERED(FlowNetwork);

TypeId
FlowNetwork::GetTypeId()
{
    static TypeId tid = TypeId("ns3::FlowNetwork").SetParent<Object>().SetGroupName("Heterosim");
    return tid;
}

FlowNetwork::FlowNetwork()
{
    NS_LOG_FUNCTION(this);
}

FlowNetwork::~FlowNetwork()
{
    NS_LOG_FUNCTION(this);
}

void
FlowNetwork::SetFlowDoneCallback(FlowDoneCallback cb)
{
    m_flowDone = cb;
}

void
FlowNetwork::StartFlowOnConnection(uint32_t flowId,
                                   uint32_t srcGpu,
                                   uint32_t dstGpu,
                                   uint64_t bytes,
                                   uint8_t priority,
                                   uint32_t connection)
{
    StartFlow(flowId, srcGpu, dstGpu, bytes, priority);
}

void
FlowNetwork::SetLinkUp(uint32_t link, bool up)
{
}

void
FlowNetwork::SetFlowPlanes(uint32_t n, const int8_t* planes)
{
    NS_LOG_FUNCTION(this << n);
    m_flowPlane.assign(planes, planes + n);
}

int32_t
FlowNetwork::GetFlowPlane(uint32_t flowId) const
{
    return flowId < m_flowPlane.size() ? m_flowPlane[flowId] : -1;
}

uint32_t
FlowNetwork::Reroute()
{
    return 0;
}

void
FlowNetwork::SetLinkRate(uint32_t link, double rateBps)
{
}

void
FlowNetwork::SetLinkLoss(uint32_t link, double probability, double goodputFactor)
{
}

void
FlowNetwork::ScheduleFlows(uint32_t n,
                           const uint32_t* ids,
                           const uint32_t* src,
                           const uint32_t* dst,
                           const uint64_t* bytes,
                           const int64_t* startNs,
                           const uint8_t* priority)
{
    NS_LOG_FUNCTION(this << n);
    for (uint32_t i = 0; i < n; ++i)
    {
        NS_ASSERT_MSG(startNs[i] >= 0, "flow start time must not be negative");
        Simulator::Schedule(NanoSeconds(startNs[i]),
                            &FlowNetwork::StartFlow,
                            this,
                            ids[i],
                            src[i],
                            dst[i],
                            bytes[i],
                            priority[i]);
    }
}

void
FlowNetwork::CopyFinishTimes(uint32_t n, const uint32_t* ids, int64_t* out) const
{
    for (uint32_t i = 0; i < n; ++i)
    {
        out[i] = ids[i] < m_finishNs.size() ? m_finishNs[ids[i]] : -1;
    }
}

uint64_t
FlowNetwork::GetFinishedCount() const
{
    return m_finished;
}

void
FlowNetwork::NotifyFlowDone(uint32_t flowId)
{
    NS_LOG_FUNCTION(this << flowId);
    ++m_finished;
    if (!m_flowDone.IsNull())
    {
        m_flowDone(flowId, Simulator::Now()); // the executor records the end (its task time)
        return;
    }
    if (flowId >= m_finishNs.size())
    {
        m_finishNs.resize(flowId + 1, -1);
    }
    m_finishNs[flowId] = Simulator::Now().GetNanoSeconds();
}

void
FlowNetwork::DoDispose()
{
    m_flowDone = MakeNullCallback<void, uint32_t, Time>();
    Object::DoDispose();
}

} // namespace ns3
