/*
 * HeteroSim: link faults at simulated times (down, degraded rate, random loss).
 */
#include "fault-schedule.h"

#include "ns3/assert.h"
#include "ns3/log.h"
#include "ns3/simulator.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("FaultSchedule");
NS_OBJECT_ENSURE_REGISTERED(FaultSchedule);

TypeId
FaultSchedule::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::FaultSchedule")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<FaultSchedule>()
            .AddAttribute("RoutingDelay",
                          "Time from a link going down (or coming back) until the fabric's "
                          "routes follow (0 = at once); in between, traffic hashed onto the down "
                          "link is lost (packet network) or stalled (fluid network)",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&FaultSchedule::m_routingDelay),
                          MakeTimeChecker(Time(0)))
            .AddTraceSource("Applied",
                            "A fault event took effect: fault index, kind, link",
                            MakeTraceSourceAccessor(&FaultSchedule::m_appliedTrace),
                            "ns3::FaultSchedule::AppliedCallback");
    return tid;
}

FaultSchedule::FaultSchedule()
{
    NS_LOG_FUNCTION(this);
}

void
FaultSchedule::AddLinkEvent(
    int64_t timeNs, uint8_t kind, uint32_t link, double value, double value2, uint32_t fault)
{
    NS_ASSERT_MSG(kind <= LOSS && timeNs >= 0, "bad fault event");
    m_events.push_back({timeNs, kind, link, value, value2, fault});
    if (fault >= m_rerouted.size())
    {
        m_rerouted.resize(fault + 1, 0);
    }
}

void
FaultSchedule::Start(Ptr<FlowNetwork> network)
{
    NS_LOG_FUNCTION(this << m_events.size());
    m_network = network;
    int64_t now = Simulator::Now().GetNanoSeconds();
    for (uint32_t i = 0; i < m_events.size(); ++i)
    {
        Simulator::Schedule(NanoSeconds(std::max<int64_t>(0, m_events[i].timeNs - now)),
                            &FaultSchedule::Apply,
                            this,
                            i);
    }
}

void
FaultSchedule::Apply(uint32_t i)
{
    const Event& e = m_events[i];
    NS_LOG_INFO("fault " << e.fault << " kind " << +e.kind << " on link " << e.link << " at "
                         << Simulator::Now().GetNanoSeconds() << " ns");
    switch (e.kind)
    {
    case LINK_DOWN:
    case LINK_UP:
        m_network->SetLinkUp(e.link, e.kind == LINK_UP);
        if (m_routingDelay.IsStrictlyPositive())
        {
            Simulator::Schedule(m_routingDelay, &FaultSchedule::Reroute, this, e.fault);
        }
        else
        {
            Reroute(e.fault);
        }
        break;
    case RATE:
        m_network->SetLinkRate(e.link, e.value);
        break;
    default:
        m_network->SetLinkLoss(e.link, e.value, e.value2);
        break;
    }
    ++m_applied;
    m_appliedTrace(e.fault, e.kind, e.link);
}

void
FaultSchedule::Reroute(uint32_t fault)
{
    m_rerouted[fault] += m_network->Reroute();
}

uint64_t
FaultSchedule::GetRerouted(uint32_t fault) const
{
    return fault < m_rerouted.size() ? m_rerouted[fault] : 0;
}

uint32_t
FaultSchedule::GetApplied() const
{
    return m_applied;
}

void
FaultSchedule::DoDispose()
{
    m_network = nullptr;
    Object::DoDispose();
}

} // namespace ns3
