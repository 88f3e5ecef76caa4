/*
 * HeteroSim: fluid (flow-level) network with max-min fair bandwidth sharing.
 */
#include "fluid-network.h"

#include "ns3/assert.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <sstream>
#include <tuple>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("FluidNetwork");
NS_OBJECT_ENSURE_REGISTERED(FluidNetwork);

TypeId
FluidNetwork::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::FluidNetwork")
            .SetParent<FlowNetwork>()
            .SetGroupName("Heterosim")
            .AddConstructor<FluidNetwork>()
            .AddAttribute("Mtu",
                          "Packet payload size in bytes used for the store-and-forward latency "
                          "term (one packet serialized per hop); 0 disables the term",
                          UintegerValue(4096),
                          MakeUintegerAccessor(&FluidNetwork::m_mtu),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("HeaderBytes",
                          "Header bytes carried per Mtu of payload; link capacities available to "
                          "payload are scaled by Mtu / (Mtu + HeaderBytes). 0 = payload only",
                          UintegerValue(0),
                          MakeUintegerAccessor(&FluidNetwork::m_headerBytes),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("Seed",
                          "Seed mixed into every flow's ECMP hash",
                          UintegerValue(1),
                          MakeUintegerAccessor(&FluidNetwork::m_seed),
                          MakeUintegerChecker<uint32_t>())
            .AddTraceSource("FlowStart",
                            "A flow started: id, source GPU, destination GPU, bytes",
                            MakeTraceSourceAccessor(&FluidNetwork::m_startTrace),
                            "ns3::FluidNetwork::FlowStartCallback")
            .AddTraceSource("TransferDone",
                            "The last byte of a flow left its source (delivery follows after "
                            "the path latency): id",
                            MakeTraceSourceAccessor(&FluidNetwork::m_transferDoneTrace),
                            "ns3::FluidNetwork::FlowIdCallback")
            .AddTraceSource("RateChange",
                            "A flow's max-min rate changed: id, new rate in bit/s",
                            MakeTraceSourceAccessor(&FluidNetwork::m_rateTrace),
                            "ns3::FluidNetwork::RateCallback");
    return tid;
}

FluidNetwork::FluidNetwork()
    : m_mtu(4096),
      m_headerBytes(0),
      m_seed(1)
{
    NS_LOG_FUNCTION(this);
}

FluidNetwork::~FluidNetwork()
{
    NS_LOG_FUNCTION(this);
}

void
FluidNetwork::SetTopology(Ptr<TopologyDescription> topo)
{
    NS_LOG_FUNCTION(this << topo);
    NS_ASSERT_MSG(m_started == 0, "SetTopology() after flows started");
    m_topo = topo;
    uint32_t nLinks = topo->GetNLinks();
    m_res.assign(2 * nLinks, Resource());
    m_capLeft.assign(2 * nLinks, 0.0);
    m_cntLeft.assign(2 * nLinks, 0);
    m_version.assign(2 * nLinks, 0);
}

uint32_t
FluidNetwork::GetNGpus() const
{
    return m_topo ? m_topo->GetNGpus() : 0;
}

uint32_t
FluidNetwork::FlowHash(uint32_t flowId) const
{
    // splitmix-style mixing of (id, seed): deterministic, well spread over ECMP sets
    uint64_t x = (static_cast<uint64_t>(m_seed) << 32) ^ flowId;
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return static_cast<uint32_t>(x);
}

void
FluidNetwork::StartFlow(uint32_t flowId,
                        uint32_t srcGpu,
                        uint32_t dstGpu,
                        uint64_t bytes,
                        uint8_t priority)
{
    NS_LOG_FUNCTION(this << flowId << srcGpu << dstGpu << bytes << +priority);
    NS_ASSERT_MSG(m_topo, "FluidNetwork: SetTopology() first");
    NS_ASSERT_MSG(bytes > 0, "a flow moves at least one byte");
    ++m_started;
    m_startTrace(flowId, srcGpu, dstGpu, bytes);
    uint32_t nGpus = m_topo->GetNGpus();
    std::vector<uint32_t> path;
    if (srcGpu < nGpus && dstGpu < nGpus && srcGpu != dstGpu)
    {
        path = m_topo->GetPath(srcGpu, dstGpu, FlowHash(flowId));
    }
    if (path.empty())
    {
        ++m_unroutable;
        if (m_unroutableMsg.empty())
        {
            std::ostringstream msg;
            msg << "flow " << flowId << " from GPU " << srcGpu << " to GPU " << dstGpu
                << (srcGpu == dstGpu ? " has no hops (same GPU)" : " has no route");
            m_unroutableMsg = msg.str();
        }
        NS_LOG_WARN("unroutable flow " << flowId);
        return;
    }

    uint32_t slot;
    if (!m_freeSlots.empty())
    {
        slot = m_freeSlots.back();
        m_freeSlots.pop_back();
    }
    else
    {
        slot = m_flows.size();
        m_flows.emplace_back();
    }
    Flow& f = m_flows[slot];
    f.id = flowId;
    f.bytes = bytes;
    f.remaining = static_cast<double>(bytes);
    f.rate = 0;
    f.lastUpdate = Simulator::Now().GetNanoSeconds();
    f.inUse = true;
    f.frozen = false;
    f.res.clear();
    f.pos.clear();

    // walk the path: resource per hop and the latency terms
    double packet = static_cast<double>(std::min<uint64_t>(m_mtu, bytes));
    double serialization = 0;
    double slowest = 0;
    int64_t propagation = 0;
    uint32_t node = m_topo->GetGpuNode(srcGpu);
    int64_t now = f.lastUpdate;
    for (uint32_t hop = 0; hop < path.size(); ++hop)
    {
        uint32_t link = path[hop];
        uint32_t dir = (m_topo->GetLinkA(link) == node) ? 0 : 1;
        uint32_t r = 2 * link + dir;
        node = m_topo->GetOtherEnd(link, node);
        double rate = m_topo->GetLinkRateBps(link);
        propagation += m_topo->GetLinkDelayNs(link);
        double perPacketNs = packet * 8e9 / rate;
        serialization += perPacketNs;
        slowest = std::max(slowest, perPacketNs);
        Resource& res = m_res[r];
        if (res.capacity == 0)
        {
            double payloadShare =
                m_mtu > 0 ? static_cast<double>(m_mtu) / (m_mtu + m_headerBytes) : 1.0;
            res.capacity = rate / 8e9 * payloadShare;
        }
        if (res.flows.empty())
        {
            res.busySince = now;
        }
        f.res.push_back(r);
        f.pos.push_back(res.flows.size());
        res.flows.emplace_back(slot, hop);
        Touch(r);
    }
    f.latencyNs = propagation + std::llround(serialization - slowest);
    ++m_active;
    if (flowId >= m_slotOfId.size())
    {
        m_slotOfId.resize(std::max<size_t>(flowId + 1, 2 * m_slotOfId.size()), -1);
    }
    m_slotOfId[flowId] = slot;
}

void
FluidNetwork::Touch(uint32_t resource)
{
    m_dirty.push_back(resource);
    if (!m_recomputePending)
    {
        m_recomputePending = true;
        Simulator::ScheduleNow(&FluidNetwork::Recompute, this);
    }
}

void
FluidNetwork::Advance(Flow& f, int64_t now)
{
    if (now > f.lastUpdate)
    {
        f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.lastUpdate));
        f.lastUpdate = now;
    }
}

