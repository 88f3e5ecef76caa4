/*
 * HeteroSim: TestSuite for the bucketed event queue against an ordered reference.
 */
#include "ns3/event-impl.h"
#include "ns3/nstime.h"
#include "ns3/object-factory.h"
#include "ns3/shiftable-scheduler.h"
#include "ns3/test.h"
#include "ns3/uinteger.h"

#include <cstdint>
#include <iterator>
#include <set>
#include <unordered_set>
#include <utility>
#include <vector>

using namespace ns3;

namespace
{

/** An event that does nothing: the queue only stores and orders it. */
class NullEvent : public EventImpl
{
  protected:
    void
    Notify() override
    {
    }
};

/** Deterministic xorshift draws. */
class Draws
{
  public:
    /** \param seed non-zero start state */
    explicit Draws(uint64_t seed)
        : m_state(seed)
    {
    }

    /** \param n bound \return a draw in [0, n) */
    uint64_t
    Below(uint64_t n)
    {
        m_state ^= m_state << 13;
        m_state ^= m_state >> 7;
        m_state ^= m_state << 17;
        return m_state % n;
    }

  private:
    uint64_t m_state; //!< generator state
};

/**
 * \brief Random inserts (delays from 0 ns to seconds), pops, peeks, removals, shifts of a
 * random subset and EarliestOther queries, checked step by step against a std::set ordered by
 * (time, uid), for the default layout and for a tiny ring that sends most events to the far
 * heap and wraps often.
 */
class ShiftableSchedulerOrderTestCase : public TestCase
{
  public:
    /**
     * \param width BucketWidth
     * \param buckets Buckets
     */
    ShiftableSchedulerOrderTestCase(Time width, uint32_t buckets)
        : TestCase("pops in (time, uid) order under inserts, removals and shifts")
        , m_width(width)
        , m_buckets(buckets)
    {
    }

  private:
    void
    DoRun() override
    {
        ObjectFactory factory("ns3::ShiftableScheduler");
        factory.Set("BucketWidth", TimeValue(m_width));
        factory.Set("Buckets", UintegerValue(m_buckets));
        Ptr<ShiftableScheduler> queue = factory.Create<ShiftableScheduler>();
        std::vector<Ptr<EventImpl>> impls;
        using Key = std::pair<uint64_t, uint32_t>;
        std::set<Key> reference;
        std::vector<EventImpl*> implOf; // by uid
        Draws draws(0x9E3779B97F4A7C15ULL);
        uint64_t now = 0;
        uint32_t uid = 0;
        const uint64_t scales[] = {1, 16, 1000, 100000, 4000000000ULL};
        for (int step = 0; step < 60000; ++step)
        {
            // about 2,000 events pending after the first steps, then as many inserts as pops
            uint64_t op = step < 2000 ? 0 : draws.Below(100);
            if (op < 48 || reference.empty())
            {
                Ptr<EventImpl> impl = Create<NullEvent>();
                impls.push_back(impl);
                implOf.push_back(PeekPointer(impl));
                Scheduler::Event ev;
                ev.impl = PeekPointer(impl);
                ev.key.m_ts = now + draws.Below(scales[draws.Below(5)]);
                ev.key.m_uid = uid++;
                ev.key.m_context = 0;
                queue->Insert(ev);
                reference.insert({ev.key.m_ts, ev.key.m_uid});
            }
            else if (op < 93)
            {
                Scheduler::Event peek = queue->PeekNext();
                Scheduler::Event ev = queue->RemoveNext();
                Key want = *reference.begin();
                reference.erase(reference.begin());
                NS_TEST_ASSERT_MSG_EQ(peek.key.m_uid, ev.key.m_uid, "PeekNext is RemoveNext");
                NS_TEST_ASSERT_MSG_EQ(ev.key.m_ts, want.first, "time of step " << step);
                NS_TEST_ASSERT_MSG_EQ(ev.key.m_uid, want.second, "uid of step " << step);
                NS_TEST_ASSERT_MSG_EQ(ev.impl, implOf[want.second], "event of step " << step);
                if (ev.key.m_uid != want.second || peek.key.m_uid != want.second)
                {
                    return; // the runner goes on after a failed check: stop before the queue
                            // and the reference disagree on what is pending
                }
                now = ev.key.m_ts;
            }
            else if (op < 97)
            {
                auto it = reference.begin();
                std::advance(it, draws.Below(reference.size()));
                Scheduler::Event ev;
                ev.impl = implOf[it->second];
                ev.key.m_ts = it->first;
                ev.key.m_uid = it->second;
                ev.key.m_context = 0;
                queue->Remove(ev);
                reference.erase(it);
            }
            else
            {
                // shift about half of the events pending, by up to 50 us
                std::unordered_set<const EventImpl*> chosen;
                std::set<Key> shifted;
                uint64_t delta = 1 + draws.Below(50000);
                uint64_t firstOther = UINT64_MAX;
                for (const Key& key : reference)
                {
                    if (draws.Below(2) == 0)
                    {
                        chosen.insert(implOf[key.second]);
                        shifted.insert({key.first + delta, key.second});
                    }
                    else
                    {
                        firstOther = std::min(firstOther, key.first);
                        shifted.insert(key);
                    }
                }
                auto selected = [&chosen](const EventImpl* ev) {
                    return chosen.count(ev) > 0;
                };
                NS_TEST_ASSERT_MSG_EQ(
                    queue->EarliestOther(selected), firstOther, "earliest unselected event");
                uint64_t moved = queue->Shift(selected, delta);
                NS_TEST_ASSERT_MSG_EQ(moved, chosen.size(), "every selected event moved");
                if (moved != chosen.size())
                {
                    return;
                }
                reference.swap(shifted);
            }
        }
        while (!reference.empty())
        {
            Scheduler::Event ev = queue->RemoveNext();
            NS_TEST_ASSERT_MSG_EQ(ev.key.m_uid, reference.begin()->second, "drain order");
            reference.erase(reference.begin());
        }
        NS_TEST_ASSERT_MSG_EQ(queue->IsEmpty(), true, "drained");
    }

    Time m_width;       //!< BucketWidth under test
    uint32_t m_buckets; //!< Buckets under test
};

} // namespace

/** \brief The bucketed event queue's TestSuite. */
class ShiftableSchedulerTestSuite : public TestSuite
{
  public:
    ShiftableSchedulerTestSuite()
        : TestSuite("heterosim-shiftable-scheduler", Type::UNIT)
    {
        AddTestCase(new ShiftableSchedulerOrderTestCase(NanoSeconds(16), 512), Duration::QUICK);
        AddTestCase(new ShiftableSchedulerOrderTestCase(NanoSeconds(3), 5), Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static ShiftableSchedulerTestSuite g_shiftableSchedulerTestSuite;
