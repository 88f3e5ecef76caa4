/*
 * HeteroSim: TIMELY congestion control (RTT gradient).
 */
#include "timely.h"

#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Timely");
NS_OBJECT_ENSURE_REGISTERED(Timely);

TypeId
Timely::GetTypeId()
{
    static TypeId tid = TypeId("ns3::Timely")
                            .SetParent<RdmaCongestionControl>()
                            .SetGroupName("Heterosim")
                            .AddConstructor<Timely>()
                            .AddAttribute("Alpha",
                                          "EWMA weight of the RTT difference",
                                          DoubleValue(0.875),
                                          MakeDoubleAccessor(&Timely::m_a),
                                          MakeDoubleChecker<double>(0.0, 1.0))
                            .AddAttribute("Beta",
                                          "Multiplicative decrease factor",
                                          DoubleValue(0.8),
                                          MakeDoubleAccessor(&Timely::m_beta),
                                          MakeDoubleChecker<double>(0.0, 1.0))
                            .AddAttribute("TLow",
                                          "RTT below which the rate always increases",
                                          TimeValue(MicroSeconds(50)),
                                          MakeTimeAccessor(&Timely::m_tLow),
                                          MakeTimeChecker())
                            .AddAttribute("THigh",
                                          "RTT above which the rate always decreases",
                                          TimeValue(MicroSeconds(500)),
                                          MakeTimeAccessor(&Timely::m_tHigh),
                                          MakeTimeChecker())
                            .AddAttribute("MinRtt",
                                          "RTT normalising the gradient",
                                          TimeValue(MicroSeconds(20)),
                                          MakeTimeAccessor(&Timely::m_minRtt),
                                          MakeTimeChecker(NanoSeconds(1)))
                            .AddAttribute("RateAi",
                                          "Additive increase step",
                                          DataRateValue(DataRate("100Mbps")),
                                          MakeDataRateAccessor(&Timely::m_rai),
                                          MakeDataRateChecker())
                            .AddAttribute("RateHai",
                                          "Hyper increase step",
                                          DataRateValue(DataRate("500Mbps")),
                                          MakeDataRateAccessor(&Timely::m_rhai),
                                          MakeDataRateChecker())
                            .AddAttribute("HaiThreshold",
                                          "Consecutive increase rounds before hyper steps",
                                          UintegerValue(5),
                                          MakeUintegerAccessor(&Timely::m_haiAfter),
                                          MakeUintegerChecker<uint32_t>())
                            .AddAttribute("MinRate",
                                          "Rate floor",
                                          DataRateValue(DataRate("100Mbps")),
                                          MakeDataRateAccessor(&Timely::m_minRate),
                                          MakeDataRateChecker());
    return tid;
}

Timely::Timely()
{
    NS_LOG_FUNCTION(this);
}

void
Timely::Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes)
{
    RdmaCongestionControl::Start(lineRateBps, baseRtt, mtuBytes);
    m_havePrev = false;
    m_rttDiff = 0;
    m_incStage = 0;
    m_lastUpdateSeq = 0;
}

void
Timely::ReceiveAck(const RdmaAckInfo& info)
{
    if (info.ackSeq <= m_lastUpdateSeq || info.rttNs <= 0)
    {
        return;
    }
    m_lastUpdateSeq = info.sndNxt;
    double rtt = static_cast<double>(info.rttNs) * 1e-9;
    if (!m_havePrev)
    {
        m_prevRtt = rtt;
        m_havePrev = true;
        return;
    }
    double diff = rtt - m_prevRtt;
    m_prevRtt = rtt;
    m_rttDiff = (1.0 - m_a) * m_rttDiff + m_a * diff;
    double gradient = m_rttDiff / m_minRtt.GetSeconds();
    bool increase = false;
    if (rtt < m_tLow.GetSeconds())
    {
        increase = true;
    }
    else if (rtt > m_tHigh.GetSeconds())
    {
        m_incStage = 0;
        SetRate(m_rate * (1.0 - m_beta * (1.0 - m_tHigh.GetSeconds() / rtt)));
    }
    else if (gradient <= 0)
    {
        increase = true;
    }
    else
    {
        m_incStage = 0;
        SetRate(m_rate * std::max(0.0, 1.0 - m_beta * gradient));
    }
    if (increase)
    {
        ++m_incStage;
        double step = m_incStage >= m_haiAfter ? static_cast<double>(m_rhai.GetBitRate())
                                               : static_cast<double>(m_rai.GetBitRate());
        SetRate(m_rate + step);
    }
}

} // namespace ns3
