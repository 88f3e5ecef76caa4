/*
 * HeteroSim: TestSuite for the RDMA frame pool.
 */
#include "ns3/ptr.h"
#include "ns3/rdma-frame-pool.h"
#include "ns3/test.h"

#include <vector>

using namespace ns3;

/** \brief Frames are reused: the pool grows to the frames in flight and no further. */
class FramePoolReuseTestCase : public TestCase
{
  public:
    FramePoolReuseTestCase()
        : TestCase("the frame pool hands out zeroed frames and reuses freed ones")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<RdmaFramePool> pool = Create<RdmaFramePool>();
        std::vector<RdmaFrame*> frames;
        for (int i = 0; i < 3000; ++i)
        {
            frames.push_back(pool->Alloc());
        }
        NS_TEST_ASSERT_MSG_EQ(pool->GetInUse(), 3000, "every frame counted");
        uint64_t capacity = pool->GetCapacity();
        NS_TEST_ASSERT_MSG_GT_OR_EQ(capacity, 3000, "grown to what is in flight");
        frames[7]->wireBytes = 4096;
        for (RdmaFrame* f : frames)
        {
            pool->Free(f);
        }
        NS_TEST_ASSERT_MSG_EQ(pool->GetInUse(), 0, "all returned");
        for (int round = 0; round < 10; ++round)
        {
            RdmaFrame* f = pool->Alloc();
            NS_TEST_ASSERT_MSG_EQ(f->wireBytes, 0, "a reused frame is zeroed");
            pool->Free(f);
        }
        NS_TEST_ASSERT_MSG_EQ(pool->GetCapacity(), capacity, "no growth when frames are reused");
    }
};

/** \brief The frame pool's TestSuite. */
class RdmaFramePoolTestSuite : public TestSuite
{
  public:
    RdmaFramePoolTestSuite()
        : TestSuite("heterosim-rdma-frame-pool", Type::UNIT)
    {
        AddTestCase(new FramePoolReuseTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static RdmaFramePoolTestSuite g_rdmaFramePoolTestSuite;
