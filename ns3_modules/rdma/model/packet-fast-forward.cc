/*
 * HeteroSim: steady-state fast-forward of the packet network.
 */
#include "packet-fast-forward.h"

#include "packet-network.h"

#include "ns3/boolean.h"
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
#include <typeinfo>
#include <unordered_map>
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
    UNSUPPORTED,
    CONGESTED_EPISODES,
    CONGESTED_NS
};

/** \return the loss / congestion signature of a queue pair */
uint64_t
QpSignature(const RdmaQueuePair* qp)
{
    return qp->retransmits + qp->timeouts + qp->nacks + qp->cnps;
}

/** \return the loss signature of a queue pair (never part of a settled state) */
uint64_t
QpLosses(const RdmaQueuePair* qp)
{
    return qp->retransmits + qp->timeouts + qp->nacks;
}

/** \return whether two counts of a block agree within \p tol (plus two Poisson deviations) */
bool
CountsAgree(uint64_t a, uint64_t b, double tol)
{
    double hi = static_cast<double>(std::max(a, b));
    double lo = static_cast<double>(std::min(a, b));
    return hi - lo <= tol * hi + 2.0 * std::sqrt(hi) + 1.0;
}
} // namespace

TypeId
PacketFastForward::GetTypeId()
{
    // long, but a table: one AddAttribute per tunable, as ns-3's own GetTypeId functions
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
            .AddAttribute("AlignToPackets",
                          "A skip stopped by an event outside the fabric (a flow start, a "
                          "compute task) ends a whole number of packet periods (MTU over the "
                          "slowest queue pair's settled rate) after it began, and the rest up "
                          "to that event is simulated packet by packet: the frames then meet "
                          "the event at the phase they would have without the skip (without "
                          "it every skip ends in the same phase, and a flow joining a "
                          "settled one always meets the same packet train)",
                          BooleanValue(true),
                          MakeBooleanAccessor(&PacketFastForward::m_alignToPackets),
                          MakeBooleanChecker())
            .AddAttribute("Guard",
                          "Time before the first predicted message end that is always "
                          "simulated packet by packet",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&PacketFastForward::m_guard),
                          MakeTimeChecker())
            .AddAttribute("MessageGuard",
                          "Time before a predicted end of a message that another may follow "
                          "(queued on the same queue pair, or any message of a connection: a "
                          "collective's chunk) that is always simulated packet by packet; the "
                          "skip goes on once the boundary was delivered and every queue pair "
                          "sends again",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&PacketFastForward::m_msgGuard),
                          MakeTimeChecker())
            .AddAttribute("BoundaryWait",
                          "Longest a chain of skips waits, in packets, after a message boundary "
                          "for the boundary's delivery and for every connection to send again "
                          "(its next message posted, on the same or a new queue pair); it "
                          "looks every 500 ns and ends the chain after this long",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&PacketFastForward::m_boundaryWait),
                          MakeTimeChecker())
            .AddAttribute("CongestedWindows",
                          "Windows per block of the congested-equilibrium check: two blocks "
                          "of this many windows must agree (rates, marks, pauses, CNPs, "
                          "queues) before a congested stretch is skipped; 0 (the default) "
                          "never skips one: on the cases measured (benchmarks/README.md) the "
                          "blocks' marks and per-flow rates were a biased sample of DCQCN's "
                          "sawtooth",
                          UintegerValue(0),
                          MakeUintegerAccessor(&PacketFastForward::m_congWindows),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("CongestedRateTolerance",
                          "Congested check: a queue pair's acknowledged bytes in the two "
                          "blocks differ by at most this fraction (plus two packets); a port's "
                          "mean queue by at most this fraction or QueueBand",
                          DoubleValue(0.05),
                          MakeDoubleAccessor(&PacketFastForward::m_congRateTol),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("SignalTolerance",
                          "Congested check: a queue pair's CNPs and a port's ECN marks and PFC "
                          "pause frames in the two blocks differ by at most this fraction "
                          "(plus two standard deviations of a Poisson count)",
                          DoubleValue(0.25),
                          MakeDoubleAccessor(&PacketFastForward::m_signalTol),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("CongestedJumpRatio",
                          "Longest congested skip as a multiple of the span it was observed "
                          "over (two blocks); then the packets run again and the next skip needs "
                          "a new observation, so a drift the blocks did not resolve (DCQCN's "
                          "slow convergence between queue pairs) is followed, not frozen",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&PacketFastForward::m_congJumpRatio),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("QueueBand",
                          "Congested check: a port's mean queue over the two blocks differs by "
                          "at most this many bytes (or CongestedRateTolerance of it)",
                          UintegerValue(65536),
                          MakeUintegerAccessor(&PacketFastForward::m_queueBand),
                          MakeUintegerChecker<uint64_t>())
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
    if (m_carry.size() <= slot)
    {
        m_carry.resize(slot + 1, 0.0);
    }
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
    m_hardChange = true;
}

void
PacketFastForward::MessageQueued(uint32_t slot, bool busy)
{
    if (!busy)
    {
        NS_LOG_DEBUG("message queued on idle queue pair " << slot);
        m_changed = true;
    }
}

void
PacketFastForward::MessageDelivered(uint32_t slot, bool more)
{
    if (!more)
    {
        NS_LOG_DEBUG("last queued message of queue pair " << slot << " delivered");
        m_changed = true;
    }
}

void
PacketFastForward::Fault()
{
    m_fault = true;
    m_hardChange = true;
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
    Events events = TakeEvents();
    if (DropFinished())
    {
        events.changed = true;
    }
    if (WaitForNextQueuePairs(events))
    {
        return;
    }
    if (m_live.empty())
    {
        ForgetWindows();
        m_chain = false;
        return; // restarted by the next queue pair
    }
    if (m_chain && GoOnChain(now, events))
    {
        return;
    }

    Reading reading = Read(events.changed);
    if (m_congWindows > 0)
    {
        RecordHistory(now, reading, events);
    }
    int reason = WindowVerdict(now, reading, events);
    KeepWindow(now, reason, reading);

    int64_t skipped = 0;
    if (m_stable >= m_windows)
    {
        skipped = SettledRates(now) ? TryJump(now, false) : 0;
    }
    else if (reason != AFTER_FAULT && m_congWindows > 0 &&
             m_hist.size() == 2 * static_cast<std::size_t>(m_congWindows) + 1 && CongestedRates())
    {
        skipped = TryJump(now, false);
    }
    if (skipped > 0)
    {
        ForgetWindows();
    }
    // after a skip that stopped at another event, check right after it (chained skip)
    ScheduleCheck(AfterSkip(skipped));
}

PacketFastForward::Events
PacketFastForward::TakeEvents()
{
    Events events{m_changed, m_hardChange, m_fault};
    m_changed = false;
    m_fault = false;
    m_hardChange = false;
    return events;
}

void
PacketFastForward::PutBackEvents(const Events& events)
{
    m_changed = m_changed || events.changed;
    m_hardChange = m_hardChange || events.hard;
    m_fault = m_fault || events.fault;
}

bool
PacketFastForward::DropFinished()
{
    const auto& qps = m_net->m_qps;
    std::size_t keep = 0;
    for (uint32_t slot : m_live)
    {
        if (!qps[slot]->IsFinished())
        {
            m_live[keep++] = slot;
        }
    }
    if (keep == m_live.size())
    {
        return false;
    }
    m_live.resize(keep);
    return true;
}

void
PacketFastForward::ForgetWindows()
{
    m_havePrev = false;
    m_stable = 0;
    m_hist.clear();
}

uint32_t
PacketFastForward::BoundaryRetries() const
{
    return static_cast<uint32_t>(m_boundaryWait.GetNanoSeconds() / 500);
}

bool
PacketFastForward::WaitForNextQueuePairs(const Events& events)
{
    if (!m_live.empty() || !m_chain || !m_atBoundary || m_chainRetries >= BoundaryRetries())
    {
        return false;
    }
    // every queue pair finished at the boundary (a ring step's chunks end together): the
    // connections' next messages open new queue pairs once their data arrived; wait for them in
    // packets, as for any queue pair between its messages
    ++m_chainRetries;
    PutBackEvents(events);
    ScheduleCheck(500);
    return true;
}

bool
PacketFastForward::GoOnChain(int64_t now, const Events& events)
{
    // The previous skip stopped at an event that was not the fabric's (a compute task, a flow of
    // the intra-host model, ...). If it changed nothing here, the settled rates still hold: skip
    // on at once.
    // A skip that stopped before a message boundary (the next message of the queue pair already
    // queued) is followed once that boundary was delivered in packets, if nothing else changed
    // and no congestion or loss signal arrived in between.
    m_chain = false;
    bool boundary = m_atBoundary;
    m_atBoundary = false;
    // At a boundary a queue pair may have gone idle between its messages, finished, and its
    // connection's next message opened a new queue pair: that gap is simulated in packets, and
    // once every connection sends again the new queue pair takes over the old one's rate.
    bool gapsOnly = boundary && !events.hard && !events.fault;
    uint32_t boundaryRetries = BoundaryRetries();
    bool quiet = (!events.changed || gapsOnly) && !events.fault && SignalsUnchanged();
    if (quiet && events.changed && !RemapRates())
    {
        // a connection is still between its messages (its next one not posted yet, or its queue
        // pair not opened): wait for it in packets as for the boundary itself
        quiet = false;
        if (boundary && m_chainRetries < boundaryRetries)
        {
            ++m_chainRetries;
            m_chain = true;
            m_atBoundary = true;
            ScheduleCheck(500);
            return true;
        }
    }
    if (quiet)
    {
        int64_t more = TryJump(now, true);
        if (more > 0)
        {
            m_chainRetries = 0;
            ScheduleCheck(AfterSkip(more));
            return true;
        }
        if (m_alignRestNs > 0)
        {
            // the next event is less than a packet period away: look again after it
            m_chain = true;
            ScheduleCheck(m_alignRestNs);
            return true;
        }
        if (m_chainRetries < (boundary ? boundaryRetries : 3U))
        {
            // something else is due now (scheduled by that event), or the boundary is not
            // delivered yet: look again after it
            ++m_chainRetries;
            m_chain = true;
            m_atBoundary = boundary;
            ScheduleCheck(boundary ? 500 : 1);
            return true;
        }
    }
    NS_LOG_DEBUG("chain ended: changed " << events.changed << ", fault " << events.fault
                                         << ", boundary " << boundary << ", retries "
                                         << m_chainRetries);
    m_chainRetries = 0;
    ForgetWindows();
    return false;
}

PacketFastForward::Reading
PacketFastForward::Read(bool changed) const
{
    const auto& qps = m_net->m_qps;
    std::size_t n = m_live.size();
    std::size_t nPorts = m_net->m_portDev.size();
    std::size_t nNodes = m_net->m_nics.size();
    Reading r;
    r.una.resize(n);
    r.prog.resize(n);
    r.snd.resize(n);
    r.sent.resize(n);
    r.sig.resize(n);
    r.cnps.resize(n);
    r.loss.resize(n);
    r.win.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i)
    {
        const RdmaQueuePair* qp = qps[m_live[i]].get();
        r.una[i] = qp->sndUna;
        r.prog[i] = qp->lastProgressNs;
        r.snd[i] = qp->sndNxt;
        r.sent[i] = qp->lastTxNs;
        r.sig[i] = QpSignature(qp);
        r.cnps[i] = qp->cnps;
        r.structural = r.structural || !qp->active || qp->posted <= qp->sndNxt;
        r.loss[i] = QpLosses(qp);
        r.losses = r.losses || (m_havePrev && !changed && r.loss[i] != m_prevLoss[i]);
    }
    r.tx.resize(nPorts);
    r.frames.resize(nPorts);
    r.queue.resize(nPorts);
    r.psig.resize(nPorts);
    r.marks.resize(nPorts);
    r.pauses.resize(nPorts);
    r.drops.resize(nPorts);
    for (std::size_t p = 0; p < nPorts; ++p)
    {
        const QbbNetDevice* dev = PeekPointer(m_net->m_portDev[p]);
        r.tx[p] = dev->GetTxBytes();
        r.frames[p] = dev->GetTxFrames();
        r.queue[p] = dev->GetTotalQueueBytes();
        r.marks[p] = dev->GetEcnMarks();
        r.pauses[p] = dev->GetPauseSent();
        r.drops[p] = dev->GetDrops();
        r.psig[p] = r.marks[p] + r.pauses[p] + r.drops[p];
        r.losses = r.losses || (m_havePrev && !changed && r.drops[p] != m_portDrops[p]);
    }
    r.acks.assign(nNodes, 0);
    r.cnpOut.assign(nNodes, 0);
    for (std::size_t v = 0; v < nNodes; ++v)
    {
        if (m_net->m_nics[v])
        {
            r.acks[v] = m_net->m_nics[v]->GetAcksSent();
            r.cnpOut[v] = m_net->m_nics[v]->GetCnpsSent();
        }
    }
    return r;
}

void
PacketFastForward::RecordHistory(int64_t now, const Reading& r, const Events& events)
{
    // the congested check's history: restarted by any change, fault or loss
    if (events.changed || events.fault || r.losses || r.structural || !m_havePrev)
    {
        NS_LOG_DEBUG("congested history restarted: changed "
                     << events.changed << ", fault " << events.fault << ", losses " << r.losses
                     << ", structural " << r.structural);
        m_hist.clear();
    }
    if (r.structural)
    {
        return;
    }
    Snapshot snap;
    snap.ns = now;
    snap.una = r.una;
    snap.prog = r.prog;
    snap.cnps = r.cnps;
    snap.tx = r.tx;
    snap.frames = r.frames;
    snap.queue = r.queue;
    snap.marks = r.marks;
    snap.pauses = r.pauses;
    snap.acks = r.acks;
    snap.cnpOut = r.cnpOut;
    m_hist.push_back(std::move(snap));
    while (m_hist.size() > 2 * static_cast<std::size_t>(m_congWindows) + 1)
    {
        m_hist.pop_front();
    }
}

int
PacketFastForward::WindowVerdict(int64_t now, Reading& r, const Events& events) const
{
    if (events.fault)
    {
        return AFTER_FAULT;
    }
    if (events.changed || !m_havePrev)
    {
        NS_LOG_DEBUG("not settled: changed " << events.changed << ", first snapshot "
                                             << !m_havePrev);
        return NOT_SETTLED;
    }
    int reason = QueuePairVerdict(now, r);
    return reason >= 0 ? reason : PortVerdict(r);
}

int
PacketFastForward::QueuePairVerdict(int64_t now, Reading& r) const
{
    const auto& qps = m_net->m_qps;
    uint64_t mtu2 = 2ULL * m_net->m_mtu;
    for (std::size_t i = 0; i < m_live.size(); ++i)
    {
        const RdmaQueuePair* qp = qps[m_live[i]].get();
        if (r.sig[i] != m_prevSig[i])
        {
            return CONGESTION;
        }
        r.win[i] = r.una[i] - m_prevUna[i];
        // A rate controller below its line rate that paces the queue pair (its rate within
        // RateMargin of what the queue pair gets) sets the throughput while it recovers: not
        // settled, however slowly it moves. One whose rate is clear of the queue pair's share
        // only rises without CNPs and changes nothing.
        double got = static_cast<double>(r.win[i]) * 8e9 / static_cast<double>(now - m_prevNs);
        bool paced =
            qp->cc->GetRate() < qp->lineRate && qp->cc->GetRate() < (1.0 + m_rateMargin) * got;
        if (!qp->active || qp->posted <= qp->sndNxt || r.win[i] == 0 || paced)
        {
            NS_LOG_DEBUG("not settled: flow " << qp->flowId << " active " << qp->active
                                              << ", posted " << qp->posted - qp->sndNxt
                                              << " B ahead, window " << r.win[i] << " B, paced "
                                              << paced);
            return NOT_SETTLED;
        }
        if (m_stable > 0)
        {
            uint64_t hi = std::max(r.win[i], m_prevWin[i]);
            uint64_t lo = std::min(r.win[i], m_prevWin[i]);
            if (static_cast<double>(hi - lo) > m_rateTol * static_cast<double>(hi) + mtu2)
            {
                NS_LOG_DEBUG("not settled: flow " << qp->flowId << " window " << r.win[i]
                                                  << " B, before " << m_prevWin[i] << " B");
                return NOT_SETTLED;
            }
        }
    }
    return -1;
}

int
PacketFastForward::PortVerdict(const Reading& r) const
{
    for (std::size_t p = 0; p < r.queue.size(); ++p)
    {
        if (r.psig[p] != m_portSig[p])
        {
            return CONGESTION;
        }
        uint64_t hi = std::max(r.queue[p], m_portQueue[p]);
        uint64_t lo = std::min(r.queue[p], m_portQueue[p]);
        if (hi - lo > std::max<uint64_t>(
                          m_queueTol, static_cast<uint64_t>(m_rateTol * static_cast<double>(hi))))
        {
            return NOT_SETTLED;
        }
    }
    return -1;
}

void
PacketFastForward::KeepWindow(int64_t now, int reason, Reading& r)
{
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
            m_refSnd = m_prevSnd;
            m_refSent = m_prevSent;
            m_refTx = m_portTx;
            m_refFrames = m_portFrames;
            m_refAcks = m_nicAcks;
        }
        ++m_stable;
    }
    m_prevNs = now;
    m_prevUna = std::move(r.una);
    m_prevProg = std::move(r.prog);
    m_prevSnd = std::move(r.snd);
    m_prevSent = std::move(r.sent);
    m_prevWin = std::move(r.win);
    m_prevSig = std::move(r.sig);
    m_prevLoss = std::move(r.loss);
    m_portDrops = std::move(r.drops);
    m_portTx = std::move(r.tx);
    m_portFrames = std::move(r.frames);
    m_portQueue = std::move(r.queue);
    m_portSig = std::move(r.psig);
    m_nicAcks = std::move(r.acks);
    m_havePrev = true;
}