void
FluidNetwork::Recompute()
{
    NS_LOG_FUNCTION(this << m_dirty.size());
    m_recomputePending = false;
    ++m_recomputations;
    uint64_t stamp = ++m_stamp;
    m_compFlows.clear();
    m_compRes.clear();
    // breadth-first search over resources <-> flows from every touched resource
    for (uint32_t seed : m_dirty)
    {
        if (m_res[seed].stamp == stamp)
        {
            continue;
        }
        m_res[seed].stamp = stamp;
        size_t head = m_compRes.size();
        m_compRes.push_back(seed);
        while (head < m_compRes.size())
        {
            uint32_t r = m_compRes[head++];
            for (const auto& [slot, hop] : m_res[r].flows)
            {
                Flow& f = m_flows[slot];
                if (f.stamp == stamp)
                {
                    continue;
                }
                f.stamp = stamp;
                m_compFlows.push_back(slot);
                for (uint32_t q : f.res)
                {
                    if (m_res[q].stamp != stamp)
                    {
                        m_res[q].stamp = stamp;
                        m_compRes.push_back(q);
                    }
                }
            }
        }
    }
    m_dirty.clear();
    if (m_compFlows.empty())
    {
        return;
    }
    int64_t now = Simulator::Now().GetNanoSeconds();
    std::vector<double> oldRate;
    oldRate.reserve(m_compFlows.size());
    for (uint32_t slot : m_compFlows)
    {
        Advance(m_flows[slot], now);
        oldRate.push_back(m_flows[slot].rate);
    }
    WaterFill();
    m_assignments += m_compFlows.size();
    for (size_t i = 0; i < m_compFlows.size(); ++i)
    {
        uint32_t slot = m_compFlows[i];
        Flow& f = m_flows[slot];
        if (f.rate == oldRate[i] && f.done.IsPending())
        {
            continue;
        }
        f.done.Cancel();
        m_rateTrace(f.id, f.rate * 8e9);
        if (f.rate <= 0)
        {
            continue; // no capacity: the flow waits (the executor reports a stall)
        }
        double ns = f.remaining / f.rate;
        int64_t delay = static_cast<int64_t>(std::ceil(ns - 1e-6));
        f.done = Simulator::Schedule(NanoSeconds(std::max<int64_t>(delay, 0)),
                                     &FluidNetwork::TransferDone,
                                     this,
                                     slot);
    }
}

