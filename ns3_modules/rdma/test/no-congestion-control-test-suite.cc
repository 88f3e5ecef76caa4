/*
 * HeteroSim: TestSuite for the queue pair without congestion control.
 */
#include "ns3/no-congestion-control.h"
#include "ns3/simulator.h"
#include "ns3/test.h"

using namespace ns3;

/** \brief Without congestion control a queue pair sends at line rate whatever it hears. */
class NoCongestionControlTestCase : public TestCase
{
  public:
    NoCongestionControlTestCase()
        : TestCase("no congestion control keeps line rate on CNPs and ECN echoes")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<NoCongestionControl> cc = CreateObject<NoCongestionControl>();
        cc->Start(100e9, MicroSeconds(10), 1000);
        cc->ReceiveCnp();
        cc->ReceiveAck(RdmaAckInfo{1000, 2000, 1000, true, 1000000, nullptr, 0});
        NS_TEST_ASSERT_MSG_EQ(cc->GetRate(), 100e9, "line rate");
        NS_TEST_ASSERT_MSG_EQ(cc->GetWindow(), 0, "no window");
        NS_TEST_ASSERT_MSG_EQ(cc->GetRateChanges(), 0, "never changed");
        NS_TEST_ASSERT_MSG_EQ((cc->UsesCnp() || cc->UsesInt()), false, "needs no feedback");
        cc->Dispose();
        Simulator::Destroy();
    }
};

/** \brief The TestSuite of NoCongestionControl. */
class NoCongestionControlTestSuite : public TestSuite
{
  public:
    NoCongestionControlTestSuite()
        : TestSuite("heterosim-no-congestion-control", Type::UNIT)
    {
        AddTestCase(new NoCongestionControlTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static NoCongestionControlTestSuite g_noCongestionControlTestSuite;