int64_t
PacketFastForward::AfterSkip(int64_t skipped) const
{
    if (!m_chain)
    {
        return skipped + m_interval.GetNanoSeconds();
    }
    return m_atBoundary ? skipped + m_boundaryWaitNs : skipped + m_alignRestNs;
}

bool
PacketFastForward::RemapRates()
{
    const auto& qps = m_net->m_qps;
    std::size_t n = m_rateSlots.size();
    if (m_live.size() != n || m_rateConn.size() != n)
    {
        return false;
    }
    std::unordered_map<uint32_t, std::size_t> where;
    for (std::size_t k = 0; k < n; ++k)
    {
        where[m_live[k]] = k;
    }
    std::vector<double> rate(n, 0.0);
    std::vector<uint8_t> hold(n, 0);
    std::vector<uint8_t> seen(n, 0);
    std::vector<uint32_t> conn(n, std::numeric_limits<uint32_t>::max());
    for (std::size_t i = 0; i < n; ++i)
    {
        uint32_t slot = m_rateSlots[i];
        if (qps[slot]->IsFinished())
        {
            // replaced by its connection's next queue pair, clean and sending
            if (m_rateConn[i] == std::numeric_limits<uint32_t>::max())
            {
                return false;
            }
            auto c = m_net->m_connSlot.find(m_rateConn[i]);
            if (c == m_net->m_connSlot.end() || c->second == slot ||
                QpSignature(qps[c->second].get()) != 0)
            {
                return false;
            }
            m_carry[c->second] = m_carry[slot];
            slot = c->second;
        }
        auto k = where.find(slot);
        if (k == where.end() || seen[k->second])
        {
            return false;
        }
        seen[k->second] = 1;
        rate[k->second] = m_rate[i];
        hold[k->second] = m_hold[i];
        conn[k->second] = m_rateConn[i];
    }
    NS_LOG_DEBUG("rates carried over to the connections' new queue pairs");
    m_rate = std::move(rate);
    m_hold = std::move(hold);
    m_rateConn = std::move(conn);
    m_rateSlots = m_live;
    return true;
}

