/*
 * HeteroSim: TestSuite for QbbTraceHelper (every trace source of a QBB device written).
 */
#include "ns3/frame-handler.h"
#include "ns3/qbb-channel.h"
#include "ns3/qbb-net-device.h"
#include "ns3/qbb-trace-helper.h"
#include "ns3/rdma-frame-pool.h"
#include "ns3/simulator.h"
#include "ns3/test.h"
#include "ns3/uinteger.h"

#include <map>
#include <sstream>
#include <string>

using namespace ns3;

namespace
{

/** Returns every arriving frame to the pool. */
class Sink : public FrameHandler
{
  public:
    explicit Sink(RdmaFramePool* pool)
        : m_pool(pool)
    {
    }

    void
    HandleFrame(RdmaFrame* frame, uint32_t port) override
    {
        m_pool->Free(frame);
    }

  private:
    RdmaFramePool* m_pool; //!< owner of the frames
};

/** Counts the lines of \p text by (device, event). */
std::map<std::string, uint32_t>
CountLines(const std::string& text)
{
    std::map<std::string, uint32_t> counts;
    std::istringstream in(text);
    std::string time;
    std::string device;
    std::string event;
    std::string rest;
    while (in >> time >> device >> event && std::getline(in, rest))
    {
        ++counts[device + " " + event];
    }
    return counts;
}

/**
 * \brief Two devices on a link, both traced: 5 data frames from A (enqueue and dequeue each),
 * one ECN mark and one drop counted at A, an XOFF from B (sent at B, received at A), and A's
 * link taken down and up: every trace source writes its lines, and the line count is the
 * helper's event count.
 */
class TraceEveryEventTestCase : public TestCase
{
  public:
    TraceEveryEventTestCase()
        : TestCase("every trace source of a QBB device writes one line per event")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        Ptr<RdmaFramePool> pool = Create<RdmaFramePool>();
        Ptr<QbbNetDevice> a = CreateObject<QbbNetDevice>();
        Ptr<QbbNetDevice> b = CreateObject<QbbNetDevice>();
        Ptr<QbbChannel> channel = CreateObject<QbbChannel>();
        Sink sinkA(PeekPointer(pool));
        Sink sinkB(PeekPointer(pool));
        a->Attach(channel);
        b->Attach(channel);
        a->SetHandler(&sinkA, 0, PeekPointer(pool));
        b->SetHandler(&sinkB, 0, PeekPointer(pool));
        std::ostringstream text;
        Ptr<OutputStreamWrapper> stream = Create<OutputStreamWrapper>(&text);
        Ptr<QbbTraceHelper> helper = CreateObject<QbbTraceHelper>();
        helper->Enable(stream, a, "A");
        helper->Enable(stream, b, "B");
        for (uint32_t i = 0; i < 5; ++i)
        {
            RdmaFrame* f = pool->Alloc();
            f->type = RdmaFrame::DATA;
            f->priority = 3;
            f->seq = 1000 * i;
            f->wireBytes = 1000;
            a->Enqueue(f, 3);
        }
        Simulator::Schedule(NanoSeconds(0), [&]() { a->TryTransmit(); });
        Simulator::Schedule(NanoSeconds(100), [&]() {
            RdmaFrame* f = pool->Alloc();
            f->type = RdmaFrame::DATA;
            f->wireBytes = 1000;
            a->CountEcnMark(f);
            a->CountDrop(f);
            pool->Free(f);
        });
        Simulator::Schedule(NanoSeconds(20000), [&]() { b->SendPfc(3, 1); });
        Simulator::Schedule(NanoSeconds(30000), [&]() { a->SetLinkDown(true); });
        Simulator::Schedule(NanoSeconds(40000), [&]() { a->SetLinkDown(false); });
        Simulator::Run();
        stream->GetStream()->flush();
        std::map<std::string, uint32_t> n = CountLines(text.str());
        NS_TEST_ASSERT_MSG_EQ(n["A Enqueue"], 5, "one Enqueue line per frame");
        NS_TEST_ASSERT_MSG_EQ(n["A Dequeue"], 5, "one Dequeue line per frame");
        NS_TEST_ASSERT_MSG_EQ(n["A Mark"], 1, "the ECN mark");
        NS_TEST_ASSERT_MSG_EQ(n["A Drop"], 1, "the drop");
        NS_TEST_ASSERT_MSG_EQ(n["B Pause"], 1, "the XOFF sent at B");
        NS_TEST_ASSERT_MSG_EQ(n["A Pause"], 1, "the XOFF received at A");
        NS_TEST_ASSERT_MSG_EQ(n["A LinkState"], 2, "down, then up");
        uint64_t lines = 0;
        for (const auto& [key, count] : n)
        {
            lines += count;
        }
        NS_TEST_ASSERT_MSG_EQ(lines, helper->GetEvents(), "every event is a line");
        NS_TEST_ASSERT_MSG_NE(text.str().find(" A Pause 3 1 received\n"),
                              std::string::npos,
                              "pause fields: priority, quanta, direction");
        NS_TEST_ASSERT_MSG_NE(text.str().find(" A LinkState down\n"), std::string::npos, "down");
        Simulator::Destroy();
    }
};

/** \brief The QBB trace helper's TestSuite. */
class QbbTraceHelperTestSuite : public TestSuite
{
  public:
    QbbTraceHelperTestSuite()
        : TestSuite("heterosim-qbb-trace-helper", Type::UNIT)
    {
        AddTestCase(new TraceEveryEventTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static QbbTraceHelperTestSuite g_qbbTraceHelperTestSuite;

} // namespace
