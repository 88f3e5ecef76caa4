/*
 * HeteroSim: memoization of repeated contention episodes of the packet network.
 */
#include "packet-episode-cache.h"

#include "packet-network.h"

#include "ns3/boolean.h"
#include "ns3/log.h"
#include "ns3/shiftable-scheduler.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <numeric>
#include <sstream>
#include <unordered_map>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PacketEpisodeCache");
NS_OBJECT_ENSURE_REGISTERED(PacketEpisodeCache);

namespace
{
enum Stat
{
    LOOKUPS = 0,
    HITS,
    RECORDED,
    DISCARDED,
    BUSY,
    NOT_ELIGIBLE,
    INTERRUPTED,
    QPS_REPLAYED,
    BYTES_REPLAYED,
    FRAMES_AVOIDED,
    ENTRIES,
    REFUSED,
    SAMPLES,
    CONGESTED
};

/** Number of per-queue-pair counters stored: retransmits, timeouts, NACKs, CNPs. */
constexpr std::size_t N_QP_COUNTERS = 4;

/** \return whether queue pair \p qp is done: all delivered and acknowledged */
bool
Done(const RdmaQueuePair* qp)
{
    return qp->IsFinished() && qp->recvEnds.empty();
}
} // namespace

TypeId
PacketEpisodeCache::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::PacketEpisodeCache")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<PacketEpisodeCache>()
            .AddAttribute("TrajectoryInterval",
                          "Period of the trajectory samples of a recorded episode (what an "
                          "interrupted replay is materialised from, by linear interpolation "
                          "between samples)",
                          TimeValue(MicroSeconds(10)),
                          MakeTimeAccessor(&PacketEpisodeCache::m_sampleInterval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("MaxEntries",
                          "Most distinct episode keys stored (later episodes with a new key run "
                          "packet by packet unrecorded)",
                          UintegerValue(65536),
                          MakeUintegerAccessor(&PacketEpisodeCache::m_maxEntries),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("CongestedRecordings",
                          "Recordings kept of an episode whose first recording saw ECN marks, "
                          "CNPs, PFC pauses or drops, replayed in turn: RED marks at random, so "
                          "each occurrence of such an episode is one draw of its outcome and "
                          "the replays reproduce the distribution of the draws recorded (an "
                          "episode without any is recorded once)",
                          UintegerValue(4),
                          MakeUintegerAccessor(&PacketEpisodeCache::m_congestedRecordings),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("ReplayCongested",
                          "Replay episodes whose first recording saw ECN marks, CNPs, PFC "
                          "pauses or drops (false: they run packet by packet every time). An "
                          "episode is keyed on its own links, but a congested one also depends "
                          "on the switches' shared buffers (PFC thresholds are set by the whole "
                          "switch's occupancy): replaying it frees buffer for the episodes "
                          "running beside it and changes their pauses and marks",
                          BooleanValue(false),
                          MakeBooleanAccessor(&PacketEpisodeCache::m_replayCongested),
                          MakeBooleanChecker())
            .AddAttribute("MaxSamples",
                          "Most trajectory samples a recording keeps: a longer episode keeps "
                          "every other sample and samples half as often each time it reaches "
                          "this many (bounds the memory of a recording)",
                          UintegerValue(64),
                          MakeUintegerAccessor(&PacketEpisodeCache::m_maxSamples),
                          MakeUintegerChecker<uint32_t>(2))
            .AddTraceSource("Lookup",
                            "An episode that started idle was looked up (time ns, queue pairs, "
                            "hit)",
                            MakeTraceSourceAccessor(&PacketEpisodeCache::m_lookupTrace),
                            "ns3::PacketEpisodeCache::LookupTracedCallback")
            .AddTraceSource("Interrupt",
                            "A replay was materialised before its end (time ns, queue pairs)",
                            MakeTraceSourceAccessor(&PacketEpisodeCache::m_interruptTrace),
                            "ns3::PacketEpisodeCache::InterruptTracedCallback");
    return tid;
}

PacketEpisodeCache::PacketEpisodeCache()
{
    NS_LOG_FUNCTION(this);
}

PacketEpisodeCache::~PacketEpisodeCache()
{
    NS_LOG_FUNCTION(this);
}

void
PacketEpisodeCache::Attach(PacketNetwork* net)
{
    m_net = net;
    m_linkOwners.assign(net->m_desc->GetNLinks(), {});
}

void
PacketEpisodeCache::QueuePairCreated(uint32_t slot, EventId start)
{
    NS_LOG_FUNCTION(this << slot);
    if (m_groupOf.size() <= slot)
    {
        m_groupOf.resize(slot + 1, -1);
    }
    m_pending.push_back(slot);
    m_pendingStarts.push_back(start);
    m_pendingAppended.push_back(false);
    if (!m_sealEvent.IsPending())
    {
        m_sealEvent = Simulator::ScheduleNow(&PacketEpisodeCache::Seal, this);
    }
}

void
PacketEpisodeCache::MessageAppended(uint32_t slot)
{
    for (std::size_t i = 0; i < m_pending.size(); ++i)
    {
        if (m_pending[i] == slot)
        {
            m_pendingAppended[i] = true;
            return;
        }
    }
    if (slot >= m_groupOf.size() || m_groupOf[slot] < 0)
    {
        return;
    }
    auto id = static_cast<uint32_t>(m_groupOf[slot]);
    if (m_groups[id].state == State::REPLAYING)
    {
        Materialise(id);
    }
    else if (m_groups[id].state == State::RECORDING && !m_net->m_qps[slot]->IsFinished())
    {
        Discard(id);
    }
}

void
PacketEpisodeCache::Delivered(uint32_t slot)
{
    if (slot >= m_groupOf.size() || m_groupOf[slot] < 0)
    {
        return;
    }
    Group& g = m_groups[static_cast<std::size_t>(m_groupOf[slot])];
    if (g.state != State::RECORDING)
    {
        return;
    }
    auto it = std::find(g.slots.begin(), g.slots.end(), slot);
    g.deliverNs[it - g.slots.begin()] = Simulator::Now().GetNanoSeconds() - g.t0;
}

void
PacketEpisodeCache::Fault()
{
    NS_LOG_FUNCTION(this);
    m_faulted = true;
    for (uint32_t id = 0; id < m_groups.size(); ++id)
    {
        if (m_groups[id].state == State::REPLAYING)
        {
            Materialise(id);
        }
        else if (m_groups[id].state == State::RECORDING)
        {
            Discard(id);
        }
    }
}

void
PacketEpisodeCache::ShiftClock(int64_t deltaNs, std::vector<const EventImpl*>* moved)
{
    ShiftEventId(m_sampleEvent, deltaNs, moved);
}

void
PacketEpisodeCache::Describe(Group& g)
{
    const Ptr<TopologyDescription>& desc = m_net->m_desc;
    std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> canon; // link -> (id, first from)
    std::vector<uint32_t> order;
    std::ostringstream key;
    key << std::setprecision(17);
    auto walk = [&](uint32_t from, uint32_t to, uint32_t hash) {
        uint32_t node = from;
        uint32_t hop = 0;
        while (node != to && hop <= desc->GetNNodes())
        {
            const auto& set = desc->GetNextHops(node, to);
            NS_ASSERT_MSG(!set.empty(), "no route from node " << node << " to " << to);
            uint32_t link = set.size() == 1
                                ? set[0]
                                : set[TopologyDescription::EcmpIndex(hash, hop, set.size())];
            auto it = canon.find(link);
            if (it == canon.end())
            {
                it = canon.emplace(link, std::make_pair(static_cast<uint32_t>(order.size()), node))
                         .first;
                order.push_back(link);
            }
            key << it->second.first << (it->second.second == node ? '+' : '-') << ' ';
            node = desc->GetOtherEnd(link, node);
            ++hop;
        }
    };
    for (uint32_t slot : g.slots)
    {
        const RdmaQueuePair* qp = m_net->m_qps[slot].get();
        key << "q " << qp->size << ' ' << static_cast<uint32_t>(qp->priority) << ' '
            << qp->srcDelayNs << ' ' << qp->deliverDelayNs << ' ' << qp->lineRate << ' '
            << qp->portRate << " d ";
        walk(qp->srcNode, qp->dstNode, qp->hash);
        key << "a ";
        walk(qp->dstNode, qp->srcNode, qp->ackHash);
    }
    g.links.clear();
    g.ports.clear();
    for (uint32_t link : order)
    {
        key << "l " << desc->GetLinkRateBps(link) << ' ' << desc->GetLinkDelayNs(link) << ' '
            << static_cast<uint32_t>(desc->GetLinkKind(link)) << ' ';
        g.links.push_back(link);
        uint32_t first = canon[link].second == desc->GetLinkA(link) ? 2 * link : 2 * link + 1;
        g.ports.push_back(first);
        g.ports.push_back(first ^ 1U);
    }
    g.key = key.str();
}

void
PacketEpisodeCache::Seal()
{
    NS_LOG_FUNCTION(this);
    int64_t now = Simulator::Now().GetNanoSeconds();
    std::vector<uint32_t> pending = std::move(m_pending);
    std::vector<EventId> starts = std::move(m_pendingStarts);
    std::vector<bool> appended = std::move(m_pendingAppended);
    m_pending.clear();
    m_pendingStarts.clear();
    m_pendingAppended.clear();
    for (const std::vector<std::size_t>& comp : SharedLinkComponents(pending))
    {
        bool eligible = !m_faulted;
        uint32_t id = OpenGroup(comp, pending, starts, appended, now, eligible);
        bool idle = TakeLinks(id);
        if (!eligible || !idle)
        {
            ++m_stats[eligible ? BUSY : NOT_ELIGIBLE];
            RunInPackets(m_groups[id]);
            continue;
        }
        LookUp(id, now);
    }
}

std::vector<std::vector<std::size_t>>
PacketEpisodeCache::SharedLinkComponents(const std::vector<uint32_t>& pending)
{
    std::size_t n = pending.size();
    // components of "shares a link" among the queue pairs of this instant (union-find)
    std::vector<std::vector<uint32_t>> links(n);
    for (std::size_t i = 0; i < n; ++i)
    {
        Group one;
        one.slots = {pending[i]};
        Describe(one);
        links[i] = std::move(one.links);
    }
    std::vector<std::size_t> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    std::function<std::size_t(std::size_t)> root = [&](std::size_t x) {
        while (parent[x] != x)
        {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        return x;
    };
    std::unordered_map<uint32_t, std::size_t> linkFirst;
    for (std::size_t i = 0; i < n; ++i)
    {
        for (uint32_t l : links[i])
        {
            auto [it, fresh] = linkFirst.emplace(l, i);
            if (!fresh)
            {
                parent[root(i)] = root(it->second);
            }
        }
    }
    std::vector<std::vector<std::size_t>> members;
    std::unordered_map<std::size_t, std::size_t> compOf;
    for (std::size_t i = 0; i < n; ++i)
    {
        auto [it, fresh] = compOf.emplace(root(i), members.size());
        if (fresh)
        {
            members.emplace_back();
        }
        members[it->second].push_back(i);
    }
    return members;
}

uint32_t
PacketEpisodeCache::OpenGroup(const std::vector<std::size_t>& comp,
                              const std::vector<uint32_t>& pending,
                              const std::vector<EventId>& starts,
                              const std::vector<bool>& appended,
                              int64_t now,
                              bool& eligible)
{
    auto id = static_cast<uint32_t>(m_groups.size());
    m_groups.emplace_back();
    Group& g = m_groups.back();
    g.t0 = now;
    for (std::size_t i : comp)
    {
        const RdmaQueuePair* qp = m_net->m_qps[pending[i]].get();
        g.slots.push_back(pending[i]);
        g.starts.push_back(starts[i]);
        m_groupOf[pending[i]] = id;
        // a start due now may already have run; a message appended or a queue pair with
        // more than one message is not the episode its key describes
        eligible = eligible && !appended[i] && starts[i].IsPending() &&
                   starts[i].GetTs() > static_cast<uint64_t>(now) && qp->posted == qp->size &&
                   qp->sendEnds.size() == 1 && qp->recvEnds.size() == 1;
    }
    Describe(g);
    return id;
}

bool
PacketEpisodeCache::TakeLinks(uint32_t id)
{
    bool idle = Claim(m_groups[id].links, id);
    Group& h = m_groups[id]; // Claim may materialise replays: no new groups, but be safe
    for (uint32_t l : h.links)
    {
        m_linkOwners[l].push_back(id);
    }
    if (idle)
    {
        for (uint32_t p : h.ports)
        {
            const QbbNetDevice* dev = PeekPointer(m_net->m_portDev[p]);
            bool paused = false;
            for (uint8_t q = 0; q < QbbNetDevice::N_PRIORITIES; ++q)
            {
                paused = paused || dev->IsPaused(q);
            }
            idle = idle && dev->GetTotalQueueBytes() == 0 && !paused;
        }
    }
    return idle;
}

void
PacketEpisodeCache::LookUp(uint32_t id, int64_t now)
{
    Group& h = m_groups[id];
    ++m_stats[LOOKUPS];
    auto found = m_entries.find(h.key);
    if (found != m_entries.end() && found->second.recordings.front()->congested &&
        !m_replayCongested)
    {
        // a congested episode depends on the switches' shared buffers, which other
        // traffic fills: it runs packet by packet every time
        ++m_stats[CONGESTED];
        RunInPackets(h);
        return;
    }
    bool hit = found != m_entries.end() &&
               found->second.recordings.size() >=
                   (found->second.recordings.front()->congested ? m_congestedRecordings : 1U);
    m_lookupTrace(now, static_cast<uint32_t>(h.slots.size()), hit);
    if (hit)
    {
        Recordings& r = found->second;
        StartReplay(id, r.recordings[r.next++ % r.recordings.size()]);
        return;
    }
    if (found == m_entries.end() && m_entries.size() >= m_maxEntries)
    {
        ++m_stats[REFUSED];
        h.state = State::EXACT;
        h.key.clear();
    }
    else
    {
        StartRecording(id);
    }
    HandToFastForward(h);
}

void
PacketEpisodeCache::StartRecording(uint32_t id)
{
    Group& h = m_groups[id];
    h.state = State::RECORDING;
    h.rec = std::make_shared<Entry>();
    for (uint32_t p : h.ports)
    {
        h.base.push_back(Read(p));
    }
    h.deliverNs.assign(h.slots.size(), -1);
    h.sampleStrideNs = m_sampleInterval.GetNanoSeconds();
    SampleGroup(h);
    m_recording.push_back(id);
    if (!m_sampleEvent.IsPending())
    {
        m_sampleEvent =
            Simulator::Schedule(m_sampleInterval, &PacketEpisodeCache::SampleRecordings, this);
    }
}

void
PacketEpisodeCache::RunInPackets(Group& h)
{
    h.state = State::EXACT;
    h.key.clear();
    HandToFastForward(h);
}

void
PacketEpisodeCache::HandToFastForward(const Group& h)
{
    if (m_net->m_ff)
    {
        for (uint32_t slot : h.slots)
        {
            m_net->m_ff->QueuePairAdded(slot);
        }
    }
}

bool
PacketEpisodeCache::Claim(const std::vector<uint32_t>& links, uint32_t self)
{
    bool idle = true;
    for (uint32_t l : links)
    {
        std::vector<uint32_t> owners = m_linkOwners[l];
        for (uint32_t o : owners)
        {
            if (o == self || !Live(o))
            {
                continue;
            }
            State s = m_groups[o].state;
            if (s == State::REPLAYING)
            {
                Materialise(o);
            }
            else if (s == State::RECORDING)
            {
                Discard(o);
            }
            idle = false;
        }
    }
    return idle;
}

bool
PacketEpisodeCache::Live(uint32_t id)
{
    Group& g = m_groups[id];
    switch (g.state)
    {
    case State::DONE:
        return false;
    case State::PENDING:
    case State::REPLAYING:
        return true;
    case State::RECORDING:
        return !TryFinishRecording(id);
    case State::EXACT:
        for (uint32_t slot : g.slots)
        {
            if (!Done(m_net->m_qps[slot].get()))
            {
                return true;
            }
        }
        g.state = State::DONE;
        Release(id);
        return false;
    }
    return true;
}

PacketEpisodeCache::PortCounters
PacketEpisodeCache::Read(uint32_t port) const
{
    const QbbNetDevice* d = PeekPointer(m_net->m_portDev[port]);
    PortCounters c;
    c.tx = d->GetTxBytes();
    c.frames = d->GetTxFrames();
    c.pauseSent = d->GetPauseSent();
    c.pauseReceived = d->GetPauseReceived();
    c.pausedNs = d->GetPausedNs();
    c.marks = d->GetEcnMarks();
    c.drops = d->GetDrops();
    c.area = d->GetMeanQueueBytes() * static_cast<double>(Simulator::Now().GetNanoSeconds());
    c.maxQueue = d->GetMaxQueueBytes();
    return c;
}

namespace
{
/** Counters gained from \p a to \p b (the maximum only where it rose). */
template <class C>
C
Gain(const C& a, const C& b)
{
    C d;
    d.tx = b.tx - a.tx;
    d.frames = b.frames - a.frames;
    d.pauseSent = b.pauseSent - a.pauseSent;
    d.pauseReceived = b.pauseReceived - a.pauseReceived;
    d.pausedNs = b.pausedNs - a.pausedNs;
    d.marks = b.marks - a.marks;
    d.drops = b.drops - a.drops;
    d.area = b.area - a.area;
    d.maxQueue = b.maxQueue > a.maxQueue ? b.maxQueue : 0;
    return d;
}

/** Linear interpolation of counters, \p f in [0, 1] of the way from \p a to \p b. */
template <class C>
C
Between(const C& a, const C& b, double f)
{
    auto mix = [f](uint64_t x, uint64_t y) {
        return x + static_cast<uint64_t>(std::llround(f * static_cast<double>(y - x)));
    };
    C d;
    d.tx = mix(a.tx, b.tx);
    d.frames = mix(a.frames, b.frames);
    d.pauseSent = mix(a.pauseSent, b.pauseSent);
    d.pauseReceived = mix(a.pauseReceived, b.pauseReceived);
    d.pausedNs = a.pausedNs + std::llround(f * static_cast<double>(b.pausedNs - a.pausedNs));
    d.marks = mix(a.marks, b.marks);
    d.drops = mix(a.drops, b.drops);
    d.area = a.area + f * (b.area - a.area);
    d.maxQueue = f > 0 ? b.maxQueue : a.maxQueue;
    return d;
}
} // namespace

void
PacketEpisodeCache::AddToPort(uint32_t port, const PortCounters& c)
{
    QbbNetDevice* d = PeekPointer(m_net->m_portDev[port]);
    d->AddFastForwardTraffic(c.tx, c.frames);
    d->AddMemoizedCounters(
        c.pauseSent, c.pauseReceived, c.pausedNs, c.marks, c.drops, c.area, c.maxQueue);
}

void
PacketEpisodeCache::SampleGroup(Group& g)
{
    Entry& e = *g.rec;
    int64_t off = Simulator::Now().GetNanoSeconds() - g.t0;
    if (!e.sampleNs.empty() && off - e.sampleNs.back() < g.sampleStrideNs)
    {
        return;
    }
    if (e.sampleNs.size() >= m_maxSamples)
    {
        // a long episode: keep every other sample and sample half as often from now on, so a
        // recording holds at most MaxSamples samples (the first, at offset 0, is kept)
        std::size_t n = g.slots.size();
        std::size_t nPorts = g.ports.size();
        std::size_t kept = 0;
        for (std::size_t k = 0; k < e.sampleNs.size(); k += 2, ++kept)
        {
            e.sampleNs[kept] = e.sampleNs[k];
            std::copy_n(e.sampleDelivered.begin() + k * n, n, e.sampleDelivered.begin() + kept * n);
            std::copy_n(e.sampleRate.begin() + k * n, n, e.sampleRate.begin() + kept * n);
            std::copy_n(e.sampleCnps.begin() + k * n, n, e.sampleCnps.begin() + kept * n);
            std::copy_n(
                e.samplePorts.begin() + k * nPorts, nPorts, e.samplePorts.begin() + kept * nPorts);
        }
        e.sampleNs.resize(kept);
        e.sampleDelivered.resize(kept * n);
        e.sampleRate.resize(kept * n);
        e.sampleCnps.resize(kept * n);
        e.samplePorts.resize(kept * nPorts);
        g.sampleStrideNs *= 2;
        if (off - e.sampleNs.back() < g.sampleStrideNs)
        {
            return;
        }
    }
    e.sampleNs.push_back(off);
    for (uint32_t slot : g.slots)
    {
        const RdmaQueuePair* qp = m_net->m_qps[slot].get();
        e.sampleDelivered.push_back(qp->rcvNxt + qp->ffBytes);
        e.sampleRate.push_back(qp->cc->GetRate());
        e.sampleCnps.push_back(qp->cnps);
    }
    for (std::size_t p = 0; p < g.ports.size(); ++p)
    {
        e.samplePorts.push_back(Gain(g.base[p], Read(g.ports[p])));
    }
}

void
PacketEpisodeCache::SampleRecordings()
{
    std::vector<uint32_t> ids = m_recording;
    for (uint32_t id : ids)
    {
        if (m_groups[id].state == State::RECORDING && !TryFinishRecording(id))
        {
            SampleGroup(m_groups[id]);
        }
    }
    if (!m_recording.empty())
    {
        m_sampleEvent =
            Simulator::Schedule(m_sampleInterval, &PacketEpisodeCache::SampleRecordings, this);
    }
}

bool
PacketEpisodeCache::TryFinishRecording(uint32_t id)
{
    Group& g = m_groups[id];
    for (std::size_t i = 0; i < g.slots.size(); ++i)
    {
        if (!Done(m_net->m_qps[g.slots[i]].get()) || g.deliverNs[i] < 0)
        {
            return false;
        }
    }
    Entry& e = *g.rec;
    e.deliverNs = g.deliverNs;
    for (uint32_t slot : g.slots)
    {
        const RdmaQueuePair* qp = m_net->m_qps[slot].get();
        e.doneNs.push_back(qp->senderDoneNs - g.t0);
        e.endNs = std::max(e.endNs, qp->senderDoneNs - g.t0);
        e.qpCounters.insert(e.qpCounters.end(),
                            {qp->retransmits, qp->timeouts, qp->nacks, qp->cnps});
    }
    for (int64_t d : e.deliverNs)
    {
        e.endNs = std::max(e.endNs, d);
    }
    for (std::size_t p = 0; p < g.ports.size(); ++p)
    {
        const PortCounters& c = e.ports.emplace_back(Gain(g.base[p], Read(g.ports[p])));
        e.frames += c.frames;
        e.congested = e.congested || c.marks > 0 || c.pauseSent > 0 || c.drops > 0;
    }
    for (std::size_t i = 0; i < g.slots.size(); ++i)
    {
        e.congested = e.congested || e.qpCounters[N_QP_COUNTERS * i + 3] > 0;
    }
    auto found = m_entries.find(g.key);
    if (found == m_entries.end() && m_entries.size() < m_maxEntries)
    {
        found = m_entries.emplace(g.key, Recordings{}).first;
    }
    if (found != m_entries.end() &&
        (found->second.recordings.empty() ||
         found->second.recordings.size() <
             (found->second.recordings.front()->congested ? m_congestedRecordings : 1U)))
    {
        found->second.recordings.push_back(g.rec);
        ++m_stats[RECORDED];
        m_stats[SAMPLES] += e.sampleNs.size();
        m_stats[ENTRIES] = m_entries.size();
        NS_LOG_INFO("recorded an episode of " << g.slots.size() << " queue pairs, " << e.endNs
                                              << " ns, " << e.frames << " frames");
    }
    m_recording.erase(std::find(m_recording.begin(), m_recording.end(), id));
    g.state = State::DONE;
    Release(id);
    return true;
}

void
PacketEpisodeCache::Discard(uint32_t id)
{
    NS_LOG_FUNCTION(this << id);
    Group& g = m_groups[id];
    ++m_stats[DISCARDED];
    g.state = State::EXACT;
    g.rec.reset();
    g.base.clear();
    g.key.clear();
    m_recording.erase(std::find(m_recording.begin(), m_recording.end(), id));
}

void
PacketEpisodeCache::StartReplay(uint32_t id, std::shared_ptr<const Entry> e)
{
    Group& g = m_groups[id];
    NS_LOG_INFO("replaying an episode of " << g.slots.size() << " queue pairs, " << e->endNs
                                           << " ns");
    g.state = State::REPLAYING;
    g.play = e;
    g.delivered.assign(g.slots.size(), false);
    g.qpCounted.assign(g.slots.size(), false);
    for (std::size_t i = 0; i < g.slots.size(); ++i)
    {
        Simulator::Cancel(g.starts[i]);
        RdmaQueuePair* qp = m_net->m_qps[g.slots[i]].get();
        qp->startNs = g.t0 + qp->srcDelayNs;
        g.events.push_back(Simulator::Schedule(NanoSeconds(e->deliverNs[i]),
                                               &PacketEpisodeCache::ReplayDeliver,
                                               this,
                                               id,
                                               static_cast<uint32_t>(i)));
        m_stats[BYTES_REPLAYED] += qp->size;
    }
    for (std::size_t i = 0; i < g.slots.size(); ++i)
    {
        g.events.push_back(Simulator::Schedule(NanoSeconds(e->doneNs[i]),
                                               &PacketEpisodeCache::ReplayDone,
                                               this,
                                               id,
                                               static_cast<uint32_t>(i)));
    }
    g.events.push_back(
        Simulator::Schedule(NanoSeconds(e->endNs), &PacketEpisodeCache::ReplayEnd, this, id));
    ++m_stats[HITS];
    m_stats[QPS_REPLAYED] += g.slots.size();
    ++const_cast<Entry&>(*e).hits;
}

void
PacketEpisodeCache::ReplayDeliver(uint32_t id, uint32_t i)
{
    Group& g = m_groups[id];
    RdmaQueuePair* qp = m_net->m_qps[g.slots[i]].get();
    g.delivered[i] = true;
    uint32_t flowId = qp->recvEnds.front().second;
    qp->rcvNxt = qp->size;
    qp->recvEnds.clear();
    qp->delivered = true;
    if (std::all_of(g.delivered.begin(), g.delivered.end(), [](bool d) { return d; }))
    {
        // the ports count the whole episode at its last delivery: a run that stops when its
        // last flow completes still counts it (the trailing ACKs a little early)
        const Entry& e = *g.play;
        for (std::size_t p = 0; p < g.ports.size(); ++p)
        {
            AddToPort(g.ports[p], e.ports[p]);
        }
        m_stats[FRAMES_AVOIDED] += e.frames;
        g.counted = true;
        if (m_net->m_ff)
        {
            m_net->m_ff->Changed();
        }
    }
    m_net->Delivered(qp->slot, flowId);
}

void
PacketEpisodeCache::ReplayDone(uint32_t id, uint32_t i)
{
    Group& g = m_groups[id];
    const Entry& e = *g.play;
    RdmaQueuePair* qp = m_net->m_qps[g.slots[i]].get();
    qp->sndUna = qp->sndNxt = qp->maxSent = qp->size;
    qp->sendEnds.clear();
    qp->senderDoneNs = Simulator::Now().GetNanoSeconds();
    qp->active = false;
    qp->retransmits += e.qpCounters[N_QP_COUNTERS * i];
    qp->timeouts += e.qpCounters[N_QP_COUNTERS * i + 1];
    qp->nacks += e.qpCounters[N_QP_COUNTERS * i + 2];
    qp->cnps += e.qpCounters[N_QP_COUNTERS * i + 3];
    g.qpCounted[i] = true;
    qp->cc->Stop();
}

void
PacketEpisodeCache::ReplayEnd(uint32_t id)
{
    Group& g = m_groups[id];
    g.events.clear();
    g.play.reset();
    g.state = State::DONE;
    Release(id);
    if (m_net->m_ff)
    {
        m_net->m_ff->Changed();
    }
}

void
PacketEpisodeCache::Materialise(uint32_t id)
{
    Group& g = m_groups[id];
    const Entry& e = *g.play;
    int64_t now = Simulator::Now().GetNanoSeconds();
    int64_t off = now - g.t0;
    NS_LOG_INFO("materialising a replay of " << g.slots.size() << " queue pairs at offset " << off
                                             << " ns");
    for (EventId& ev : g.events)
    {
        Simulator::Cancel(ev);
    }
    g.events.clear();
    std::size_t n = g.slots.size();
    ReplayPoint at = PointAt(e, off);
    for (std::size_t i = 0; i < n; ++i)
    {
        if (g.qpCounted[i])
        {
            continue; // acknowledged in full in the replay
        }
        MaterialiseQueuePair(g, i, at, now);
    }
    if (!g.counted)
    {
        AddPortsUpTo(g, at);
    }
    g.play.reset();
    g.state = State::EXACT;
    ++m_stats[INTERRUPTED];
    m_interruptTrace(now, static_cast<uint32_t>(n));
    if (m_net->m_ff)
    {
        m_net->m_ff->Changed();
    }
}

PacketEpisodeCache::ReplayPoint
PacketEpisodeCache::PointAt(const Entry& e, int64_t off)
{
    ReplayPoint at;
    // the samples around the offset; past the last one, the episode's end
    at.k = static_cast<std::size_t>(std::upper_bound(e.sampleNs.begin(), e.sampleNs.end(), off) -
                                    e.sampleNs.begin() - 1);
    at.last = at.k + 1 >= e.sampleNs.size();
    int64_t t1 = at.last ? e.endNs : e.sampleNs[at.k + 1];
    double f = t1 > e.sampleNs[at.k] ? static_cast<double>(off - e.sampleNs[at.k]) /
                                           static_cast<double>(t1 - e.sampleNs[at.k])
                                     : 0.0;
    at.f = std::clamp(f, 0.0, 1.0);
    return at;
}

void
PacketEpisodeCache::MaterialiseQueuePair(Group& g,
                                         std::size_t i,
                                         const ReplayPoint& at,
                                         int64_t now)
{
    const Entry& e = *g.play;
    std::size_t n = g.slots.size();
    std::size_t k = at.k;
    bool last = at.last;
    double f = at.f;
    RdmaQueuePair* qp = m_net->m_qps[g.slots[i]].get();
    uint64_t cnpsBefore = e.sampleCnps[k * n + i];
    uint64_t cnpsAfter = last ? e.qpCounters[N_QP_COUNTERS * i + 3] : e.sampleCnps[(k + 1) * n + i];
    qp->cnps += cnpsBefore + static_cast<uint64_t>(
                                 std::llround(f * static_cast<double>(cnpsAfter - cnpsBefore)));
    if (g.delivered[i])
    {
        // delivered in the replay: its last acknowledgement is taken as arrived now
        qp->sndUna = qp->sndNxt = qp->maxSent = qp->size;
        qp->sendEnds.clear();
        qp->senderDoneNs = now;
        qp->cc->Stop();
        return;
    }
    uint64_t mtu = m_net->m_mtu;
    double lo = static_cast<double>(e.sampleDelivered[k * n + i]);
    double hi = last ? static_cast<double>(qp->size)
                     : static_cast<double>(e.sampleDelivered[(k + 1) * n + i]);
    auto got = static_cast<uint64_t>(lo + f * (hi - lo));
    uint64_t bytes = std::min(got / mtu * mtu, (qp->size - 1) / mtu * mtu);
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
    double rate = e.sampleRate[k * n + i];
    if (rate < qp->lineRate)
    {
        qp->cc->RestoreRate(rate);
    }
    int64_t startAt = std::max(now, g.t0 + qp->srcDelayNs);
    Simulator::Schedule(
        NanoSeconds(startAt - now), &RdmaNic::StartQueuePair, m_net->m_nics[qp->srcNode], qp->slot);
    if (m_net->m_ff)
    {
        m_net->m_ff->QueuePairAdded(qp->slot);
    }
}

void
PacketEpisodeCache::AddPortsUpTo(const Group& g, const ReplayPoint& at)
{
    const Entry& e = *g.play;
    std::size_t nPorts = g.ports.size();
    for (std::size_t p = 0; p < nPorts; ++p)
    {
        const PortCounters& a = e.samplePorts[at.k * nPorts + p];
        const PortCounters& b = at.last ? e.ports[p] : e.samplePorts[(at.k + 1) * nPorts + p];
        PortCounters c = Between(a, b, at.f);
        AddToPort(g.ports[p], c);
        m_stats[FRAMES_AVOIDED] += c.frames;
    }
}

void
PacketEpisodeCache::Release(uint32_t id)
{
    Group& g = m_groups[id];
    for (uint32_t l : g.links)
    {
        auto& owners = m_linkOwners[l];
        owners.erase(std::remove(owners.begin(), owners.end(), id), owners.end());
    }
    // a finished group keeps nothing but its state
    g.links = {};
    g.ports = {};
    g.starts = {};
    g.base = {};
    g.deliverNs = {};
    g.delivered = {};
    g.qpCounted = {};
    g.key = {};
    g.rec.reset();
    g.play.reset();
}

void
PacketEpisodeCache::CopyStats(uint64_t* out) const
{
    std::copy(m_stats, m_stats + N_STATS, out);
}

void
PacketEpisodeCache::DoDispose()
{
    m_sealEvent.Cancel();
    m_sampleEvent.Cancel();
    m_entries.clear();
    m_groups.clear();
    m_net = nullptr;
    Object::DoDispose();
}

} // namespace ns3
