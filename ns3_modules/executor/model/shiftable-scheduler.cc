/*
 * HeteroSim: a bucketed event queue that can move a chosen subset of its events later.
 */
#include "shiftable-scheduler.h"

#include "ns3/assert.h"
#include "ns3/event-impl.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("ShiftableScheduler");
NS_OBJECT_ENSURE_REGISTERED(ShiftableScheduler);

namespace
{
ShiftableScheduler* g_current = nullptr; //!< most recently constructed live instance

/** Heap order (the earliest (ts, uid) on top); as a sort order, the earliest event last. */
struct Later
{
    bool
    operator()(const Scheduler::Event& a, const Scheduler::Event& b) const
    {
        return b < a;
    }
};
} // namespace

TypeId
ShiftableScheduler::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::ShiftableScheduler")
            .SetParent<Scheduler>()
            .SetGroupName("Heterosim")
            .AddConstructor<ShiftableScheduler>()
            .AddAttribute("BucketWidth",
                          "Simulated time one bucket of the ring covers, rounded down to a power "
                          "of two time steps (layout only: the order of events does not depend "
                          "on it)",
                          TimeValue(NanoSeconds(16)),
                          MakeTimeAccessor(&ShiftableScheduler::SetBucketWidth,
                                           &ShiftableScheduler::GetBucketWidth),
                          MakeTimeChecker(TimeStep(1)))
            .AddAttribute("Buckets",
                          "Buckets in the ring, rounded up to a power of two; events due beyond "
                          "Buckets x BucketWidth wait in the far heap (layout only)",
                          UintegerValue(512),
                          MakeUintegerAccessor(&ShiftableScheduler::SetBuckets,
                                               &ShiftableScheduler::GetBuckets),
                          MakeUintegerChecker<uint32_t>(1, 1u << 20));
    return tid;
}

ShiftableScheduler::ShiftableScheduler()
{
    NS_LOG_FUNCTION(this);
    m_buckets.resize(m_mask + 1);
    g_current = this;
}

ShiftableScheduler::~ShiftableScheduler()
{
    NS_LOG_FUNCTION(this);
    if (g_current == this)
    {
        g_current = nullptr;
    }
}

ShiftableScheduler*
ShiftableScheduler::GetCurrent()
{
    return g_current;
}

void
ShiftableScheduler::SetBucketWidth(Time width)
{
    uint64_t steps = std::max<int64_t>(width.GetTimeStep(), 1);
    m_widthLog2 = static_cast<uint32_t>(std::bit_width(steps) - 1);
    Rebuild();
}

Time
ShiftableScheduler::GetBucketWidth() const
{
    return TimeStep(uint64_t{1} << m_widthLog2);
}

void
ShiftableScheduler::SetBuckets(uint32_t buckets)
{
    std::vector<Scheduler::Event> pending;
    for (std::vector<Scheduler::Event>& bucket : m_buckets)
    {
        pending.insert(pending.end(), bucket.begin(), bucket.end());
        bucket.clear();
    }
    m_inRing = 0;
    m_mask = std::bit_ceil(std::max<uint32_t>(buckets, 1)) - 1;
    m_buckets.resize(m_mask + 1);
    for (const Scheduler::Event& ev : pending)
    {
        m_far.push_back(ev);
    }
    Rebuild();
}

uint32_t
ShiftableScheduler::GetBuckets() const
{
    return m_mask + 1;
}

bool
ShiftableScheduler::InWindow(uint64_t ts) const
{
    return ts >= m_base && ts - m_base < (uint64_t{m_mask} + 1) << m_widthLog2;
}

uint32_t
ShiftableScheduler::BucketOf(uint64_t ts) const
{
    return static_cast<uint32_t>(ts >> m_widthLog2) & m_mask;
}

void
ShiftableScheduler::Insert(const Scheduler::Event& ev)
{
    if (InWindow(ev.key.m_ts))
    {
        uint32_t index = BucketOf(ev.key.m_ts);
        std::vector<Scheduler::Event>& bucket = m_buckets[index];
        if (index == m_cur && m_curSorted)
        {
            bucket.insert(std::lower_bound(bucket.begin(), bucket.end(), ev, Later()), ev);
        }
        else
        {
            bucket.push_back(ev);
        }
        ++m_inRing;
        return;
    }
    m_far.push_back(ev);
    std::push_heap(m_far.begin(), m_far.end(), Later());
}

bool
ShiftableScheduler::IsEmpty() const
{
    return m_inRing == 0 && m_far.empty();
}

