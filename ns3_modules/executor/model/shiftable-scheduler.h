/*
 * HeteroSim: a binary-heap event queue that can move a chosen subset of its events later.
 */
#ifndef HETEROSIM_SHIFTABLE_SCHEDULER_H
#define HETEROSIM_SHIFTABLE_SCHEDULER_H

#include "ns3/event-id.h"
#include "ns3/scheduler.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace ns3
{

/**
 * \brief Event queue for steady-state fast-forward: a binary heap ordered by (time, insertion
 * order), like ns3::PriorityQueueScheduler, so a run that never shifts executes exactly the
 * same events in the same order; in addition it can delay every pending event that a
 * predicate selects by the same amount (Shift) and report the earliest pending event that the
 * predicate does not select (EarliestOther).
 *
 * Shifting a subset breaks no ordering among the shifted events (they all move by the same
 * amount); the caller must make sure no unselected event lies inside the skipped interval
 * (EarliestOther tells it where the first one is). Cancelled events are neither reported by
 * EarliestOther nor required to be shifted. Holders of EventIds of shifted events must
 * rebuild them with the new time stamp (an EventId compares its stored time with the clock
 * to tell whether it is still pending).
 *
 * The most recently constructed instance is reachable through GetCurrent() while it lives,
 * which is how a model finds the queue the simulator runs on.
 */
class ShiftableScheduler : public Scheduler
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    ShiftableScheduler();
    ~ShiftableScheduler() override;

    void Insert(const Scheduler::Event& ev) override;
    bool IsEmpty() const override;
    Scheduler::Event PeekNext() const override;
    Scheduler::Event RemoveNext() override;
    void Remove(const Scheduler::Event& ev) override;

    /** Predicate over pending events. */
    using Selector = std::function<bool(const EventImpl*)>;

    /**
     * \param selected events the caller will shift
     * \return time stamp of the earliest pending, not cancelled event that \p selected does
     * not accept (UINT64_MAX if none)
     */
    uint64_t EarliestOther(const Selector& selected) const;

    /**
     * \brief Add \p delta time steps to every pending event \p selected accepts.
     * \param selected which events move
     * \param delta time steps
     * \return number of events moved
     */
    uint64_t Shift(const Selector& selected, uint64_t delta);

    /** \return the live instance most recently constructed, or nullptr */
    static ShiftableScheduler* GetCurrent();

  private:
    std::vector<Scheduler::Event> m_heap; //!< min-heap on (ts, uid)
};

/**
 * \brief Rebuild a pending EventId for an event moved \p deltaNs later (1 ns time steps) and
 * record its event in \p moved; expired or cancelled ids are left alone.
 * \param id the holder's id
 * \param deltaNs shift, ns
 * \param moved events to shift in the queue
 */
inline void
ShiftEventId(EventId& id, int64_t deltaNs, std::vector<const EventImpl*>* moved)
{
    if (!id.IsPending())
    {
        return;
    }
    moved->push_back(id.PeekEventImpl());
    id = EventId(Ptr<EventImpl>(id.PeekEventImpl()),
                 id.GetTs() + static_cast<uint64_t>(deltaNs),
                 id.GetContext(),
                 id.GetUid());
}

} // namespace ns3

#endif /* HETEROSIM_SHIFTABLE_SCHEDULER_H */
