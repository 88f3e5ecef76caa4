/*
 * HeteroSim: the receiver's credit pacer of RCCC (UET receiver-credit congestion control).
 */
#include "rccc-pacer.h"

#include "ns3/log.h"
#include "ns3/simulator.h"

#include <algorithm>
#include <cmath>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RcccPacer");
NS_OBJECT_ENSURE_REGISTERED(RcccPacer);

TypeId
RcccPacer::GetTypeId()
{
    static TypeId tid = TypeId("ns3::RcccPacer")
                            .SetParent<Object>()
                            .SetGroupName("Heterosim")
                            .AddConstructor<RcccPacer>();
    return tid;
}

RcccPacer::RcccPacer()
{
    NS_LOG_FUNCTION(this);
}

void
RcccPacer::Setup(double rateBps,
                 uint32_t mtu,
                 uint32_t overheadBytes,
                 Callback<void, RdmaQueuePair*> grant)
{
    m_rateBps = rateBps;
    m_mtu = mtu;
    m_overhead = overheadBytes;
    m_grant = grant;
}

void
RcccPacer::Request(RdmaQueuePair* qp, uint64_t initialCredit, uint64_t bdpBytes)
{
    // the cap counts payload, as grants do: the payload share of a BDP of full frames
    auto payloadBdp = static_cast<uint64_t>(static_cast<double>(bdpBytes) * m_mtu /
                                            static_cast<double>(m_mtu + m_overhead));
    m_cap = std::max(m_cap, payloadBdp);
    if (!qp->creditTracked)
    {
        qp->creditTracked = true;
        m_outstanding += initialCredit - std::min(initialCredit, qp->creditRcvd);
    }
    if (!qp->creditOwed && qp->creditWant > qp->creditEnd)
    {
        qp->creditOwed = true;
        m_owed.push_back(qp);
    }
    Wake();
}

void
RcccPacer::Arrived(uint32_t bytes)
{
    m_outstanding -= std::min<uint64_t>(bytes, m_outstanding);
    Wake();
}

void
RcccPacer::Wake()
{
    if (m_tick.IsPending() || m_owed.empty() || m_outstanding >= m_cap)
    {
        return;
    }
    int64_t now = Simulator::Now().GetNanoSeconds();
    if (now >= m_readyNs)
    {
        Tick();
    }
    else
    {
        m_tick = Simulator::Schedule(NanoSeconds(m_readyNs - now), &RcccPacer::Tick, this);
    }
}

void
RcccPacer::Tick()
{
    if (m_owed.empty() || m_outstanding >= m_cap)
    {
        return; // an arrival wakes the pacer again
    }
    m_next %= m_owed.size();
    RdmaQueuePair* qp = m_owed[m_next];
    uint64_t bytes = std::min<uint64_t>(m_mtu, qp->creditWant - qp->creditEnd);
    qp->creditEnd += bytes;
    m_outstanding += bytes;
    ++m_grants;
    m_grant(qp);
    if (qp->creditEnd >= qp->creditWant)
    {
        qp->creditOwed = false;
        m_owed.erase(m_owed.begin() + static_cast<std::ptrdiff_t>(m_next));
    }
    else
    {
        ++m_next;
    }
    // the next grant when the credited packet has crossed the downlink
    double gap = static_cast<double>(bytes + m_overhead) * 8e9 / m_rateBps + m_carry;
    double whole = std::floor(gap);
    m_carry = gap - whole;
    m_readyNs = Simulator::Now().GetNanoSeconds() + static_cast<int64_t>(whole);
    if (!m_owed.empty())
    {
        m_tick =
            Simulator::Schedule(NanoSeconds(static_cast<int64_t>(whole)), &RcccPacer::Tick, this);
    }
}

uint64_t
RcccPacer::GetGrants() const
{
    return m_grants;
}

void
RcccPacer::DoDispose()
{
    m_tick.Cancel();
    m_owed.clear();
    m_grant = MakeNullCallback<void, RdmaQueuePair*>();
    Object::DoDispose();
}

} // namespace ns3