bool
PacketFastForward::SignalsUnchanged() const
{
    const auto& qps = m_net->m_qps;
    if (m_skipSig.size() != m_rateSlots.size() || m_skipPortSig.size() != m_net->m_portDev.size())
    {
        return false;
    }
    for (std::size_t i = 0; i < m_rateSlots.size(); ++i)
    {
        if (QpSignature(qps[m_rateSlots[i]].get()) != m_skipSig[i])
        {
            return false;
        }
    }
    for (std::size_t p = 0; p < m_skipPortSig.size(); ++p)
    {
        const QbbNetDevice* dev = PeekPointer(m_net->m_portDev[p]);
        if (dev->GetEcnMarks() + dev->GetPauseSent() + dev->GetDrops() != m_skipPortSig[p])
        {
            return false;
        }
    }
    return true;
}

uint64_t
PacketFastForward::FirstEnd(const RdmaQueuePair* qp)
{
    for (uint64_t e : qp->sendEnds)
    {
        if (e > qp->sndNxt)
        {
            return e;
        }
    }
    return qp->size;
}

bool
PacketFastForward::SettledRates(int64_t now)
{
    const auto& qps = m_net->m_qps;
    std::size_t n = m_live.size();
    // settled rates (payload bytes per ns) over the settled windows
    double span = static_cast<double>(now - m_refNs);
    if (span <= 0)
    {
        return false;
    }
    m_rate.assign(n, 0.0);
    double mtu = static_cast<double>(m_net->m_mtu);
    for (std::size_t i = 0; i < n; ++i)
    {
        // Bytes acknowledged between the last ACKs before the two snapshots: whole packets
        // over the time they took, not over the snapshot interval. ACKs leave the receiver
        // between its own data frames, so their arrival times jitter by up to a frame's
        // serialisation and this count is off by up to a packet either way (0.06 % at 400G
        // over 150 us, which a chain of skips over a 3 ms collective turns into 1.6 us).
        double took = static_cast<double>(m_prevProg[i] - m_refProg[i]);
        double acked = took > 0 ? static_cast<double>(m_prevUna[i] - m_refUna[i]) / took : 0.0;
        // The same from the sender's side: bytes sent between the starts of the last sends
        // before the two snapshots. The sender's frames leave at the port's pace with only
        // control frames between them, so this is exact to a few ns; it is the rate when
        // the two agree (in a settled window nothing queues up between sender and receiver,
        // so what is sent is what is acknowledged).
        double spanTx = static_cast<double>(m_prevSent[i] - m_refSent[i]);
        double sent = spanTx > 0 ? static_cast<double>(m_prevSnd[i] - m_refSnd[i]) / spanTx : 0.0;
        bool agree = took > 0 && sent > 0 && std::fabs(sent - acked) * took <= 2.0 * mtu;
        m_rate[i] = agree ? sent : acked;
        NS_LOG_DEBUG("  measured flow " << qps[m_live[i]]->flowId << " acked " << acked
                                        << " B/ns over " << took << " ns, sent " << sent
                                        << " B/ns over " << spanTx << " ns");
        if (m_rate[i] <= 0)
        {
            ++m_stats[NOT_SETTLED];
            return false;
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
    m_congestedRates = false;
    m_hold.assign(n, 0);
    m_cnpRate.assign(n, 0.0);
    m_markRate.assign(m_txRate.size(), 0.0);
    m_pauseRate.assign(m_txRate.size(), 0.0);
    m_cnpOutRate.assign(m_ackRate.size(), 0.0);
    return true;
}

bool
PacketFastForward::CongestedRates()
{
    std::size_t b = m_congWindows;
    const Snapshot& h0 = m_hist.front();
    const Snapshot& h2 = m_hist.back();
    if (h0.una.size() != m_live.size() || h2.una.size() != m_live.size())
    {
        return false;
    }
    std::vector<uint8_t> hold(m_live.size(), 0);
    if (!QueuePairBlocksAgree(h0, m_hist[b], h2, &hold) || !PortBlocksAgree(h0, m_hist[b], h2))
    {
        return false;
    }
    return SetCongestedRates(h0, h2, &hold);
}

bool
PacketFastForward::QueuePairBlocksAgree(const Snapshot& h0,
                                        const Snapshot& h1,
                                        const Snapshot& h2,
                                        std::vector<uint8_t>* hold) const
{
    const auto& qps = m_net->m_qps;
    double mtu2 = 2.0 * m_net->m_mtu;
    for (std::size_t i = 0; i < m_live.size(); ++i)
    {
        const RdmaQueuePair* qp = qps[m_live[i]].get();
        uint64_t b1 = h1.una[i] - h0.una[i];
        uint64_t b2 = h2.una[i] - h1.una[i];
        double hi = static_cast<double>(std::max(b1, b2));
        double lo = static_cast<double>(std::min(b1, b2));
        if (b1 == 0 || b2 == 0 || hi - lo > m_congRateTol * hi + mtu2)
        {
            NS_LOG_DEBUG("congested check: flow " << qp->flowId << " bytes " << b1 << " / " << b2);
            return false;
        }
        uint64_t c1 = h1.cnps[i] - h0.cnps[i];
        uint64_t c2 = h2.cnps[i] - h1.cnps[i];
        if (!CountsAgree(c1, c2, m_signalTol))
        {
            NS_LOG_DEBUG("congested check: flow " << qp->flowId << " CNPs " << c1 << " / " << c2);
            return false;
        }
        (*hold)[i] = c1 + c2 > 0;
        if (!(*hold)[i])
        {
            // without CNPs a controller below its line rate that sets the throughput only
            // rises: not an equilibrium
            double got = (lo + hi) * 8e9 / static_cast<double>(h2.ns - h0.ns);
            if (qp->cc->GetRate() < qp->lineRate && qp->cc->GetRate() < (1.0 + m_rateMargin) * got)
            {
                NS_LOG_DEBUG("congested check: flow " << qp->flowId << " recovering");
                return false;
            }
        }
    }
    return true;
}

bool
PacketFastForward::PortBlocksAgree(const Snapshot& h0, const Snapshot& h1, const Snapshot& h2) const
{
    std::size_t b = m_congWindows;
    for (std::size_t p = 0; p < m_net->m_portDev.size(); ++p)
    {
        if (!CountsAgree(h1.marks[p] - h0.marks[p], h2.marks[p] - h1.marks[p], m_signalTol) ||
            !CountsAgree(h1.pauses[p] - h0.pauses[p], h2.pauses[p] - h1.pauses[p], m_signalTol))
        {
            NS_LOG_DEBUG("congested check: port " << p << " marks " << h1.marks[p] - h0.marks[p]
                                                  << " / " << h2.marks[p] - h1.marks[p]
                                                  << ", pauses " << h1.pauses[p] - h0.pauses[p]
                                                  << " / " << h2.pauses[p] - h1.pauses[p]);
            return false;
        }
        double q1 = 0;
        double q2 = 0;
        for (std::size_t k = 1; k <= b; ++k)
        {
            q1 += static_cast<double>(m_hist[k].queue[p]);
            q2 += static_cast<double>(m_hist[b + k].queue[p]);
        }
        q1 /= static_cast<double>(b);
        q2 /= static_cast<double>(b);
        if (std::fabs(q1 - q2) >
            std::max(static_cast<double>(m_queueBand), m_congRateTol * std::max(q1, q2)))
        {
            NS_LOG_DEBUG("congested check: port " << p << " queue " << q1 << " / " << q2);
            return false;
        }
    }
    return true;
}

bool
PacketFastForward::SetCongestedRates(const Snapshot& h0,
                                     const Snapshot& h2,
                                     std::vector<uint8_t>* hold)
{
    // an equilibrium: mean rates over both blocks
    std::size_t n = m_live.size();
    std::size_t nPorts = m_net->m_portDev.size();
    std::size_t nNodes = m_net->m_nics.size();
    double span = static_cast<double>(h2.ns - h0.ns);
    m_congSpanNs = h2.ns - h0.ns;
    m_congUsedNs = 0;
    m_rate.assign(n, 0.0);
    m_cnpRate.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
    {
        double took = static_cast<double>(h2.prog[i] - h0.prog[i]);
        m_rate[i] = took > 0 ? static_cast<double>(h2.una[i] - h0.una[i]) / took : 0.0;
        if (m_rate[i] <= 0)
        {
            return false;
        }
        m_cnpRate[i] = static_cast<double>(h2.cnps[i] - h0.cnps[i]) / span;
    }
    m_txRate.assign(nPorts, 0.0);
    m_frameRate.assign(nPorts, 0.0);
    m_markRate.assign(nPorts, 0.0);
    m_pauseRate.assign(nPorts, 0.0);
    for (std::size_t p = 0; p < nPorts; ++p)
    {
        m_txRate[p] = static_cast<double>(h2.tx[p] - h0.tx[p]) / span;
        m_frameRate[p] = static_cast<double>(h2.frames[p] - h0.frames[p]) / span;
        m_markRate[p] = static_cast<double>(h2.marks[p] - h0.marks[p]) / span;
        m_pauseRate[p] = static_cast<double>(h2.pauses[p] - h0.pauses[p]) / span;
    }
    m_ackRate.assign(nNodes, 0.0);
    m_cnpOutRate.assign(nNodes, 0.0);
    for (std::size_t v = 0; v < nNodes; ++v)
    {
        m_ackRate[v] = static_cast<double>(h2.acks[v] - h0.acks[v]) / span;
        m_cnpOutRate[v] = static_cast<double>(h2.cnpOut[v] - h0.cnpOut[v]) / span;
    }
    m_hold = std::move(*hold);
    m_rateSlots = m_live;
    m_congestedRates = true;
    NS_LOG_INFO("congested equilibrium over " << span << " ns, " << n << " queue pairs");
    return true;
}

int64_t
PacketFastForward::TryJump(int64_t now, bool chained)
{
    m_alignRestNs = 0;
    if (chained && m_rateSlots != m_live)
    {
        return 0;
    }
    Jump jump;
    if (!FindHorizon(jump))
    {
        return 0; // a queue pair waits for the host to post its next message
    }
    if (!(jump.horizon >= 1.0))
    {
        // a message end inside its guard: no skip, whatever else is pending (checked first, as
        // the scan of the event queue below costs far more)
        NS_LOG_DEBUG("  no skip: horizon " << jump.horizon << " ns");
        if (!chained)
        {
            ++m_stats[TOO_CLOSE];
        }
        return 0;
    }
    if (!BoundJump(now, chained, jump) || !AlignToPackets(jump))
    {
        return 0;
    }
    int64_t delta = jump.delta;
    std::vector<const EventImpl*> moved;
    std::vector<uint64_t> skippedBytes(m_live.size(), 0);
    uint64_t total = AdvanceQueuePairs(delta, &moved, &skippedBytes);
    AdvanceCounters(delta, &moved);
    std::unordered_set<const EventImpl*> movedSet(moved.begin(), moved.end());
    uint64_t shifted = ShiftableScheduler::GetCurrent()->Shift(
        [&movedSet](const EventImpl* ev) {
            return typeid(*ev) == typeid(QbbDeviceEvent) || movedSet.count(ev) > 0;
        },
        static_cast<uint64_t>(delta));
    AdvanceControllers(delta, skippedBytes);
    ++m_stats[EPISODES];
    if (m_congestedRates)
    {
        m_congUsedNs += delta;
        ++m_stats[CONGESTED_EPISODES];
        m_stats[CONGESTED_NS] += static_cast<uint64_t>(delta);
    }
    RememberSkip(jump);
    m_stats[SKIPPED_NS] += static_cast<uint64_t>(delta);
    m_stats[SKIPPED_BYTES] += total;
    NS_LOG_INFO("t=" << now << " skipped " << delta << " ns, " << m_live.size() << " queue pairs, "
                     << total << " bytes, " << shifted << " events moved");
    m_skipTrace(now, delta, total);
    return delta;
}

bool
PacketFastForward::FindHorizon(Jump& jump) const
{
    // the time to the first message end, less its guard: Guard before a queue pair's last
    // message end (its rate changes there), MessageGuard before a boundary with the next message
    // already queued (it goes on sending at its rate; the boundary's delivery is simulated in
    // packets, then the skip goes on)
    const auto& qps = m_net->m_qps;
    std::size_t n = m_live.size();
    jump.reach.resize(n);
    for (std::size_t i = 0; i < n; ++i)
    {
        const RdmaQueuePair* qp = qps[m_live[i]].get();
        if (qp->posted <= qp->sndNxt)
        {
            NS_LOG_DEBUG("  no skip: flow " << qp->flowId << " waits for its next message");
            return false;
        }
        uint64_t end = FirstEnd(qp);
        // a message of a connection: more may follow it (the collective's next chunk), on this
        // queue pair or, after a gap, on a new one
        bool more = end < qp->size || (!qp->recvEnds.empty() &&
                                       m_net->m_msgSpan.count(qp->recvEnds.back().second) > 0);
        Time guard = more ? m_msgGuard : m_guard;
        jump.reach[i] = static_cast<double>(end - qp->sndNxt) / m_rate[i] -
                        static_cast<double>(guard.GetNanoSeconds());
        if (jump.reach[i] < jump.horizon)
        {
            jump.horizon = jump.reach[i];
            jump.boundary = more;
        }
    }
    return true;
}

uint64_t
PacketFastForward::EarliestOtherEvent() const
{
    // the fabric's own pending events; the earliest other one bounds the skip
    const auto& qps = m_net->m_qps;
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
            nic->ShiftClock(0, &own, 0, 0);
        }
    }
    m_net->m_sampler.ShiftClock(0, &own);
    if (m_net->m_memo)
    {
        m_net->m_memo->ShiftClock(0, &own); // its trajectory sampling
    }
    std::unordered_set<const EventImpl*> ownSet(own.begin(), own.end());
    auto isOwn = [&ownSet](const EventImpl* ev) {
        return typeid(*ev) == typeid(QbbDeviceEvent) || ownSet.count(ev) > 0;
    };
    ShiftableScheduler* sched = ShiftableScheduler::GetCurrent();
    NS_ASSERT_MSG(sched, "fast-forward needs the ShiftableScheduler as the event queue");
    return sched->EarliestOther(isOwn);
}

