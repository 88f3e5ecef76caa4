/*
 * HeteroSim: steady-state fast-forward of the packet network.
 */
#include "packet-fast-forward.h"

#include "packet-network.h"

#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/qbb-device-event.h"
#include "ns3/shiftable-scheduler.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PacketFastForward");
NS_OBJECT_ENSURE_REGISTERED(PacketFastForward);

namespace
{
enum Stat
{
    EPISODES = 0,
    SKIPPED_NS,
    SKIPPED_BYTES,
    CHECKS,
    NOT_SETTLED,
    CONGESTION,
    TOO_CLOSE,
    AFTER_FAULT,
    UNSUPPORTED
};

/** \return the loss / congestion signature of a queue pair */
uint64_t
QpSignature(const RdmaQueuePair* qp)
{
    return qp->retransmits + qp->timeouts + qp->nacks + qp->cnps;
}
} // namespace

TypeId
PacketFastForward::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::PacketFastForward")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<PacketFastForward>()
            .AddAttribute("CheckInterval",
                          "Length of one observation window (and period of the checks)",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&PacketFastForward::m_interval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("StableWindows",
                          "Settled windows in a row before a skip; the settled rates are the "
                          "means over them",
                          UintegerValue(3),
                          MakeUintegerAccessor(&PacketFastForward::m_windows),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("RateTolerance",
                          "A queue pair is settled when its acknowledged bytes in a window "
                          "differ from the previous window's by at most this fraction (plus "
                          "two packets)",
                          DoubleValue(0.02),
                          MakeDoubleAccessor(&PacketFastForward::m_rateTol),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("RateMargin",
                          "A queue pair whose congestion-control rate is below its line rate "
                          "counts as settled only if that rate exceeds its measured payload "
                          "throughput by more than this fraction (then pacing does not bind)",
                          DoubleValue(0.1),
                          MakeDoubleAccessor(&PacketFastForward::m_rateMargin),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("QueueTolerance",
                          "A port is settled when its queue moved by at most this many bytes "
                          "(or RateTolerance of the queue) between two checks",
                          UintegerValue(16384),
                          MakeUintegerAccessor(&PacketFastForward::m_queueTol),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("MinJump",
                          "Shortest skip worth taking when it would end before a predicted "
                          "message end (a skip stopped by an event outside the fabric takes any "
                          "length: it goes on after that event)",
                          TimeValue(MicroSeconds(100)),
                          MakeTimeAccessor(&PacketFastForward::m_minJump),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("Guard",
                          "Time before the first predicted message end that is always "
                          "simulated packet by packet",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&PacketFastForward::m_guard),
                          MakeTimeChecker())
            .AddTraceSource("Skip",
                            "An interval was skipped (start ns, length ns, payload bytes)",
                            MakeTraceSourceAccessor(&PacketFastForward::m_skipTrace),
                            "ns3::PacketFastForward::SkipTracedCallback");
    return tid;
}

PacketFastForward::PacketFastForward()
{
    NS_LOG_FUNCTION(this);
}

PacketFastForward::~PacketFastForward()
{
    NS_LOG_FUNCTION(this);
}

void
PacketFastForward::Attach(PacketNetwork* net, bool supported)
{
    m_net = net;
    m_supported = supported;
    m_stats[UNSUPPORTED] = supported ? 0 : 1;
    if (supported)
    {
        ObjectFactory factory;
        factory.SetTypeId("ns3::ShiftableScheduler");
        Simulator::SetScheduler(factory);
    }
}

void
PacketFastForward::QueuePairAdded(uint32_t slot)
{
    if (!m_supported)
    {
        return;
    }
    m_live.push_back(slot);
    m_changed = true;
    if (!m_running)
    {
        ScheduleCheck(m_interval.GetNanoSeconds());
    }
}

void
PacketFastForward::Changed()
{
    m_changed = true;
}

void
PacketFastForward::Fault()
{
    m_fault = true;
    m_changed = true;
}

void
PacketFastForward::ScheduleCheck(int64_t delayNs)
{
    m_running = true;
    m_check = Simulator::Schedule(NanoSeconds(delayNs), &PacketFastForward::Check, this);
}

void
PacketFastForward::Check()
{
    m_running = false;
    int64_t now = Simulator::Now().GetNanoSeconds();
    ++m_stats[CHECKS];
    const auto& qps = m_net->m_qps;
    bool changed = m_changed;
    bool fault = m_fault;
    m_changed = false;
    m_fault = false;
    std::size_t keep = 0;
    for (uint32_t slot : m_live)
    {
        if (!qps[slot]->IsFinished())
        {
            m_live[keep++] = slot;
        }
    }
    if (keep != m_live.size())
    {
        changed = true;
        m_live.resize(keep);
    }
    if (m_live.empty())
    {
        m_havePrev = false;
        m_stable = 0;
        m_chain = false;
        return; // restarted by the next queue pair
    }
    if (m_chain)
    {
        // The previous skip stopped at an event that was not the fabric's (a compute task, a
        // flow of the intra-host model, ...). If it changed nothing here, the settled rates
        // still hold: skip on at once.
        m_chain = false;
        if (!changed && !fault)
        {
            int64_t more = TryJump(now, true);
            if (more > 0)
            {
                m_chainRetries = 0;
                ScheduleCheck(m_chain ? more : more + m_interval.GetNanoSeconds());
                return;
            }
            if (m_chainRetries < 3)
            {
                // something else is due now (scheduled by that event): look again after it
                ++m_chainRetries;
                m_chain = true;
                ScheduleCheck(1);
                return;
            }
        }
        m_chainRetries = 0;
        m_havePrev = false;
        m_stable = 0;
    }

    std::size_t n = m_live.size();
    std::size_t nPorts = m_net->m_portDev.size();
    std::size_t nNodes = m_net->m_nics.size();
    std::vector<uint64_t> una(n);
    std::vector<int64_t> prog(n);
    std::vector<uint64_t> sig(n);
    std::vector<uint64_t> win(n, 0);
    for (std::size_t i = 0; i < n; ++i)
    {
        const RdmaQueuePair* qp = qps[m_live[i]].get();
        una[i] = qp->sndUna;
        prog[i] = qp->lastProgressNs;
        sig[i] = QpSignature(qp);
    }
    std::vector<uint64_t> tx(nPorts);
    std::vector<uint64_t> frames(nPorts);
    std::vector<uint64_t> queue(nPorts);
    std::vector<uint64_t> psig(nPorts);
    for (std::size_t p = 0; p < nPorts; ++p)
    {
        const QbbNetDevice* dev = PeekPointer(m_net->m_portDev[p]);
        tx[p] = dev->GetTxBytes();
        frames[p] = dev->GetTxFrames();
        queue[p] = dev->GetTotalQueueBytes();
        psig[p] = dev->GetEcnMarks() + dev->GetPauseSent() + dev->GetDrops();
    }
    std::vector<uint64_t> acks(nNodes, 0);
    for (std::size_t v = 0; v < nNodes; ++v)
    {
        if (m_net->m_nics[v])
        {
            acks[v] = m_net->m_nics[v]->GetAcksSent();
        }
    }

    // Is the window since the previous snapshot settled?
    int reason = -1;
    if (fault)
    {
        reason = AFTER_FAULT;
    }
    else if (changed || !m_havePrev)
    {
        reason = NOT_SETTLED;
    }
    else
    {
        uint64_t mtu2 = 2ULL * m_net->m_mtu;
        for (std::size_t i = 0; i < n && reason < 0; ++i)
        {
            const RdmaQueuePair* qp = qps[m_live[i]].get();
            if (sig[i] != m_prevSig[i])
            {
                reason = CONGESTION;
                break;
            }
            win[i] = una[i] - m_prevUna[i];
            // A rate controller below its line rate that paces the queue pair (its rate
            // within RateMargin of what the queue pair gets) sets the throughput while it
            // recovers: not settled, however slowly it moves. One whose rate is clear of
            // the queue pair's share only rises without CNPs and changes nothing.
            double got = static_cast<double>(win[i]) * 8e9 / static_cast<double>(now - m_prevNs);
            bool paced =
                qp->cc->GetRate() < qp->lineRate && qp->cc->GetRate() < (1.0 + m_rateMargin) * got;
            if (!qp->active || qp->posted != qp->size || qp->sendEnds.size() != 1 ||
                qp->recvEnds.size() != 1 || win[i] == 0 || paced)
            {
                reason = NOT_SETTLED;
                break;
            }
            if (m_stable > 0)
            {
                uint64_t hi = std::max(win[i], m_prevWin[i]);
                uint64_t lo = std::min(win[i], m_prevWin[i]);
                if (static_cast<double>(hi - lo) > m_rateTol * static_cast<double>(hi) + mtu2)
                {
                    reason = NOT_SETTLED;
                }
            }
        }
        for (std::size_t p = 0; p < nPorts && reason < 0; ++p)
        {
            if (psig[p] != m_portSig[p])
            {
                reason = CONGESTION;
                break;
            }
            uint64_t hi = std::max(queue[p], m_portQueue[p]);
            uint64_t lo = std::min(queue[p], m_portQueue[p]);
            if (hi - lo >
                std::max<uint64_t>(m_queueTol,
                                   static_cast<uint64_t>(m_rateTol * static_cast<double>(hi))))
            {
                reason = NOT_SETTLED;
            }
        }
    }
    if (reason >= 0)
    {
        ++m_stats[reason];
        m_stable = 0;
    }
    else
    {
        if (m_stable == 0)
        {
            m_refNs = m_prevNs;
            m_refUna = m_prevUna;
            m_refProg = m_prevProg;
            m_refTx = m_portTx;
            m_refFrames = m_portFrames;
            m_refAcks = m_nicAcks;
        }
        ++m_stable;
    }
    m_prevNs = now;
    m_prevUna = std::move(una);
    m_prevProg = std::move(prog);
    m_prevWin = std::move(win);
    m_prevSig = std::move(sig);
    m_portTx = std::move(tx);
    m_portFrames = std::move(frames);
    m_portQueue = std::move(queue);
    m_portSig = std::move(psig);
    m_nicAcks = std::move(acks);
    m_havePrev = true;

    int64_t skipped = 0;
    if (m_stable >= m_windows)
    {
        skipped = TryJump(now, false);
        if (skipped > 0)
        {
            m_stable = 0;
            m_havePrev = false;
        }
    }
    // after a skip that stopped at another event, check right after it (chained skip)
    ScheduleCheck(m_chain ? skipped : skipped + m_interval.GetNanoSeconds());
}

int64_t
PacketFastForward::TryJump(int64_t now, bool chained)
{
    const auto& qps = m_net->m_qps;
    std::size_t n = m_live.size();
    if (!chained)
    {
        // settled rates (payload bytes per ns) over the settled windows
        double span = static_cast<double>(now - m_refNs);
        if (span <= 0)
        {
            return 0;
        }
        m_rate.assign(n, 0.0);
        for (std::size_t i = 0; i < n; ++i)
        {
            // bytes acknowledged between the last ACKs before the two snapshots: a count
            // of whole packets over the time they took, not over the snapshot interval
            double took = static_cast<double>(m_prevProg[i] - m_refProg[i]);
            m_rate[i] = took > 0 ? static_cast<double>(m_prevUna[i] - m_refUna[i]) / took : 0.0;
            if (m_rate[i] <= 0)
            {
                ++m_stats[NOT_SETTLED];
                return 0;
            }
        }
        ShareRoundRobin();
        std::size_t nPorts = m_net->m_portDev.size();
        m_txRate.assign(nPorts, 0.0);
        m_frameRate.assign(nPorts, 0.0);
        for (std::size_t p = 0; p < nPorts; ++p)
        {
            m_txRate[p] = static_cast<double>(m_portTx[p] - m_refTx[p]) / span;
            m_frameRate[p] = static_cast<double>(m_portFrames[p] - m_refFrames[p]) / span;
        }
        m_ackRate.assign(m_net->m_nics.size(), 0.0);
        for (std::size_t v = 0; v < m_ackRate.size(); ++v)
        {
            m_ackRate[v] = static_cast<double>(m_nicAcks[v] - m_refAcks[v]) / span;
        }
        m_rateSlots = m_live;
        m_carry.assign(n, 0.0);
    }
    else if (m_rateSlots != m_live)
    {
        return 0;
    }
    const std::vector<double>& rate = m_rate;
    // the time to the first message end
    double horizon = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i)
    {
        const RdmaQueuePair* qp = qps[m_live[i]].get();
        horizon = std::min(horizon, static_cast<double>(qp->size - qp->sndNxt) / rate[i]);
    }
    horizon -= static_cast<double>(m_guard.GetNanoSeconds());

    // the fabric's own pending events; the earliest other one bounds the skip
    std::vector<const EventImpl*> own;
    for (uint32_t slot : m_live)
    {
        RdmaQueuePair* qp = qps[slot].get();
        ShiftEventId(qp->rtoEvent, 0, &own);
        qp->cc->ShiftClock(0, &own);
    }
    for (const auto& nic : m_net->m_nics)
    {
        if (nic)
        {
            nic->ShiftClock(0, &own, 0);
        }
    }
    m_net->m_sampler.ShiftClock(0, &own);
    if (m_net->m_memo)
    {
        m_net->m_memo->ShiftClock(0, &own); // its trajectory sampling
    }
    std::unordered_set<const EventImpl*> ownSet(own.begin(), own.end());
    auto isOwn = [&ownSet](const EventImpl* ev) {
        return ownSet.count(ev) > 0 || dynamic_cast<const QbbDeviceEvent*>(ev) != nullptr;
    };
    ShiftableScheduler* sched = ShiftableScheduler::GetCurrent();
    NS_ASSERT_MSG(sched, "fast-forward needs the ShiftableScheduler as the event queue");
    uint64_t other = sched->EarliestOther(isOwn);
    double limit = horizon;
    bool stoppedByOther = false;
    if (other != std::numeric_limits<uint64_t>::max() &&
        static_cast<double>(static_cast<int64_t>(other) - now) < limit)
    {
        limit = static_cast<double>(static_cast<int64_t>(other) - now);
        stoppedByOther = true;
    }
    // MinJump applies to a skip that ends before a message end; one stopped by another event
    // takes any length (it goes on after that event if the event changes nothing here)
    if (!(limit >= static_cast<double>(chained || stoppedByOther ? 1 : m_minJump.GetNanoSeconds())))
    {
        if (!chained)
        {
            ++m_stats[TOO_CLOSE];
        }
        return 0;
    }
    int64_t delta = static_cast<int64_t>(std::floor(limit));

    // advance the queue pairs: shorten each byte stream by what the skip delivers
    uint64_t mtu = m_net->m_mtu;
    uint64_t total = 0;
    std::vector<const EventImpl*> moved;
    std::vector<uint64_t> skippedBytes(n, 0);
    for (std::size_t i = 0; i < n; ++i)
    {
        RdmaQueuePair* qp = qps[m_live[i]].get();
        // whole packets; the fraction left over is carried into the next chained skip, so a
        // chain of short skips does not lose a packet's worth of progress at each one
        double due = rate[i] * static_cast<double>(delta) + m_carry[i];
        uint64_t bytes = static_cast<uint64_t>(due) / mtu * mtu;
        // at least one packet of the message is left to the packet simulation (Guard = 0)
        uint64_t room = (qp->size - qp->sndNxt - 1) / mtu * mtu;
        bytes = std::min(bytes, room);
        m_carry[i] = due - static_cast<double>(bytes);
        qp->size -= bytes;
        qp->posted -= bytes;
        qp->sendEnds.back() -= bytes;
        qp->recvEnds.back().first -= bytes;
        qp->ffBytes += bytes;
        uint32_t msg = qp->recvEnds.back().second;
        auto span = m_net->m_msgSpan.find(msg);
        if (span != m_net->m_msgSpan.end())
        {
            span->second.second -= bytes;
            m_net->m_msgFf[msg] += bytes;
        }
        total += bytes;
        qp->nextAvailNs += delta;
        qp->lastTxNs += delta;
        qp->lastProgressNs += delta;
        if (qp->lastCnpNs >= 0)
        {
            qp->lastCnpNs += delta;
        }
        if (qp->lastNackNs >= 0)
        {
            qp->lastNackNs += delta;
        }
        ShiftEventId(qp->rtoEvent, delta, &moved);
        qp->cc->ShiftClock(delta, &moved);
        skippedBytes[i] = bytes;
    }
    double d = static_cast<double>(delta);
    for (std::size_t v = 0; v < m_net->m_nics.size(); ++v)
    {
        if (m_net->m_nics[v])
        {
            m_net->m_nics[v]->ShiftClock(
                delta, &moved, static_cast<uint64_t>(std::llround(m_ackRate[v] * d)));
        }
    }
    m_net->m_sampler.ShiftClock(delta, &moved);
    if (m_net->m_memo)
    {
        m_net->m_memo->ShiftClock(delta, &moved);
    }
    for (std::size_t p = 0; p < m_net->m_portDev.size(); ++p)
    {
        double txRate = m_txRate[p];
        double frameRate = m_frameRate[p];
        if (txRate > 0)
        {
            m_net->m_portDev[p]->AddFastForwardTraffic(
                static_cast<uint64_t>(std::llround(txRate * d)),
                static_cast<uint64_t>(std::llround(frameRate * d)));
        }
    }
    std::unordered_set<const EventImpl*> movedSet(moved.begin(), moved.end());
    uint64_t shifted = sched->Shift(
        [&movedSet](const EventImpl* ev) {
            return movedSet.count(ev) > 0 || dynamic_cast<const QbbDeviceEvent*>(ev) != nullptr;
        },
        static_cast<uint64_t>(delta));
    // congestion control: what the interval did to it, in the moved clock (rate changes re-time
    // pacing relative to the moved send times)
    for (std::size_t i = 0; i < n; ++i)
    {
        qps[m_live[i]]->cc->AdvanceSkipped(delta, skippedBytes[i]);
    }
    ++m_stats[EPISODES];
    m_chain = stoppedByOther;
    m_stats[SKIPPED_NS] += static_cast<uint64_t>(delta);
    m_stats[SKIPPED_BYTES] += total;
    NS_LOG_INFO("t=" << now << " skipped " << delta << " ns, " << n << " queue pairs, " << total
                     << " bytes, " << shifted << " events moved");
    m_skipTrace(now, delta, total);
    return delta;
}

void
PacketFastForward::ShareRoundRobin()
{
    // Queue pairs leaving one endpoint port are served one packet each per round: when they
    // all got the same throughput within the tolerance, their exact shares are equal, and the
    // port's total (counted over many more packets) divides more precisely than each queue
    // pair's own count, which is off by up to a packet at each end of the measurement.
    const auto& qps = m_net->m_qps;
    std::size_t n = m_live.size();
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i)
    {
        order[i] = i;
    }
    auto key = [&](std::size_t i) {
        const RdmaQueuePair* qp = qps[m_live[i]].get();
        return (static_cast<uint64_t>(qp->srcNode) << 32) | qp->srcPort;
    };
    std::sort(
        order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    double slack =
        2.0 * m_net->m_mtu / static_cast<double>(m_interval.GetNanoSeconds() * m_windows);
    for (std::size_t lo = 0; lo < n;)
    {
        std::size_t hi = lo + 1;
        while (hi < n && key(order[hi]) == key(order[lo]))
        {
            ++hi;
        }
        if (hi - lo > 1)
        {
            double sum = 0;
            double top = 0;
            double bottom = std::numeric_limits<double>::infinity();
            for (std::size_t k = lo; k < hi; ++k)
            {
                double r = m_rate[order[k]];
                sum += r;
                top = std::max(top, r);
                bottom = std::min(bottom, r);
            }
            if (top - bottom <= m_rateTol * top + slack)
            {
                double share = sum / static_cast<double>(hi - lo);
                for (std::size_t k = lo; k < hi; ++k)
                {
                    m_rate[order[k]] = share;
                }
            }
        }
        lo = hi;
    }
}

void
PacketFastForward::CopyStats(uint64_t* out) const
{
    std::copy(m_stats, m_stats + N_STATS, out);
}

void
PacketFastForward::DoDispose()
{
    m_check.Cancel();
    m_net = nullptr;
    Object::DoDispose();
}

} // namespace ns3
