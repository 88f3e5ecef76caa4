/*
 * HeteroSim: TestSuite for TIMELY.
 */
#include "ns3/simulator.h"
#include "ns3/test.h"
#include "ns3/timely.h"

using namespace ns3;

namespace
{
constexpr double LINE = 100e9;

/** An ACK measuring \p rttNs, one RTT after the previous update point. */
RdmaAckInfo
Ack(uint64_t seq, int64_t rttNs)
{
    return RdmaAckInfo{seq, seq + 1000, 1000, false, rttNs, nullptr, 0};
}
} // namespace

/**
 * \brief Above T_high (500 us) the rate is cut by beta (1 - T_high / rtt); below T_low (50 us)
 * it grows by R_AI (docs/network_models.md §2.11).
 */
class TimelyThresholdsTestCase : public TestCase
{
  public:
    TimelyThresholdsTestCase()
        : TestCase("TIMELY cuts above T_high and increases below T_low")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<Timely> cc = CreateObject<Timely>();
        cc->Start(LINE, MicroSeconds(10), 1000);
        cc->ReceiveAck(Ack(1000, 20000)); // the first sample only primes the RTT difference
        NS_TEST_ASSERT_MSG_EQ(cc->GetRate(), LINE, "no reaction to the first sample");
        cc->ReceiveAck(Ack(3000, 1000000)); // 1 ms > T_high
        double cut = LINE * (1 - 0.8 * (1 - 500e-6 / 1e-3));
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetRate(), cut, cut * 1e-12, "beta (1 - T_high/rtt)");
        cc->ReceiveAck(Ack(5000, 20000)); // 20 us < T_low
        double ai = cut + 100e6;          // TIMELY's default R_AI, 100 Mb/s
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetRate(), ai, ai * 1e-12, "additive increase");
        cc->ReceiveAck(Ack(5500, 1000000)); // not past the update point: ignored
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetRate(), ai, ai * 1e-12, "once per RTT");
        cc->Dispose();
        Simulator::Destroy();
    }
};

/** \brief TIMELY's TestSuite. */
class TimelyTestSuite : public TestSuite
{
  public:
    TimelyTestSuite()
        : TestSuite("heterosim-timely", Type::UNIT)
    {
        AddTestCase(new TimelyThresholdsTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static TimelyTestSuite g_timelyTestSuite;
