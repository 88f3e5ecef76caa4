/*
 * HeteroSim: TestSuite for PFC on one QBB link (IEEE 802.1Qbb pause and resume).
 */
#include "ns3/frame-handler.h"
#include "ns3/qbb-channel.h"
#include "ns3/qbb-net-device.h"
#include "ns3/rdma-frame-pool.h"
#include "ns3/simulator.h"
#include "ns3/test.h"
#include "ns3/uinteger.h"

#include <vector>

using namespace ns3;

namespace
{

/** Records the arrival time of every frame and returns it to the pool. */
class ArrivalRecorder : public FrameHandler
{
  public:
    explicit ArrivalRecorder(RdmaFramePool* pool)
        : m_pool(pool)
    {
    }

    void
    HandleFrame(RdmaFrame* frame, uint32_t port) override
    {
        arrivals.push_back(Simulator::Now().GetNanoSeconds());
        m_pool->Free(frame);
    }

    std::vector<int64_t> arrivals; //!< arrival time of each frame, ns

  private:
    RdmaFramePool* m_pool; //!< owner of the frames
};

/** Two 100 Gb/s devices on a 1 us link; A has \p frames 1000-byte frames of priority 3. */
struct Link
{
    Ptr<RdmaFramePool> pool = Create<RdmaFramePool>();
    Ptr<QbbNetDevice> a = CreateObject<QbbNetDevice>();
    Ptr<QbbNetDevice> b = CreateObject<QbbNetDevice>();
    ArrivalRecorder atA{PeekPointer(pool)};
    ArrivalRecorder atB{PeekPointer(pool)};

    explicit Link(uint32_t frames)
    {
        Ptr<QbbChannel> channel = CreateObject<QbbChannel>();
        channel->SetAttribute("Delay", TimeValue(NanoSeconds(1000)));
        for (Ptr<QbbNetDevice> dev : {a, b})
        {
            dev->SetAttribute("PfcFrameBytes", UintegerValue(64));
            dev->Attach(channel);
        }
        a->SetHandler(&atA, 0, PeekPointer(pool));
        b->SetHandler(&atB, 0, PeekPointer(pool));
        for (uint32_t i = 0; i < frames; ++i)
        {
            RdmaFrame* f = pool->Alloc();
            f->type = RdmaFrame::DATA;
            f->priority = 3;
            f->wireBytes = 1000; // 80 ns at 100 Gb/s
            a->Enqueue(f, 3);
        }
    }
};

uint32_t
CountBefore(const std::vector<int64_t>& times, int64_t t)
{
    uint32_t n = 0;
    for (int64_t x : times)
    {
        n += x < t ? 1 : 0;
    }
    return n;
}

} // namespace

/**
 * \brief XOFF stops new frames of the paused priority once it arrives (a frame already on the
 * wire completes); XON restarts them. The pause reaches A at 1005 ns (64 bytes + 1 us), by
 * which A has started 13 frames (every 80 ns from 0); the XON sent at 5 us restarts the rest.
 */
class PauseResumeTestCase : public TestCase
{
  public:
    PauseResumeTestCase()
        : TestCase("XOFF stops a priority after the frame on the wire, XON restarts it")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        Link link(20);
        bool pausedAt3us = false;
        Simulator::Schedule(NanoSeconds(0), [&]() {
            link.b->SendPfc(3, 65535);
            link.a->TryTransmit();
        });
        Simulator::Schedule(NanoSeconds(3000), [&]() { pausedAt3us = link.a->IsPaused(3); });
        Simulator::Schedule(NanoSeconds(5000), [&]() { link.b->SendPfc(3, 0); });
        Simulator::Run();
        NS_TEST_ASSERT_MSG_EQ(pausedAt3us, true, "priority 3 paused at A");
        NS_TEST_ASSERT_MSG_EQ(CountBefore(link.atB.arrivals, 5000), 13, "13 frames got out");
        NS_TEST_ASSERT_MSG_EQ(link.atB.arrivals.size(), 20, "every frame arrives after XON");
        NS_TEST_ASSERT_MSG_GT_OR_EQ(link.atB.arrivals[13], 6005 + 1080, "restarted by the XON");
        NS_TEST_ASSERT_MSG_EQ(link.a->GetPauseReceived(), 1, "one XOFF received");
        NS_TEST_ASSERT_MSG_EQ(link.b->GetPauseSent(), 1, "one XOFF sent");
        NS_TEST_ASSERT_MSG_EQ(link.b->GetResumeSent(), 1, "one XON sent");
        NS_TEST_ASSERT_MSG_EQ_TOL(link.a->GetPausedNs(), 5000, 20, "paused from 1005 to 6005 ns");
        Simulator::Destroy();
    }
};

/** \brief Without an XON the pause expires after its quanta (512 bit times each). */
class PauseExpiryTestCase : public TestCase
{
  public:
    PauseExpiryTestCase()
        : TestCase("a pause expires after its quanta without XON")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        Link link(20);
        Simulator::Schedule(NanoSeconds(0), [&]() {
            link.b->SendPfc(3, 1000); // 1000 x 512 bits at 100 Gb/s = 5120 ns
            link.a->TryTransmit();
        });
        Simulator::Run();
        NS_TEST_ASSERT_MSG_EQ(link.atB.arrivals.size(), 20, "everything arrives");
        NS_TEST_ASSERT_MSG_EQ_TOL(link.a->GetPausedNs(), 5120, 2, "paused for the quanta");
        NS_TEST_ASSERT_MSG_GT_OR_EQ(link.atB.arrivals[13], 1005 + 5120 + 1080, "after expiry");
        Simulator::Destroy();
    }
};

/** \brief PFC at the device level: the TestSuite of the QBB device. */
class QbbPfcTestSuite : public TestSuite
{
  public:
    QbbPfcTestSuite()
        : TestSuite("heterosim-qbb-pfc", Type::UNIT)
    {
        AddTestCase(new PauseResumeTestCase, Duration::QUICK);
        AddTestCase(new PauseExpiryTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static QbbPfcTestSuite g_qbbPfcTestSuite;