void
ShiftableScheduler::Settle()
{
    const uint64_t width = uint64_t{1} << m_widthLog2;
    while (m_buckets[m_cur].empty())
    {
        if (m_inRing == 0)
        {
            // Nothing in the ring: move the window to the far heap's top.
            if (!m_far.empty() && m_far.front().key.m_ts >= m_base + width)
            {
                m_base = (m_far.front().key.m_ts >> m_widthLog2) << m_widthLog2;
                m_cur = BucketOf(m_base);
            }
            m_curSorted = false;
            return;
        }
        if (!m_far.empty() && m_far.front().key.m_ts < m_base + width)
        {
            return; // the far heap's top is due in the current bucket's interval
        }
        m_base += width;
        m_cur = (m_cur + 1) & m_mask;
        m_curSorted = false;
    }
    if (!m_curSorted)
    {
        std::vector<Scheduler::Event>& bucket = m_buckets[m_cur];
        std::sort(bucket.begin(), bucket.end(), Later());
        m_curSorted = true;
    }
}

Scheduler::Event
ShiftableScheduler::PeekNext() const
{
    NS_ASSERT(!IsEmpty());
    const Scheduler::Event* earliest = m_far.empty() ? nullptr : &m_far.front();
    if (m_inRing > 0)
    {
        for (uint32_t step = 0; step <= m_mask; ++step)
        {
            const std::vector<Scheduler::Event>& bucket = m_buckets[(m_cur + step) & m_mask];
            if (!bucket.empty())
            {
                const Scheduler::Event& first =
                    step == 0 && m_curSorted
                        ? bucket.back()
                        : *std::max_element(bucket.begin(), bucket.end(), Later());
                if (earliest == nullptr || first < *earliest)
                {
                    earliest = &first;
                }
                break;
            }
        }
    }
    return *earliest;
}

Scheduler::Event
ShiftableScheduler::RemoveNext()
{
    NS_ASSERT(!IsEmpty());
    Settle();
    std::vector<Scheduler::Event>& bucket = m_buckets[m_cur];
    if (!bucket.empty() && (m_far.empty() || bucket.back() < m_far.front()))
    {
        Scheduler::Event ev = bucket.back();
        bucket.pop_back();
        --m_inRing;
        return ev;
    }
    std::pop_heap(m_far.begin(), m_far.end(), Later());
    Scheduler::Event ev = m_far.back();
    m_far.pop_back();
    return ev;
}

void
ShiftableScheduler::Remove(const Scheduler::Event& ev)
{
    auto sameUid = [&ev](const Scheduler::Event& e) {
        return e.key.m_uid == ev.key.m_uid;
    };
    if (InWindow(ev.key.m_ts))
    {
        std::vector<Scheduler::Event>& bucket = m_buckets[BucketOf(ev.key.m_ts)];
        auto it = std::find_if(bucket.begin(), bucket.end(), sameUid);
        if (it != bucket.end())
        {
            bucket.erase(it); // keeps a sorted current bucket sorted
            --m_inRing;
            return;
        }
    }
    auto it = std::find_if(m_far.begin(), m_far.end(), sameUid);
    NS_ASSERT_MSG(it != m_far.end(), "removing an event that is not queued");
    *it = m_far.back();
    m_far.pop_back();
    std::make_heap(m_far.begin(), m_far.end(), Later());
}

uint64_t
ShiftableScheduler::EarliestOther(const Selector& selected) const
{
    uint64_t earliest = std::numeric_limits<uint64_t>::max();
    auto visit = [&](const std::vector<Scheduler::Event>& events) {
        for (const Scheduler::Event& ev : events)
        {
            if (ev.key.m_ts < earliest && !ev.impl->IsCancelled() && !selected(ev.impl))
            {
                earliest = ev.key.m_ts;
            }
        }
    };
    for (const std::vector<Scheduler::Event>& bucket : m_buckets)
    {
        visit(bucket);
    }
    visit(m_far);
    return earliest;
}

uint64_t
ShiftableScheduler::Shift(const Selector& selected, uint64_t delta)
{
    uint64_t moved = 0;
    auto visit = [&](std::vector<Scheduler::Event>& events) {
        for (Scheduler::Event& ev : events)
        {
            if (selected(ev.impl))
            {
                ev.key.m_ts += delta;
                ++moved;
            }
        }
    };
    for (std::vector<Scheduler::Event>& bucket : m_buckets)
    {
        visit(bucket);
    }
    visit(m_far);
    if (moved > 0)
    {
        Rebuild();
    }
    NS_LOG_DEBUG("shifted " << moved << " of " << m_inRing + m_far.size() << " events by "
                            << delta);
    return moved;
}

void
ShiftableScheduler::Rebuild()
{
    std::vector<Scheduler::Event> pending;
    pending.swap(m_far);
    for (std::vector<Scheduler::Event>& bucket : m_buckets)
    {
        pending.insert(pending.end(), bucket.begin(), bucket.end());
        bucket.clear();
    }
    m_inRing = 0;
    m_base = (m_base >> m_widthLog2) << m_widthLog2;
    m_cur = BucketOf(m_base);
    m_curSorted = false;
    for (const Scheduler::Event& ev : pending)
    {
        Insert(ev);
    }
}

} // namespace ns3
