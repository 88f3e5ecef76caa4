/*
 * HeteroSim: TestSuite for HPCC.
 */
#include "ns3/data-rate.h"
#include "ns3/hpcc.h"
#include "ns3/simulator.h"
#include "ns3/test.h"

using namespace ns3;

namespace
{
constexpr double LINE = 100e9;

/** One INT record of a 100 Gb/s port. */
IntHop
Hop(int64_t tsNs, uint64_t txBytes, uint32_t qlenBytes)
{
    return IntHop{static_cast<uint64_t>(LINE), tsNs, txBytes, qlenBytes};
}

/** An ACK carrying one INT record. */
RdmaAckInfo
Ack(uint64_t ackSeq, uint64_t sndNxt, const IntHop* hop)
{
    return RdmaAckInfo{ackSeq, sndNxt, 1000, false, 10000, hop, 1};
}
} // namespace

/**
 * \brief A hop sending at line rate with a standing queue gives U = 1 + q/(B T); HPCC sets the
 * reference rate to Rc / (U / eta) + R_AI (docs/network_models.md §2.11).
 */
class HpccCongestedTestCase : public TestCase
{
  public:
    HpccCongestedTestCase()
        : TestCase("HPCC divides the rate by U over eta on a congested hop")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<Hpcc> cc = CreateObject<Hpcc>();
        cc->SetAttribute("RateAi", DataRateValue(DataRate("50Mbps")));
        cc->Start(LINE, MicroSeconds(10), 1000);
        IntHop first = Hop(0, 0, 50000);
        cc->ReceiveAck(Ack(1000, 2000, &first)); // the first record only primes the state
        NS_TEST_ASSERT_MSG_EQ(cc->GetRate(), LINE, "no reaction without a previous record");
        // 10 us later: 125,000 bytes sent (line rate), 50,000 bytes queued all along
        IntHop second = Hop(10000, 125000, 50000);
        cc->ReceiveAck(Ack(3000, 4000, &second));
        double u = 1.0 + 50000 * 8.0 / (LINE * 10e-6);
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetUtilization(), u, 1e-12, "U = txRate/B + q/(B T)");
        double expected = LINE / (u / 0.95) + 50e6;
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetRate(), expected, expected * 1e-12, "Rc/(U/eta)+AI");
        NS_TEST_ASSERT_MSG_EQ(cc->UsesInt(), true, "HPCC needs INT");
        NS_TEST_ASSERT_MSG_EQ(cc->GetIntHeaderBytes(), 42, "2 + 8 bytes x 5 hops");
        cc->Dispose();
        Simulator::Destroy();
    }
};

/** \brief An idle path keeps the rate at line rate (the additive step is capped). */
class HpccIdleTestCase : public TestCase
{
  public:
    HpccIdleTestCase()
        : TestCase("HPCC stays at line rate on an idle path")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<Hpcc> cc = CreateObject<Hpcc>();
        cc->Start(LINE, MicroSeconds(10), 1000);
        IntHop first = Hop(0, 0, 0);
        IntHop second = Hop(10000, 12500, 0); // 10 % utilisation, no queue
        cc->ReceiveAck(Ack(1000, 2000, &first));
        cc->ReceiveAck(Ack(3000, 4000, &second));
        NS_TEST_ASSERT_MSG_EQ_TOL(cc->GetUtilization(), 0.1, 1e-12, "U = 0.1");
        NS_TEST_ASSERT_MSG_EQ(cc->GetRate(), LINE, "capped at line rate");
        cc->Dispose();
        Simulator::Destroy();
    }
};

/** \brief HPCC's TestSuite. */
class HpccTestSuite : public TestSuite
{
  public:
    HpccTestSuite()
        : TestSuite("heterosim-hpcc", Type::UNIT)
    {
        AddTestCase(new HpccCongestedTestCase, Duration::QUICK);
        AddTestCase(new HpccIdleTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static HpccTestSuite g_hpccTestSuite;
