/*
 * HeteroSim: a bucketed event queue that can move a chosen subset of its events later.
 */
#ifndef HETEROSIM_SHIFTABLE_SCHEDULER_H
#define HETEROSIM_SHIFTABLE_SCHEDULER_H

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/scheduler.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace ns3
{

/**
 * \brief Event queue of every packet run: ordered by (time, insertion order), like every ns-3
 * scheduler, so it executes exactly the same events in the same order as
 * ns3::PriorityQueueScheduler; in addition it can delay every pending event that a predicate
 * selects by the same amount (Shift) and report the earliest pending event that the predicate
 * does not select (EarliestOther), which steady-state fast-forward needs.
 *
 * Layout: a ring of Buckets buckets, each BucketWidth of simulated time wide, covers the
 * window [base, base + Buckets x BucketWidth); an event due inside the window goes to its
 * bucket unsorted, any other one to a binary heap (the far heap). The current bucket (the
 * window's first) is sorted once when it is reached, then served from its end; RemoveNext
 * takes the earlier of its first event and the far heap's top, and moves the window on by a
 * bucket when the current one is empty and the far heap holds nothing inside it. Frame events
 * (due within a few microseconds) thus cost a push, a share of one small sort and a pop,
 * where a heap over every pending event pays two sift passes through all of them; the far
 * heap holds the timers set seconds ahead (one retransmission timeout per queue pair, and the
 * cancelled ones of finished queue pairs, which ns-3 leaves queued until their time comes).
 * The layout attributes change speed only, never the order of events.
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

    /** \param width bucket width, rounded down to a power of two time steps (at least one) */
    void SetBucketWidth(Time width);
    /** \return the bucket width */
    Time GetBucketWidth() const;
    /** \param buckets number of buckets, rounded up to a power of two */
    void SetBuckets(uint32_t buckets);
    /** \return the number of buckets */
    uint32_t GetBuckets() const;

    /** \return the live instance most recently constructed, or nullptr */
    static ShiftableScheduler* GetCurrent();

  private:
    /** \return whether \p ts lies inside the ring's window */
    bool InWindow(uint64_t ts) const;
    /** \return index of the bucket holding time stamp \p ts (inside the window) */
    uint32_t BucketOf(uint64_t ts) const;
    /**
     * \brief Move the window until its current bucket holds the earliest ring event or the far
     * heap's top is due inside the current bucket; sort the current bucket.
     */
    void Settle();
    /** \brief Put every pending event back through Insert (after Shift or a layout change). */
    void Rebuild();

    std::vector<std::vector<Scheduler::Event>> m_buckets; //!< the ring
    std::vector<Scheduler::Event> m_far;                  //!< min-heap on (ts, uid)
    uint32_t m_widthLog2{4};                              //!< log2 of BucketWidth, time steps
    uint32_t m_mask{511};                                 //!< Buckets - 1
    uint64_t m_base{0};      //!< start of the current bucket's interval, time steps
    uint32_t m_cur{0};       //!< index of the current bucket
    bool m_curSorted{false}; //!< the current bucket is sorted, earliest event last
    uint64_t m_inRing{0};    //!< events in the ring
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