bool
PacketFastForward::BoundJump(int64_t now, bool chained, Jump& jump)
{
    uint64_t other = EarliestOtherEvent();
    jump.limit = jump.horizon;
    if (m_congestedRates)
    {
        // chained skips included
        jump.limit = std::min(jump.limit,
                              m_congJumpRatio * static_cast<double>(m_congSpanNs) -
                                  static_cast<double>(m_congUsedNs));
    }
    if (other != std::numeric_limits<uint64_t>::max() &&
        static_cast<double>(static_cast<int64_t>(other) - now) < jump.limit)
    {
        jump.limit = static_cast<double>(static_cast<int64_t>(other) - now);
        jump.stoppedByOther = true;
    }
    // MinJump applies to a skip that ends before a queue pair's last message end; one stopped by
    // another event or before a boundary takes any length (it goes on after that event or once
    // the boundary is delivered, if that changes nothing here)
    bool anyLength = chained || jump.stoppedByOther || jump.boundary;
    if (!(jump.limit >= static_cast<double>(anyLength ? 1 : m_minJump.GetNanoSeconds())))
    {
        NS_LOG_DEBUG("  no skip: horizon " << jump.horizon << " ns, next other event in "
                                           << static_cast<double>(static_cast<int64_t>(other) - now)
                                           << " ns");
        if (!chained)
        {
            ++m_stats[TOO_CLOSE];
        }
        return false;
    }
    jump.delta = static_cast<int64_t>(std::floor(jump.limit));
    return true;
}

