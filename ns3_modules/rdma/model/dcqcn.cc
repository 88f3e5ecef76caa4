/*
 * HeteroSim: DCQCN reaction point (Mellanox ConnectX variant).
 */
#include "dcqcn.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/shiftable-scheduler.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Dcqcn");
NS_OBJECT_ENSURE_REGISTERED(Dcqcn);

TypeId
Dcqcn::GetTypeId()
{
    // one entry per attribute: a table, long because DCQCN has many tunables
    static TypeId tid =
        TypeId("ns3::Dcqcn")
            .SetParent<RdmaCongestionControl>()
            .SetGroupName("Heterosim")
            .AddConstructor<Dcqcn>()
            .AddAttribute("AlphaUpdateInterval",
                          "Period of the alpha update (Mellanox dce_tcp_rtt)",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&Dcqcn::m_alphaInterval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RateDecreaseInterval",
                          "Minimum time between rate cuts (Mellanox rate_reduce_monitor_period)",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&Dcqcn::m_decreaseInterval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("IncreaseTimer",
                          "Rate increase timer period (Mellanox rpg_time_reset)",
                          TimeValue(MicroSeconds(300)),
                          MakeTimeAccessor(&Dcqcn::m_increaseTimer),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("ByteCounter",
                          "Payload bytes per byte-counter increase event, bytes (Mellanox "
                          "rpg_byte_reset); 0 = no byte counter, increase by the timer only "
                          "(the HPCC simulator's DCQCN)",
                          UintegerValue(32767),
                          MakeUintegerAccessor(&Dcqcn::m_byteCounter),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("G",
                          "Alpha EWMA gain g (Mellanox dce_tcp_g = 1019 -> 5/1024)",
                          DoubleValue(5.0 / 1024.0),
                          MakeDoubleAccessor(&Dcqcn::m_g),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("InitialAlpha",
                          "Alpha before the first CNP (Mellanox initial_alpha_value 1023/1024)",
                          DoubleValue(1023.0 / 1024.0),
                          MakeDoubleAccessor(&Dcqcn::m_initialAlpha),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("FastRecoveryThreshold",
                          "Increase events F before leaving fast recovery (Mellanox "
                          "rpg_threshold)",
                          UintegerValue(1),
                          MakeUintegerAccessor(&Dcqcn::m_f),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("RateAi",
                          "Additive increase step (Mellanox rpg_ai_rate); 0 = RateAiFraction x "
                          "the line rate",
                          DataRateValue(DataRate("5Mbps")),
                          MakeDataRateAccessor(&Dcqcn::m_rai),
                          MakeDataRateChecker())
            .AddAttribute("RateHai",
                          "Hyper increase step (Mellanox rpg_hai_rate); 0 = RateHaiFraction x "
                          "the line rate",
                          DataRateValue(DataRate("50Mbps")),
                          MakeDataRateAccessor(&Dcqcn::m_rhai),
                          MakeDataRateChecker())
            .AddAttribute("RateAiFraction",
                          "Additive increase step as a fraction of the line rate, used when "
                          "RateAi is 0: 5 Mb/s per 25 Gb/s, the HPCC simulator's rule RATE_AI = "
                          "5 * bw / 25 Mb/s (docs/network_models.md §1.6, S3 run.py)",
                          DoubleValue(5e6 / 25e9),
                          MakeDoubleAccessor(&Dcqcn::m_raiFraction),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("RateHaiFraction",
                          "Hyper increase step as a fraction of the line rate, used when "
                          "RateHai is 0: 50 Mb/s per 25 Gb/s, the HPCC simulator's rule "
                          "RATE_HAI = 50 * bw / 25 Mb/s (docs/network_models.md §1.6, S3 run.py)",
                          DoubleValue(50e6 / 25e9),
                          MakeDoubleAccessor(&Dcqcn::m_rhaiFraction),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("MinRate",
                          "Rate floor (Mellanox rpg_min_rate)",
                          DataRateValue(DataRate("1Mbps")),
                          MakeDataRateAccessor(&Dcqcn::m_minRate),
                          MakeDataRateChecker())
            .AddAttribute("MinDecreaseFactor",
                          "Smallest new/old rate ratio of one cut (Mellanox rpg_min_dec_fac)",
                          DoubleValue(0.5),
                          MakeDoubleAccessor(&Dcqcn::m_minDecFactor),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("ClampTargetRate",
                          "Set Rt <- Rc on every cut (Mellanox clamp_tgt_rate)",
                          BooleanValue(false),
                          MakeBooleanAccessor(&Dcqcn::m_clampTarget),
                          MakeBooleanChecker())
            .AddAttribute("ClampTargetRateAfterTimeInc",
                          "Set Rt <- Rc on a cut only after an increase event (Mellanox "
                          "clamp_tgt_rate_after_time_inc)",
                          BooleanValue(true),
                          MakeBooleanAccessor(&Dcqcn::m_clampAfterInc),
                          MakeBooleanChecker())
            .AddAttribute("RateOnFirstCnp",
                          "Rc <- factor * Rc at the first CNP; 0 = not used (Mellanox "
                          "rate_to_set_on_first_cnp)",
                          DoubleValue(0.0),
                          MakeDoubleAccessor(&Dcqcn::m_rateOnFirstCnp),
                          MakeDoubleChecker<double>(0.0, 1.0));
    return tid;
}

Dcqcn::Dcqcn()
{
    NS_LOG_FUNCTION(this);
}

void
Dcqcn::Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes)
{
    RdmaCongestionControl::Start(lineRateBps, baseRtt, mtuBytes);
    m_raiBps = m_rai.GetBitRate() > 0 ? static_cast<double>(m_rai.GetBitRate())
                                      : m_raiFraction * lineRateBps;
    m_rhaiBps = m_rhai.GetBitRate() > 0 ? static_cast<double>(m_rhai.GetBitRate())
                                        : m_rhaiFraction * lineRateBps;
    m_rt = lineRateBps;
    m_alpha = m_initialAlpha;
    m_started = false;
    m_alphaPeriod = 0;
    m_cnpInPeriod = false;
    m_cnpPending = false;
    m_increasedSinceCut = false;
    m_timerStage = 0;
    m_byteStage = 0;
    m_bytes = 0;
}

void
Dcqcn::Stop()
{
    m_decreaseEvent.Cancel();
    m_timerEvent.Cancel();
}

bool
Dcqcn::UsesCnp() const
{
    return true;
}

void
Dcqcn::UpdateAlpha()
{
    if (!m_started)
    {
        return;
    }
    int64_t elapsed = Simulator::Now().GetNanoSeconds() - m_alphaOriginNs;
    uint64_t ended = static_cast<uint64_t>(elapsed / m_alphaInterval.GetNanoSeconds());
    if (ended <= m_alphaPeriod)
    {
        return;
    }
    uint64_t periods = ended - m_alphaPeriod;
    if (m_cnpInPeriod)
    {
        m_alpha = (1.0 - m_g) * m_alpha + m_g;
        --periods;
        m_cnpInPeriod = false;
    }
    if (periods > 0)
    {
        m_alpha *= std::pow(1.0 - m_g, static_cast<double>(periods));
    }
    m_alphaPeriod = ended;
}

double
Dcqcn::GetAlpha()
{
    UpdateAlpha();
    return m_alpha;
}

double
Dcqcn::GetTargetRate() const
{
    return m_rt;
}

uint32_t
Dcqcn::GetTimerStage() const
{
    return m_timerStage;
}

uint32_t
Dcqcn::GetByteStage() const
{
    return m_byteStage;
}

uint64_t
Dcqcn::GetCnpCount() const
{
    return m_cnps;
}

double
Dcqcn::GetRateAi() const
{
    return m_raiBps;
}

double
Dcqcn::GetRateHai() const
{
    return m_rhaiBps;
}

void
Dcqcn::ReceiveCnp()
{
    NS_LOG_FUNCTION(this);
    ++m_cnps;
    if (!m_started)
    {
        m_started = true;
        m_alphaOriginNs = Simulator::Now().GetNanoSeconds();
        m_alphaPeriod = 0;
        if (m_rateOnFirstCnp > 0.0)
        {
            m_rt = m_rate * m_rateOnFirstCnp;
            SetRate(m_rt);
        }
    }
    UpdateAlpha();
    m_cnpInPeriod = true;
    if (m_decreaseEvent.IsPending())
    {
        m_cnpPending = true;
        return;
    }
    Decrease();
    m_decreaseEvent = Simulator::Schedule(m_decreaseInterval, &Dcqcn::DecreaseCheck, this);
}

void
Dcqcn::DecreaseCheck()
{
    if (!m_cnpPending)
    {
        return; // the next CNP cuts at once
    }
    m_cnpPending = false;
    UpdateAlpha();
    Decrease();
    m_decreaseEvent = Simulator::Schedule(m_decreaseInterval, &Dcqcn::DecreaseCheck, this);
}

void
Dcqcn::Decrease()
{
    if (m_clampTarget || (m_clampAfterInc && m_increasedSinceCut))
    {
        m_rt = m_rate;
    }
    double cut = m_rate * (1.0 - m_alpha / 2.0);
    double floor = m_rate * m_minDecFactor;
    SetRate(std::max(cut, floor));
    m_increasedSinceCut = false;
    m_timerStage = 0;
    m_byteStage = 0;
    m_bytes = 0;
    m_timerEvent.Cancel();
    m_timerEvent = Simulator::Schedule(m_increaseTimer, &Dcqcn::TimerExpired, this);
}

void
Dcqcn::TimerExpired()
{
    ++m_timerStage;
    Increase();
    if (m_rate < m_lineRate)
    {
        m_timerEvent = Simulator::Schedule(m_increaseTimer, &Dcqcn::TimerExpired, this);
    }
}

void
Dcqcn::ShiftClock(int64_t deltaNs, std::vector<const EventImpl*>* moved)
{
    ShiftEventId(m_decreaseEvent, deltaNs, moved);
    ShiftEventId(m_timerEvent, deltaNs, moved);
}

void
Dcqcn::AdvanceSkipped(int64_t deltaNs, uint64_t bytes)
{
    if (m_timerEvent.IsPending())
    {
        // The timer was due x after the skip began (it now stands at x + delta): in a packet
        // run it would have fired at x, x + T, ... inside the skipped interval.
        int64_t now = Simulator::Now().GetNanoSeconds();
        int64_t period = m_increaseTimer.GetNanoSeconds();
        int64_t x = static_cast<int64_t>(m_timerEvent.GetTs()) - now - deltaNs;
        int64_t due = x;
        while (due <= deltaNs && m_rate < m_lineRate)
        {
            ++m_timerStage;
            Increase();
            due += period;
        }
        m_timerEvent.Cancel();
        if (m_rate < m_lineRate)
        {
            m_timerEvent = Simulator::Schedule(NanoSeconds(due), &Dcqcn::TimerExpired, this);
        }
    }
    if (m_byteCounter > 0 && m_rate < m_lineRate)
    {
        m_bytes += bytes;
        while (m_bytes >= m_byteCounter && m_rate < m_lineRate)
        {
            m_bytes -= m_byteCounter;
            ++m_byteStage;
            Increase();
        }
    }
}

void
Dcqcn::HoldSkipped(int64_t deltaNs)
{
    // alpha's update periods count from m_alphaOriginNs: the skipped interval adds none
    if (m_started)
    {
        m_alphaOriginNs += deltaNs;
    }
}

void
Dcqcn::OnSend(uint32_t bytes)
{
    if (m_byteCounter == 0 || m_rate >= m_lineRate)
    {
        return;
    }
    m_bytes += bytes;
    while (m_bytes >= m_byteCounter)
    {
        m_bytes -= m_byteCounter;
        ++m_byteStage;
        Increase();
    }
}

void
Dcqcn::Increase()
{
    m_increasedSinceCut = true;
    if (m_byteCounter == 0)
    {
        // timer only, staged as the HPCC simulator does: s = timer events before this one
        uint32_t s = m_timerStage - 1;
        if (s == m_f)
        {
            m_rt += m_raiBps;
        }
        else if (s > m_f)
        {
            m_rt += m_rhaiBps;
        }
    }
    else
    {
        uint32_t lo = std::min(m_timerStage, m_byteStage);
        uint32_t hi = std::max(m_timerStage, m_byteStage);
        if (hi < m_f)
        {
            // fast recovery: Rt unchanged
        }
        else if (lo < m_f)
        {
            m_rt += m_raiBps;
        }
        else
        {
            m_rt += static_cast<double>(lo - m_f + 1) * m_rhaiBps;
        }
    }
    m_rt = std::min(m_rt, m_lineRate);
    SetRate((m_rt + m_rate) / 2.0);
    if (m_rate >= m_lineRate)
    {
        m_timerEvent.Cancel();
    }
}

} // namespace ns3
