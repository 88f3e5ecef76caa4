/*
 * HeteroSim: DCTCP-style rate control for RDMA (ECN echo in ACKs).
 */
#include "dctcp.h"

#include "ns3/double.h"
#include "ns3/log.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Dctcp");
NS_OBJECT_ENSURE_REGISTERED(Dctcp);

TypeId
Dctcp::GetTypeId()
{
    static TypeId tid = TypeId("ns3::Dctcp")
                            .SetParent<RdmaCongestionControl>()
                            .SetGroupName("Heterosim")
                            .AddConstructor<Dctcp>()
                            .AddAttribute("G",
                                          "Alpha EWMA gain (RFC 8257 default 1/16)",
                                          DoubleValue(1.0 / 16.0),
                                          MakeDoubleAccessor(&Dctcp::m_g),
                                          MakeDoubleChecker<double>(0.0, 1.0))
                            .AddAttribute("InitialAlpha",
                                          "Alpha at start (RFC 8257: 1)",
                                          DoubleValue(1.0),
                                          MakeDoubleAccessor(&Dctcp::m_initialAlpha),
                                          MakeDoubleChecker<double>(0.0, 1.0))
                            .AddAttribute("RateAi",
                                          "Rate added per window without congestion",
                                          DataRateValue(DataRate("615Mbps")),
                                          MakeDataRateAccessor(&Dctcp::m_rai),
                                          MakeDataRateChecker())
                            .AddAttribute("MinRate",
                                          "Rate floor",
                                          DataRateValue(DataRate("100Mbps")),
                                          MakeDataRateAccessor(&Dctcp::m_minRate),
                                          MakeDataRateChecker());
    return tid;
}

Dctcp::Dctcp()
{
    NS_LOG_FUNCTION(this);
}

void
Dctcp::Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes)
{
    RdmaCongestionControl::Start(lineRateBps, baseRtt, mtuBytes);
    m_alpha = m_initialAlpha;
    m_ackedBytes = 0;
    m_markedBytes = 0;
    m_windowEnd = 0;
    m_cwr = false;
    m_cwrEnd = 0;
}

double
Dctcp::GetAlpha() const
{
    return m_alpha;
}

void
Dctcp::ReceiveAck(const RdmaAckInfo& info)
{
    m_ackedBytes += info.newlyAcked;
    if (info.ecnEcho)
    {
        m_markedBytes += info.newlyAcked;
    }
    if (m_cwr && info.ackSeq > m_cwrEnd)
    {
        m_cwr = false;
    }
    if (info.ecnEcho && !m_cwr)
    {
        m_cwr = true;
        m_cwrEnd = info.sndNxt;
        SetRate(m_rate * (1.0 - m_alpha / 2.0));
    }
    if (info.ackSeq > m_windowEnd)
    {
        if (m_ackedBytes > 0)
        {
            double f = static_cast<double>(m_markedBytes) / static_cast<double>(m_ackedBytes);
            m_alpha = (1.0 - m_g) * m_alpha + m_g * f;
        }
        if (!m_cwr)
        {
            SetRate(m_rate + static_cast<double>(m_rai.GetBitRate()));
        }
        m_ackedBytes = 0;
        m_markedBytes = 0;
        m_windowEnd = info.sndNxt;
    }
}

} // namespace ns3