bool
PacketFastForward::AlignToPackets(Jump& jump)
{
    if (!jump.stoppedByOther || !m_alignToPackets || m_congestedRates)
    {
        return true;
    }
    // a whole number of the slowest queue pair's packet periods: that keeps the phase of every
    // queue pair whose period divides it (one at its port's line rate, several sharing a NIC
    // round robin), and the ACKs and CNPs that queue behind their frames
    double period = 0.0;
    for (std::size_t i = 0; i < m_live.size(); ++i)
    {
        period = std::max(period, static_cast<double>(m_net->m_mtu) / m_rate[i]);
    }
    double whole = std::floor(static_cast<double>(jump.delta) / period) * period;
    NS_LOG_DEBUG("  aligned to " << period << " ns packets: " << jump.delta << " -> "
                                 << std::llround(whole) << " ns");
    int64_t aligned = std::llround(whole);
    if (aligned < 1)
    {
        // the event comes within one period: its packets are simulated, and a chain goes on
        // after it
        m_alignRestNs = jump.delta;
        return false;
    }
    // the packets up to the event are simulated; the chained check looks after it
    m_alignRestNs = jump.delta - aligned;
    jump.delta = aligned;
    return true;
}

uint64_t
PacketFastForward::AdvanceQueuePairs(int64_t delta,
                                     std::vector<const EventImpl*>* moved,
                                     std::vector<uint64_t>* skippedBytes)
{
    // shorten each queue pair's byte stream by what the skip delivers
    const auto& qps = m_net->m_qps;
    uint64_t mtu = m_net->m_mtu;
    uint64_t total = 0;
    for (std::size_t i = 0; i < m_live.size(); ++i)
    {
        RdmaQueuePair* qp = qps[m_live[i]].get();
        // whole packets, rounded to the nearest: the difference is carried (per queue pair,
        // across episodes) into the next skip, so skips neither lag nor lead on average; a
        // rounding that always went down would leave each queue pair half a packet behind per
        // episode, and a collective that waits for it later by as much
        double& carry = m_carry[m_live[i]];
        double due = m_rate[i] * static_cast<double>(delta) + carry;
        uint64_t bytes =
            due > 0 ? static_cast<uint64_t>(std::llround(due / static_cast<double>(mtu))) * mtu : 0;
        // at least one packet of the message is left to the packet simulation (Guard = 0); the
        // bytes come out of the message being sent, and every later message moves up by as much
        uint64_t end = FirstEnd(qp);
        uint64_t room = (end - qp->sndNxt - 1) / mtu * mtu;
        bytes = std::min(bytes, room);
        carry = due - static_cast<double>(bytes);
        NS_LOG_DEBUG("  flow " << qp->flowId << " slot " << m_live[i] << " rate " << m_rate[i]
                               << " B/ns, " << bytes << " bytes, carry " << carry << ", left "
                               << end - bytes - qp->sndUna << " of its message");
        ShortenStream(qp, end, bytes);
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
        ShiftEventId(qp->rtoEvent, delta, moved);
        qp->cc->ShiftClock(delta, moved);
        (*skippedBytes)[i] = bytes;
    }
    return total;
}

