/*
 * HeteroSim: TestSuite for the rate-based ("hardware") DCTCP.
 */
#include "ns3/dctcp.h"
#include "ns3/double.h"
#include "ns3/simulator.h"
#include "ns3/test.h"

using namespace ns3;

namespace
{
constexpr double LINE = 100e9;

RdmaAckInfo
Ack(uint64_t seq, uint64_t sndNxt, bool ecn)
{
    return RdmaAckInfo{seq, sndNxt, 1000, ecn, 10000, nullptr, 0};
}
} // namespace

/**
 * \brief An ECN echo outside CWR cuts the rate to R (1 - alpha/2) once per window; alpha then
 * moves by g toward the marked fraction (docs/network_models.md §2.11).
 */
class DctcpCutTestCase : public TestCase
{
  public:
    DctcpCutTestCase()
        : TestCase("DCTCP cuts once per window by half of alpha and updates alpha")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<Dctcp> cc = CreateObject<Dctcp>();
        cc->SetAttribute("InitialAlpha", DoubleValue(1.0));
        cc->Start(LINE, MicroSeconds(10), 1000);
        cc->ReceiveAck(Ack(1000, 8000, true)); // ECN echo: cut with alpha 1, CWR until 8000
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetRate(), LINE / 2, 1.0, "R (1 - 1/2)");
        double alpha = cc->GetAlpha(); // every acked byte marked: alpha stays 1
        NS_TEST_ASSERT_MSG_EQ_TOL(alpha, 1.0, 1e-12, "F = 1 keeps alpha at 1");
        cc->ReceiveAck(Ack(2000, 9000, true)); // still in CWR: no second cut
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetRate(), LINE / 2, 1.0, "one cut per window");
        NS_TEST_ASSERT_MSG_EQ(cc->UsesCnp(), false, "DCTCP reacts to ECN echoes, not CNPs");
        cc->Dispose();
        Simulator::Destroy();
    }
};

/** \brief DCTCP's TestSuite. */
class DctcpTestSuite : public TestSuite
{
  public:
    DctcpTestSuite()
        : TestSuite("heterosim-dctcp", Type::UNIT)
    {
        AddTestCase(new DctcpCutTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static DctcpTestSuite g_dctcpTestSuite;
