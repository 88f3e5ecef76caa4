/*
 * HeteroSim: base class of the per-queue-pair congestion control algorithms.
 */
#include "rdma-congestion-control.h"

#include "ns3/log.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaCongestionControl");
NS_OBJECT_ENSURE_REGISTERED(RdmaCongestionControl);

TypeId
RdmaCongestionControl::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RdmaCongestionControl")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddTraceSource("RateChange",
                            "The sending rate changed (old, new; bit/s)",
                            MakeTraceSourceAccessor(&RdmaCongestionControl::m_rateTrace),
                            "ns3::RdmaCongestionControl::RateTracedCallback");
    return tid;
}

RdmaCongestionControl::RdmaCongestionControl()
    : m_minRate(DataRate("1Mbps"))
{
}

RdmaCongestionControl::~RdmaCongestionControl() = default;

void
RdmaCongestionControl::Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes)
{
    m_lineRate = lineRateBps;
    m_rate = lineRateBps;
    m_baseRtt = baseRtt;
    m_mtu = mtuBytes;
}

void
RdmaCongestionControl::Stop()
{
}

void
RdmaCongestionControl::ReceiveCnp()
{
}

void
RdmaCongestionControl::ReceiveAck(const RdmaAckInfo& info)
{
}

void
RdmaCongestionControl::OnSend(uint32_t bytes)
{
}

void
RdmaCongestionControl::ReceiveLoss(uint32_t bytes)
{
}

bool
RdmaCongestionControl::UsesCnp() const
{
    return false;
}

void
RdmaCongestionControl::ShiftClock(int64_t deltaNs, std::vector<const EventImpl*>* moved)
{
    // no timers
}

void
RdmaCongestionControl::HoldSkipped(int64_t /* deltaNs */)
{
}

void
RdmaCongestionControl::AdvanceSkipped(int64_t deltaNs, uint64_t bytes)
{
    // nothing changes with time or bytes alone
}

uint32_t
RdmaCongestionControl::GetIntHeaderBytes() const
{
    return 0;
}

bool
RdmaCongestionControl::UsesCredit() const
{
    return false;
}

uint64_t
RdmaCongestionControl::GetInitialCredit() const
{
    return 0;
}

bool
RdmaCongestionControl::UsesInt() const
{
    return false;
}

double
RdmaCongestionControl::GetRate() const
{
    return m_rate;
}

uint64_t
RdmaCongestionControl::GetWindow() const
{
    return m_window;
}

uint64_t
RdmaCongestionControl::GetRateChanges() const
{
    return m_rateChanges;
}

Time
RdmaCongestionControl::GetBaseRtt() const
{
    return m_baseRtt;
}

double
RdmaCongestionControl::GetLineRate() const
{
    return m_lineRate;
}

void
RdmaCongestionControl::SetRateChangeCallback(Callback<void, double, double> cb)
{
    m_rateCallback = cb;
}

void
RdmaCongestionControl::RestoreRate(double bps)
{
    SetRate(bps);
}

void
RdmaCongestionControl::SetRate(double bps)
{
    double floor = std::min(static_cast<double>(m_minRate.GetBitRate()), m_lineRate);
    double rate = std::clamp(bps, floor, m_lineRate);
    if (rate == m_rate)
    {
        return;
    }
    double old = m_rate;
    m_rate = rate;
    ++m_rateChanges;
    m_rateTrace(old, rate);
    if (!m_rateCallback.IsNull())
    {
        m_rateCallback(old, rate);
    }
}

void
RdmaCongestionControl::DoDispose()
{
    Stop();
    m_rateCallback = MakeNullCallback<void, double, double>();
    Object::DoDispose();
}

} // namespace ns3