void
FluidNetwork::WaterFill()
{
    // progressive filling: repeatedly saturate the resource with the smallest fair share
    using Entry = std::tuple<double, uint32_t, uint32_t>; // share, resource, version
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
    for (uint32_t r : m_compRes)
    {
        m_capLeft[r] = m_res[r].capacity;
        m_cntLeft[r] = m_res[r].flows.size();
        ++m_version[r];
        if (m_cntLeft[r] > 0)
        {
            heap.emplace(m_capLeft[r] / m_cntLeft[r], r, m_version[r]);
        }
    }
    for (uint32_t slot : m_compFlows)
    {
        m_flows[slot].frozen = false;
    }
    while (!heap.empty())
    {
        auto [share, r, version] = heap.top();
        heap.pop();
        if (version != m_version[r] || m_cntLeft[r] == 0)
        {
            continue;
        }
        for (const auto& [slot, hop] : m_res[r].flows)
        {
            Flow& f = m_flows[slot];
            if (f.frozen)
            {
                continue;
            }
            f.frozen = true;
            f.rate = share;
            for (uint32_t q : f.res)
            {
                m_capLeft[q] = std::max(0.0, m_capLeft[q] - share);
                --m_cntLeft[q];
                ++m_version[q];
                if (q != r && m_cntLeft[q] > 0)
                {
                    heap.emplace(m_capLeft[q] / m_cntLeft[q], q, m_version[q]);
                }
            }
        }
    }
}

void
FluidNetwork::TransferDone(uint32_t slot)
{
    Flow& f = m_flows[slot];
    NS_LOG_FUNCTION(this << f.id);
    NS_ASSERT(f.inUse);
    int64_t now = Simulator::Now().GetNanoSeconds();
    f.remaining = 0;
    f.lastUpdate = now;
    for (size_t k = 0; k < f.res.size(); ++k)
    {
        uint32_t r = f.res[k];
        Resource& res = m_res[r];
        uint32_t at = f.pos[k];
        auto moved = res.flows.back();
        res.flows[at] = moved;
        res.flows.pop_back();
        if (at < res.flows.size())
        {
            m_flows[moved.first].pos[moved.second] = at;
        }
        res.bytesDone += f.bytes;
        if (res.flows.empty())
        {
            res.busyNs += now - res.busySince;
            res.busySince = -1;
        }
        Touch(r);
    }
    f.inUse = false;
    f.rate = 0;
    m_slotOfId[f.id] = -1;
    m_freeSlots.push_back(slot);
    --m_active;
    m_transferDoneTrace(f.id);
    Simulator::Schedule(NanoSeconds(f.latencyNs), &FluidNetwork::Deliver, this, f.id);
    m_bytesDelivered += f.bytes;
}

void
FluidNetwork::Deliver(uint32_t flowId)
{
    ++m_finished;
    NotifyFlowDone(flowId);
}

uint64_t
FluidNetwork::GetFlowsStarted() const
{
    return m_started;
}

uint64_t
FluidNetwork::GetFlowsFinished() const
{
    return m_finished;
}

uint64_t
FluidNetwork::GetFlowsActive() const
{
    return m_active;
}

uint64_t
FluidNetwork::GetFlowsUnroutable() const
{
    return m_unroutable;
}

std::string
FluidNetwork::GetUnroutableMessage() const
{
    return m_unroutableMsg;
}

uint64_t
FluidNetwork::GetBytesDelivered() const
{
    return m_bytesDelivered;
}

uint64_t
FluidNetwork::GetRecomputations() const
{
    return m_recomputations;
}

uint64_t
FluidNetwork::GetRateAssignments() const
{
    return m_assignments;
}

void
FluidNetwork::CopyLinkStats(uint64_t* bytes, int64_t* busyNs) const
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    for (size_t r = 0; r < m_res.size(); ++r)
    {
        const Resource& res = m_res[r];
        uint64_t carried = res.bytesDone;
        for (const auto& [slot, hop] : res.flows)
        {
            const Flow& f = m_flows[slot];
            double left = std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.lastUpdate));
            carried += f.bytes - std::min<uint64_t>(f.bytes, std::llround(left));
        }
        bytes[r] = carried;
        busyNs[r] = res.busyNs + (res.busySince >= 0 ? now - res.busySince : 0);
    }
}

double
FluidNetwork::GetFlowRateBps(uint32_t flowId) const
{
    if (flowId >= m_slotOfId.size() || m_slotOfId[flowId] < 0)
    {
        return -1;
    }
    return m_flows[m_slotOfId[flowId]].rate * 8e9;
}

void
FluidNetwork::DoDispose()
{
    // pending events die with the simulator (Simulator::Destroy); nothing to cancel here
    m_flows.clear();
    m_res.clear();
    m_topo = nullptr;
    FlowNetwork::DoDispose();
}

} // namespace ns3
