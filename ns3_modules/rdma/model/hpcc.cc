/*
 * HeteroSim: HPCC congestion control (INT-based).
 */
#include "hpcc.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Hpcc");
NS_OBJECT_ENSURE_REGISTERED(Hpcc);

TypeId
Hpcc::GetTypeId()
{
    static TypeId tid = TypeId("ns3::Hpcc")
                            .SetParent<RdmaCongestionControl>()
                            .SetGroupName("Heterosim")
                            .AddConstructor<Hpcc>()
                            .AddAttribute("TargetUtilization",
                                          "Target link utilisation eta",
                                          DoubleValue(0.95),
                                          MakeDoubleAccessor(&Hpcc::m_eta),
                                          MakeDoubleChecker<double>(0.01, 1.0))
                            .AddAttribute("MaxStage",
                                          "Additive-increase stages before a multiplicative update",
                                          UintegerValue(0),
                                          MakeUintegerAccessor(&Hpcc::m_maxStage),
                                          MakeUintegerChecker<uint32_t>())
                            .AddAttribute("RateAi",
                                          "Additive increase step",
                                          DataRateValue(DataRate("50Mbps")),
                                          MakeDataRateAccessor(&Hpcc::m_rai),
                                          MakeDataRateChecker())
                            .AddAttribute("FastReact",
                                          "React on every ACK (commit once per RTT)",
                                          BooleanValue(true),
                                          MakeBooleanAccessor(&Hpcc::m_fastReact),
                                          MakeBooleanChecker())
                            .AddAttribute("MinRate",
                                          "Rate floor",
                                          DataRateValue(DataRate("100Mbps")),
                                          MakeDataRateAccessor(&Hpcc::m_minRate),
                                          MakeDataRateChecker());
    return tid;
}

Hpcc::Hpcc()
{
    NS_LOG_FUNCTION(this);
}

void
Hpcc::Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes)
{
    RdmaCongestionControl::Start(lineRateBps, baseRtt, mtuBytes);
    m_rc = lineRateBps;
    m_u = 0;
    m_stage = 0;
    m_lastUpdateSeq = 0;
    m_prevHops = 0;
    UpdateWindow();
}

bool
Hpcc::UsesInt() const
{
    return true;
}

uint32_t
Hpcc::GetIntHeaderBytes() const
{
    return 2 + 8 * RdmaFrame::MAX_INT_HOPS;
}

double
Hpcc::GetUtilization() const
{
    return m_u;
}

void
Hpcc::UpdateWindow()
{
    double t = m_baseRtt.GetSeconds();
    m_window = std::max<uint64_t>(static_cast<uint64_t>(m_rc * t / 8.0), m_mtu);
}

void
Hpcc::ReceiveAck(const RdmaAckInfo& info)
{
    if (info.hops == nullptr || info.nHops == 0)
    {
        return;
    }
    if (m_prevHops != info.nHops)
    {
        std::copy(info.hops, info.hops + info.nHops, m_prev);
        m_prevHops = info.nHops;
        return;
    }
    double t = m_baseRtt.GetSeconds();
    double uMax = 0;
    double tauMax = 0;
    bool any = false;
    for (uint8_t j = 0; j < info.nHops; ++j)
    {
        const IntHop& now = info.hops[j];
        const IntHop& prev = m_prev[j];
        double tau = static_cast<double>(now.tsNs - prev.tsNs) * 1e-9;
        if (tau <= 0)
        {
            continue;
        }
        double b = static_cast<double>(now.rateBps);
        double txRate = static_cast<double>(now.txBytes - prev.txBytes) * 8.0 / tau;
        double q = static_cast<double>(std::min(now.qlenBytes, prev.qlenBytes));
        double u = txRate / b + q * 8.0 / (b * t);
        if (!any || u > uMax)
        {
            uMax = u;
            tauMax = tau;
            any = true;
        }
    }
    std::copy(info.hops, info.hops + info.nHops, m_prev);
    if (!any)
    {
        return;
    }
    tauMax = std::min(tauMax, t);
    m_u = m_u * (t - tauMax) / t + uMax * tauMax / t;

    double target;
    uint32_t stage;
    double rai = static_cast<double>(m_rai.GetBitRate());
    if (m_u >= m_eta || m_stage >= m_maxStage)
    {
        target = m_rc / (m_u / m_eta) + rai;
        stage = 0;
    }
    else
    {
        target = m_rc + rai;
        stage = m_stage + 1;
    }
    double floor = std::min(static_cast<double>(m_minRate.GetBitRate()), m_lineRate);
    target = std::clamp(target, floor, m_lineRate);
    if (info.ackSeq > m_lastUpdateSeq)
    {
        m_rc = target;
        m_stage = stage;
        m_lastUpdateSeq = info.sndNxt;
        UpdateWindow();
        SetRate(target);
    }
    else if (m_fastReact)
    {
        SetRate(target);
    }
}

} // namespace ns3
