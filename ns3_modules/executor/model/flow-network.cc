/*
 * HeteroSim: the interface between the plan executor and a network model.
 */
#include "flow-network.h"

#include "ns3/log.h"
#include "ns3/simulator.h"

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
FlowNetwork::NotifyFlowDone(uint32_t flowId)
{
    NS_LOG_FUNCTION(this << flowId);
    if (!m_flowDone.IsNull())
    {
        m_flowDone(flowId, Simulator::Now());
    }
}

void
FlowNetwork::DoDispose()
{
    m_flowDone = MakeNullCallback<void, uint32_t, Time>();
    Object::DoDispose();
}

} // namespace ns3