void
PacketFastForward::ShortenStream(RdmaQueuePair* qp, uint64_t end, uint64_t bytes)
{
    qp->size -= bytes;
    qp->posted -= bytes;
    for (uint64_t& e : qp->sendEnds)
    {
        e -= e >= end ? bytes : 0;
    }
    for (auto& [e, msg] : qp->recvEnds)
    {
        if (e < end)
        {
            continue;
        }
        auto span = m_net->m_msgSpan.find(msg);
        if (e == end)
        {
            if (span != m_net->m_msgSpan.end())
            {
                span->second.second -= bytes;
                m_net->m_msgFf[msg] += bytes;
            }
        }
        else if (span != m_net->m_msgSpan.end())
        {
            span->second.first -= bytes;
        }
        e -= bytes;
    }
    qp->ffBytes += bytes;
}

void
PacketFastForward::AdvanceCounters(int64_t delta, std::vector<const EventImpl*>* moved)
{
    const auto& qps = m_net->m_qps;
    double d = static_cast<double>(delta);
    if (m_congestedRates)
    {
        // the equilibrium's CNPs, at the rate each queue pair received them
        for (std::size_t i = 0; i < m_live.size(); ++i)
        {
            qps[m_live[i]]->cnps += static_cast<uint64_t>(std::llround(m_cnpRate[i] * d));
        }
    }
    for (std::size_t v = 0; v < m_net->m_nics.size(); ++v)
    {
        if (m_net->m_nics[v])
        {
            m_net->m_nics[v]->ShiftClock(delta,
                                         moved,
                                         static_cast<uint64_t>(std::llround(m_ackRate[v] * d)),
                                         static_cast<uint64_t>(std::llround(m_cnpOutRate[v] * d)));
        }
    }
    m_net->m_sampler.ShiftClock(delta, moved);
    if (m_net->m_memo)
    {
        m_net->m_memo->ShiftClock(delta, moved);
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
        if (m_markRate[p] > 0 || m_pauseRate[p] > 0)
        {
            m_net->m_portDev[p]->AddFastForwardSignals(
                static_cast<uint64_t>(std::llround(m_markRate[p] * d)),
                static_cast<uint64_t>(std::llround(m_pauseRate[p] * d)));
        }
    }
}

