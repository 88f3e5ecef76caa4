/*
 * HeteroSim: NSCC, the sender-based congestion control of the Ultra Ethernet transport (UET).
 */
#include "nscc.h"

#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/simulator.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Nscc");
NS_OBJECT_ENSURE_REGISTERED(Nscc);

// Defaults: the UEC NSCC reference simulator (htsim uec.cpp, UecSrc::initNsccParams), whose
// constants are those of the UET 1.0 specification's reference network (100 Gb/s, 12 us).
TypeId
Nscc::GetTypeId()
{
    // one entry per attribute and trace source: a table, long because NSCC has many tunables
    static TypeId tid =
        TypeId("ns3::Nscc")
            .SetParent<RdmaCongestionControl>()
            .SetGroupName("Heterosim")
            .AddConstructor<Nscc>()
            .AddAttribute("TargetDelay",
                          "Target queueing delay (RTT - base RTT) separating the increase and "
                          "decrease quadrants (htsim uec.cpp _target_Qdelay: 6 us)",
                          TimeValue(MicroSeconds(6)),
                          MakeTimeAccessor(&Nscc::m_target),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("Gamma",
                          "Multiplicative decrease gain: W *= 1 - Gamma (d - T) / d (htsim "
                          "uec.cpp _gamma: 0.8)",
                          DoubleValue(0.8),
                          MakeDoubleAccessor(&Nscc::m_gamma),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("MaxDecrease",
                          "Smallest factor one multiplicative decrease applies (htsim uec.cpp "
                          "multiplicative_decrease: 0.5)",
                          DoubleValue(0.5),
                          MakeDoubleAccessor(&Nscc::m_maxDecrease),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("FairIncrease",
                          "Fair increase, MTUs per window of acknowledged bytes on the "
                          "reference network, scaled by BDP / reference BDP (htsim uec.cpp "
                          "_fi = 5 a)",
                          DoubleValue(5.0),
                          MakeDoubleAccessor(&Nscc::m_fairIncrease),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("Eta",
                          "Additive probe, MTUs per AdjustPeriod on the reference network, "
                          "scaled like FairIncrease (htsim uec.cpp _eta = 0.15 a MTU)",
                          DoubleValue(0.15),
                          MakeDoubleAccessor(&Nscc::m_eta),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("FastIncreaseGain",
                          "Fast increase: window growth as a fraction of acknowledged bytes on "
                          "the reference network, scaled like FairIncrease (htsim uec.cpp "
                          "_fi_scale = 0.25 a)",
                          DoubleValue(0.25),
                          MakeDoubleAccessor(&Nscc::m_fastGain),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("FastIncreaseDelay",
                          "Fast increase once a whole window is acknowledged below this delay "
                          "(htsim uec.cpp fast_increase: 1 us)",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&Nscc::m_fastDelay),
                          MakeTimeChecker())
            .AddAttribute("DelayGain",
                          "EWMA gain of the smoothed queueing delay (htsim uec.cpp "
                          "_delay_alpha: 0.0125)",
                          DoubleValue(0.0125),
                          MakeDoubleAccessor(&Nscc::m_delayGain),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("QuickAdaptFactor",
                          "Quick adapt when the smoothed delay exceeds this many TargetDelay "
                          "(htsim uec.cpp _qa_threshold = 4 x target)",
                          DoubleValue(4.0),
                          MakeDoubleAccessor(&Nscc::m_qaFactor),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("MaxWindow",
                          "Window cap (and initial window), bandwidth-delay products (htsim "
                          "uec.cpp initNscc: _maxwnd = 1.5 BDP)",
                          DoubleValue(1.5),
                          MakeDoubleAccessor(&Nscc::m_maxWindow),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("AdjustPeriod",
                          "Period of the Eta probe (htsim uec.cpp _adjust_period_threshold: "
                          "the reference RTT, 12 us)",
                          TimeValue(MicroSeconds(12)),
                          MakeTimeAccessor(&Nscc::m_adjustPeriod),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("ReferenceRate",
                          "Link rate of the reference network the constants are given for "
                          "(htsim uec.cpp _reference_network_linkspeed: 100 Gb/s)",
                          DataRateValue(DataRate("100Gbps")),
                          MakeDataRateAccessor(&Nscc::m_referenceRate),
                          MakeDataRateChecker())
            .AddAttribute("ReferenceRtt",
                          "RTT of the reference network (htsim uec.cpp "
                          "_reference_network_rtt: 12 us)",
                          TimeValue(MicroSeconds(12)),
                          MakeTimeAccessor(&Nscc::m_referenceRtt),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddTraceSource("Cwnd",
                            "Congestion window, bytes",
                            MakeTraceSourceAccessor(&Nscc::m_cwnd),
                            "ns3::TracedValueCallback::Double");
    return tid;
}

Nscc::Nscc()
{
    NS_LOG_FUNCTION(this);
}

void
Nscc::Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes)
{
    RdmaCongestionControl::Start(lineRateBps, baseRtt, mtuBytes);
    m_baseRttNs = std::max(1.0, static_cast<double>(baseRtt.GetNanoSeconds()));
    m_bdp = lineRateBps / 8.0 * m_baseRttNs * 1e-9;
    double refBdp =
        static_cast<double>(m_referenceRate.GetBitRate()) / 8.0 * m_referenceRtt.GetSeconds();
    m_scaleA = m_bdp / refBdp;
    double targetNs = static_cast<double>(m_target.GetNanoSeconds());
    m_scaleB = targetNs / static_cast<double>(m_referenceRtt.GetNanoSeconds());
    m_alpha = 4.0 * m_scaleA * m_scaleB * mtuBytes / targetNs;
    m_maxWnd = std::max(static_cast<double>(mtuBytes), m_maxWindow * m_bdp);
    m_cwnd = m_maxWnd;
    m_avgDelayNs = 0;
    m_inc = 0;
    m_fastCount = 0;
    m_fast = false;
    int64_t now = Simulator::Now().GetNanoSeconds();
    m_lastDecNs = -1;
    m_lastEtaNs = now;
    m_qaEndNs = 0;
    m_achieved = 0;
    m_lossSeen = false;
    m_ignoreUntil = 0;
    Publish();
}

bool
Nscc::QuickAdapt(int64_t nowNs, uint64_t sndNxt)
{
    if (nowNs <= m_qaEndNs)
    {
        return false;
    }
    double targetNs = static_cast<double>(m_target.GetNanoSeconds());
    bool adapted = false;
    if (m_qaEndNs != 0 && (m_lossSeen || m_avgDelayNs > m_qaFactor * targetNs) &&
        m_cwnd > m_achieved)
    {
        m_cwnd = std::max(m_achieved, static_cast<double>(m_mtu));
        m_ignoreUntil = sndNxt; // the data in flight saw the old window's queue
        m_lossSeen = false;
        ++m_quickAdapts;
        adapted = true;
    }
    m_achieved = 0;
    m_qaEndNs = nowNs + static_cast<int64_t>(m_baseRttNs + targetNs);
    return adapted;
}

void
Nscc::ReceiveAck(const RdmaAckInfo& info)
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    auto acked = static_cast<double>(info.newlyAcked);
    m_achieved += acked;
    double rtt = static_cast<double>(info.rttNs);
    if (rtt > 0 && rtt < m_baseRttNs)
    {
        m_baseRttNs = rtt; // a sample below the computed empty-path RTT
    }
    double delay = std::max(0.0, rtt - m_baseRttNs);
    m_avgDelayNs = m_delayGain * delay + (1.0 - m_delayGain) * m_avgDelayNs;
    if (info.ecnEcho && info.ackSeq < m_ignoreUntil)
    {
        return; // marks left by the queue the quick adapt already drained
    }
    if (QuickAdapt(now, info.sndNxt))
    {
        Publish();
        return;
    }
    double targetNs = static_cast<double>(m_target.GetNanoSeconds());
    double mtu = m_mtu;
    double fair = m_fairIncrease * m_scaleA * mtu * acked;
    if (!info.ecnEcho && delay < targetNs)
    {
        // proportional increase, after fast increase when the path has been idle for a window
        if (delay < static_cast<double>(m_fastDelay.GetNanoSeconds()))
        {
            m_fastCount += acked;
            m_fast = m_fast || m_fastCount > m_cwnd;
        }
        else
        {
            m_fastCount = 0;
            m_fast = false;
        }
        if (m_fast)
        {
            m_cwnd = m_cwnd + acked * m_fastGain * m_scaleA;
        }
        else
        {
            m_inc += m_alpha * (targetNs - delay) * acked + fair;
        }
    }
    else if (!info.ecnEcho)
    {
        m_inc += fair;
    }
    else if (delay >= targetNs)
    {
        m_fast = false;
        m_fastCount = 0;
        if (m_avgDelayNs > targetNs &&
            (m_lastDecNs < 0 || static_cast<double>(now - m_lastDecNs) > m_baseRttNs))
        {
            double factor = 1.0 - m_gamma * (m_avgDelayNs - targetNs) / m_avgDelayNs;
            m_cwnd = m_cwnd * std::max(factor, m_maxDecrease);
            m_lastDecNs = now;
            ++m_decreases;
        }
    }
    // ECN with a short delay: congestion on this packet's path, not at the endpoint; the
    // window stays and the next packets take other entropies
    if (m_inc > 0)
    {
        m_cwnd = m_cwnd + m_inc / m_cwnd;
        m_inc = 0;
    }
    if (now - m_lastEtaNs > m_adjustPeriod.GetNanoSeconds())
    {
        m_cwnd = m_cwnd + m_eta * m_scaleA * mtu;
        m_lastEtaNs = now;
    }
    Publish();
}

void
Nscc::ReceiveLoss(uint32_t bytes)
{
    m_cwnd = m_cwnd - static_cast<double>(bytes);
    m_lossSeen = true;
    Publish();
}

void
Nscc::Publish()
{
    m_cwnd = std::clamp(m_cwnd.Get(), static_cast<double>(m_mtu), m_maxWnd);
    m_window = static_cast<uint64_t>(m_cwnd.Get());
}

double
Nscc::GetCwnd() const
{
    return m_cwnd;
}

double
Nscc::GetAvgDelayNs() const
{
    return m_avgDelayNs;
}

uint64_t
Nscc::GetDecreases() const
{
    return m_decreases;
}

uint64_t
Nscc::GetQuickAdapts() const
{
    return m_quickAdapts;
}

} // namespace ns3
