/*
 * HeteroSim: TestSuite for the shared-buffer switch MMU.
 */
#include "ns3/boolean.h"
#include "ns3/switch-mmu.h"
#include "ns3/test.h"

#include <vector>

using namespace ns3;

namespace
{
constexpr uint32_t MIB = 1 << 20;

Ptr<SwitchMmu>
TwoPortMmu(bool pfc)
{
    Ptr<SwitchMmu> mmu = CreateObject<SwitchMmu>();
    mmu->SetAttribute("PfcAlphaSpeedScaling", BooleanValue(false));
    mmu->Configure({100000000000ULL, 100000000000ULL}, {100000, 100000}, pfc, 2 * MIB);
    return mmu;
}
} // namespace

/**
 * \brief Buffer accounting: reserve first, then the shared pool up to the dynamic threshold
 * T = alpha x free shared buffer, then headroom; XOFF when the threshold is reached, XON once
 * the shared use is the resume offset below it (docs/network_models.md §2.6, §3.2).
 */
class MmuLosslessTestCase : public TestCase
{
  public:
    MmuLosslessTestCase()
        : TestCase("lossless admission: reserve, shared pool, threshold, headroom, XON")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<SwitchMmu> mmu = TwoPortMmu(true);
        uint64_t pool = 2 * MIB - 2 * 100000 - 2 * 4000; // buffer - headrooms - reserves
        NS_TEST_ASSERT_MSG_EQ(mmu->GetSharedPool(), pool, "shared pool");
        NS_TEST_ASSERT_MSG_EQ(mmu->GetThreshold(0),
                              static_cast<uint64_t>(0.125 * pool),
                              "T = alpha x free shared buffer");
        NS_TEST_ASSERT_MSG_EQ(mmu->Admit(0, 3, 4000), true, "the reserve");
        NS_TEST_ASSERT_MSG_EQ(mmu->GetSharedUsed(), 0, "reserve is not shared");
        // fill the shared pool from port 0 until XOFF is due
        while (!mmu->ShouldPause(0, 3))
        {
            NS_TEST_ASSERT_MSG_EQ(mmu->Admit(0, 3, 1000), true, "below the threshold");
        }
        uint64_t shared = mmu->GetSharedUsed();
        NS_TEST_ASSERT_MSG_GT_OR_EQ(shared + 1000, mmu->GetThreshold(0), "XOFF at the threshold");
        mmu->SetPaused(0, 3, true);
        // what arrives after XOFF lands in the headroom, up to its size, then is dropped
        while (mmu->Admit(0, 3, 1000))
        {
        }
        NS_TEST_ASSERT_MSG_EQ(mmu->GetSharedUsed(), shared, "no more shared buffer once paused");
        NS_TEST_ASSERT_MSG_EQ(
            mmu->GetTotalUsed(), 4000 + shared + 100000, "reserve+shared+headroom");
        NS_TEST_ASSERT_MSG_EQ(mmu->GetLosslessDrops(), 1, "a headroom overflow is counted");
        NS_TEST_ASSERT_MSG_EQ(mmu->ShouldResume(0, 3), false, "headroom in use: stay paused");
        mmu->Release(0, 3, static_cast<uint32_t>(mmu->GetTotalUsed() - 4000));
        NS_TEST_ASSERT_MSG_EQ(mmu->ShouldResume(0, 3), true, "drained: XON");
        NS_TEST_ASSERT_MSG_EQ(mmu->GetTotalUsed(), 4000, "the reserve is still held");
    }
};

/** \brief With PFC off the buffer is lossy: a frame that fits nowhere is dropped, no XOFF. */
class MmuLossyTestCase : public TestCase
{
  public:
    MmuLossyTestCase()
        : TestCase("lossy admission drops when the shared pool is full")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<SwitchMmu> mmu = TwoPortMmu(false);
        uint64_t pool = 2 * MIB - 2 * 4000; // no headroom without PFC
        NS_TEST_ASSERT_MSG_EQ(mmu->GetSharedPool(), pool, "shared pool");
        uint64_t admitted = 0;
        while (mmu->Admit(1, 3, 1000))
        {
            admitted += 1000;
            NS_TEST_ASSERT_MSG_EQ(mmu->ShouldPause(1, 3), false, "no PFC");
        }
        NS_TEST_ASSERT_MSG_EQ(admitted, 4000 + (pool / 1000) * 1000, "reserve + whole pool");
        NS_TEST_ASSERT_MSG_EQ(mmu->GetLosslessDrops(), 0, "lossy drops are not lossless drops");
    }
};

/** \brief The switch MMU's TestSuite. */
class SwitchMmuTestSuite : public TestSuite
{
  public:
    SwitchMmuTestSuite()
        : TestSuite("heterosim-switch-mmu", Type::UNIT)
    {
        AddTestCase(new MmuLosslessTestCase, Duration::QUICK);
        AddTestCase(new MmuLossyTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static SwitchMmuTestSuite g_switchMmuTestSuite;
