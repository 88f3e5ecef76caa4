/*
 * HeteroSim: a binary-heap event queue that can move a chosen subset of its events later.
 */
#include "shiftable-scheduler.h"

#include "ns3/assert.h"
#include "ns3/event-impl.h"
#include "ns3/log.h"

#include <algorithm>
#include <limits>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("ShiftableScheduler");
NS_OBJECT_ENSURE_REGISTERED(ShiftableScheduler);

namespace
{
ShiftableScheduler* g_current = nullptr; //!< most recently constructed live instance

/** Heap order: the earliest (ts, uid) on top. */
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
    static TypeId tid = TypeId("ns3::ShiftableScheduler")
                            .SetParent<Scheduler>()
                            .SetGroupName("Heterosim")
                            .AddConstructor<ShiftableScheduler>();
    return tid;
}

ShiftableScheduler::ShiftableScheduler()
{
    NS_LOG_FUNCTION(this);
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
ShiftableScheduler::Insert(const Scheduler::Event& ev)
{
    m_heap.push_back(ev);
    std::push_heap(m_heap.begin(), m_heap.end(), Later());
}

bool
ShiftableScheduler::IsEmpty() const
{
    return m_heap.empty();
}

Scheduler::Event
ShiftableScheduler::PeekNext() const
{
    NS_ASSERT(!m_heap.empty());
    return m_heap.front();
}

Scheduler::Event
ShiftableScheduler::RemoveNext()
{
    NS_ASSERT(!m_heap.empty());
    std::pop_heap(m_heap.begin(), m_heap.end(), Later());
    Scheduler::Event ev = m_heap.back();
    m_heap.pop_back();
    return ev;
}

void
ShiftableScheduler::Remove(const Scheduler::Event& ev)
{
    auto it = std::find_if(m_heap.begin(), m_heap.end(), [&ev](const Scheduler::Event& e) {
        return e.key.m_uid == ev.key.m_uid;
    });
    NS_ASSERT_MSG(it != m_heap.end(), "removing an event that is not queued");
    *it = m_heap.back();
    m_heap.pop_back();
    std::make_heap(m_heap.begin(), m_heap.end(), Later());
}

uint64_t
ShiftableScheduler::EarliestOther(const Selector& selected) const
{
    uint64_t earliest = std::numeric_limits<uint64_t>::max();
    for (const Scheduler::Event& ev : m_heap)
    {
        if (ev.key.m_ts < earliest && !ev.impl->IsCancelled() && !selected(ev.impl))
        {
            earliest = ev.key.m_ts;
        }
    }
    return earliest;
}

uint64_t
ShiftableScheduler::Shift(const Selector& selected, uint64_t delta)
{
    uint64_t moved = 0;
    for (Scheduler::Event& ev : m_heap)
    {
        if (selected(ev.impl))
        {
            ev.key.m_ts += delta;
            ++moved;
        }
    }
    if (moved > 0)
    {
        std::make_heap(m_heap.begin(), m_heap.end(), Later());
    }
    NS_LOG_DEBUG("shifted " << moved << " of " << m_heap.size() << " events by " << delta);
    return moved;
}

} // namespace ns3