void
PacketFastForward::AdvanceControllers(int64_t delta, const std::vector<uint64_t>& skippedBytes)
{
    // congestion control: what the interval did to it, in the moved clock (rate changes re-time
    // pacing relative to the moved send times); a controller in a congested equilibrium (it
    // received CNPs) keeps its state, the cuts and recoveries of the interval cancelling
    const auto& qps = m_net->m_qps;
    for (std::size_t i = 0; i < m_live.size(); ++i)
    {
        if (m_hold[i])
        {
            qps[m_live[i]]->cc->HoldSkipped(delta);
        }
        else
        {
            qps[m_live[i]]->cc->AdvanceSkipped(delta, skippedBytes[i]);
        }
    }
}

void
PacketFastForward::RememberSkip(const Jump& jump)
{
    const auto& qps = m_net->m_qps;
    std::size_t n = m_live.size();
    m_chain = jump.stoppedByOther || jump.boundary;
    m_atBoundary = !jump.stoppedByOther && jump.boundary;
    if (m_atBoundary)
    {
        // until the boundaries the skip stopped before are delivered: what is left of their
        // messages (in flight included) at the settled rates
        m_boundaryWaitNs = 1;
        for (std::size_t i = 0; i < n; ++i)
        {
            if (jump.reach[i] <= jump.limit + 1000.0)
            {
                const RdmaQueuePair* qp = qps[m_live[i]].get();
                double left = static_cast<double>(FirstEnd(qp) - qp->sndUna) / m_rate[i];
                m_boundaryWaitNs = std::max(m_boundaryWaitNs, static_cast<int64_t>(left) + 1);
            }
        }
    }
    m_skipSig.resize(n);
    for (std::size_t i = 0; i < n; ++i)
    {
        m_skipSig[i] = QpSignature(qps[m_live[i]].get());
    }
    // the connection of each queue pair (a later message may open a new queue pair on it)
    m_rateConn.assign(n, std::numeric_limits<uint32_t>::max());
    if (m_atBoundary)
    {
        std::unordered_map<uint32_t, std::size_t> index;
        for (std::size_t i = 0; i < n; ++i)
        {
            index[m_live[i]] = i;
        }
        for (const auto& [conn, slot] : m_net->m_connSlot)
        {
            auto it = index.find(slot);
            if (it != index.end())
            {
                m_rateConn[it->second] = conn;
            }
        }
    }
    m_skipPortSig.resize(m_net->m_portDev.size());
    for (std::size_t p = 0; p < m_skipPortSig.size(); ++p)
    {
        const QbbNetDevice* dev = PeekPointer(m_net->m_portDev[p]);
        m_skipPortSig[p] = dev->GetEcnMarks() + dev->GetPauseSent() + dev->GetDrops();
    }
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
