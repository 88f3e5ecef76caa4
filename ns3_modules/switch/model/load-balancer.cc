/*
 * HeteroSim: per-switch choice of an egress port among equal-cost ports (load balancing).
 */
#include "load-balancer.h"

#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/simulator.h"

#include <algorithm>
#include <limits>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("LoadBalancer");
NS_OBJECT_ENSURE_REGISTERED(LoadBalancer);

TypeId
LoadBalancer::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::LoadBalancer")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<LoadBalancer>()
            .AddAttribute("Mode",
                          "How a data packet picks among equal-cost ports (ECMP needs no "
                          "balancer: see RdmaSwitch)",
                          EnumValue(SPRAY_RANDOM),
                          MakeEnumAccessor<Mode>(&LoadBalancer::m_mode),
                          MakeEnumChecker(FLOWLET,
                                          "flowlet",
                                          ADAPTIVE,
                                          "adaptive",
                                          ADAPTIVE_FLOWLET,
                                          "adaptive_flowlet",
                                          SPRAY_RANDOM,
                                          "spray",
                                          SPRAY_ROUND_ROBIN,
                                          "spray_rr"))
            .AddAttribute("FlowletGap",
                          "Flowlet and AdaptiveFlowlet: a gap this long between two packets of "
                          "a flow starts a new flowlet. Default: the 500 us flowlet inactivity "
                          "timeout of CONGA's testbed (Alizadeh et al., SIGCOMM 2014, sec. 6)",
                          TimeValue(MicroSeconds(500)),
                          MakeTimeAccessor(&LoadBalancer::m_flowletGap),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddTraceSource("Flowlet",
                            "A flow started a new flowlet (queue-pair slot, port)",
                            MakeTraceSourceAccessor(&LoadBalancer::m_flowletTrace),
                            "ns3::LoadBalancer::FlowletTracedCallback");
    return tid;
}

LoadBalancer::LoadBalancer()
{
    NS_LOG_FUNCTION(this);
}

LoadBalancer::~LoadBalancer()
{
    NS_LOG_FUNCTION(this);
}

void
LoadBalancer::Setup(const std::vector<Ptr<QbbNetDevice>>& ports, uint64_t stream, uint32_t nNodes)
{
    m_ports.clear();
    for (const auto& p : ports)
    {
        m_ports.push_back(PeekPointer(p));
    }
    m_state = stream * 0x9E3779B97F4A7C15ULL + 1;
    m_rr.assign(nNodes, 0);
    m_flows.clear();
}

uint64_t
LoadBalancer::Next()
{
    // splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
    // OOPSLA 2014)
    uint64_t z = (m_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint32_t
LoadBalancer::RandomPort(const std::vector<uint16_t>& set)
{
    return set[Next() % set.size()];
}

uint32_t
LoadBalancer::LeastLoaded(const std::vector<uint16_t>& set, uint8_t prio)
{
    std::size_t n = set.size();
    std::size_t start = Next() % n;
    uint32_t best = set[start];
    double bestDrain = std::numeric_limits<double>::max();
    for (std::size_t i = 0; i < n; ++i)
    {
        uint32_t port = set[(start + i) % n];
        const QbbNetDevice* dev = m_ports[port];
        if (dev->IsLinkDown())
        {
            continue;
        }
        // queued bytes of this priority (the queue the frame joins) over the port's rate
        double drain =
            static_cast<double>(dev->GetQueueBytes(prio)) / static_cast<double>(dev->GetRateBps());
        if (drain < bestDrain)
        {
            bestDrain = drain;
            best = port;
        }
    }
    return best;
}

uint32_t
LoadBalancer::FlowletPort(const RdmaFrame* frame, const std::vector<uint16_t>& set)
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    auto it = m_flows.find(frame->flow);
    // a flowlet keeps its port while it is still one of the set (routes change after faults)
    if (it != m_flows.end() && now - it->second.lastNs < m_flowletGap.GetNanoSeconds() &&
        std::find(set.begin(), set.end(), it->second.port) != set.end())
    {
        it->second.lastNs = now;
        return it->second.port;
    }
    uint32_t port =
        m_mode == ADAPTIVE_FLOWLET ? LeastLoaded(set, frame->priority) : RandomPort(set);
    m_flows[frame->flow] = Flowlet{now, static_cast<uint16_t>(port)};
    ++m_flowlets;
    m_flowletTrace(frame->flow, port);
    return port;
}

uint32_t
LoadBalancer::Select(const RdmaFrame* frame, const std::vector<uint16_t>& set)
{
    switch (m_mode)
    {
    case FLOWLET:
    case ADAPTIVE_FLOWLET:
        return FlowletPort(frame, set);
    case ADAPTIVE:
        return LeastLoaded(set, frame->priority);
    case SPRAY_ROUND_ROBIN:
        return set[m_rr[frame->dst]++ % set.size()];
    case SPRAY_RANDOM:
    default:
        return RandomPort(set);
    }
}

LoadBalancer::Mode
LoadBalancer::GetMode() const
{
    return m_mode;
}

uint64_t
LoadBalancer::GetFlowlets() const
{
    return m_flowlets;
}

void
LoadBalancer::DoDispose()
{
    m_ports.clear();
    m_flows.clear();
    Object::DoDispose();
}

} // namespace ns3
