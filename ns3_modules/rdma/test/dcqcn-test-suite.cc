/*
 * HeteroSim: TestSuite for the DCQCN reaction point (ConnectX variant).
 */
#include "ns3/dcqcn.h"
#include "ns3/simulator.h"
#include "ns3/test.h"

#include <cmath>

using namespace ns3;

namespace
{
constexpr double LINE = 100e9;
constexpr double G = 5.0 / 1024;         // Dcqcn::G default (Mellanox dce_tcp_g = 1019)
constexpr double ALPHA0 = 1023.0 / 1024; // Dcqcn::InitialAlpha
} // namespace

/**
 * \brief The first CNP cuts at once with the initial alpha; a second CNP inside the 4 us
 * decrease period waits for the period's end, where it cuts with alpha updated every 1 us
 * (docs/network_models.md §1.5).
 */
class DcqcnCutTestCase : public TestCase
{
  public:
    DcqcnCutTestCase()
        : TestCase("DCQCN cuts on the first CNP, then once per decrease period")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        Ptr<Dcqcn> rp = CreateObject<Dcqcn>();
        rp->Start(LINE, MicroSeconds(10), 4096);
        NS_TEST_ASSERT_MSG_EQ(rp->GetRate(), LINE, "flows start at line rate");
        double r1 = LINE * (1 - ALPHA0 / 2);
        double alpha1 = (1 - G) * ALPHA0 + G; // period [10.5, 11.5) had a CNP
        double alpha2 = ((1 - G) * alpha1 + G) * std::pow(1 - G, 2); // then a CNP, 2 empty
        double r2 = r1 * (1 - alpha2 / 2);
        double afterFirst = 0;
        double afterSecond = 0;
        Simulator::Schedule(NanoSeconds(10500), [&]() {
            rp->ReceiveCnp();
            afterFirst = rp->GetRate();
        });
        Simulator::Schedule(NanoSeconds(12200), [&]() {
            rp->ReceiveCnp();
            afterSecond = rp->GetRate();
        });
        Simulator::Stop(NanoSeconds(14501)); // after the events due at 14.5 us
        Simulator::Run();
        NS_TEST_ASSERT_MSG_EQ_TOL(afterFirst, r1, r1 * 1e-12, "immediate cut, initial alpha");
        NS_TEST_ASSERT_MSG_EQ_TOL(afterSecond, r1, r1 * 1e-12, "no second cut inside 4 us");
        NS_TEST_ASSERT_MSG_EQ_TOL(rp->GetRate(), r2, r2 * 1e-9, "cut at the period's end");
        NS_TEST_ASSERT_MSG_EQ(rp->GetTargetRate(), LINE, "no increase yet: Rt not clamped");
        NS_TEST_ASSERT_MSG_EQ(rp->GetCnpCount(), 2, "both CNPs counted");
        rp->Dispose();
        Simulator::Destroy();
    }
};

/** \brief Without CNPs a cut rate recovers toward the target by fast recovery. */
class DcqcnRecoveryTestCase : public TestCase
{
  public:
    DcqcnRecoveryTestCase()
        : TestCase("DCQCN recovers halfway to the target at an increase event")
    {
    }

  private:
    void
    DoRun() override
    {
        Simulator::Destroy();
        Ptr<Dcqcn> rp = CreateObject<Dcqcn>();
        rp->Start(LINE, MicroSeconds(10), 4096);
        double cut = 0;
        Simulator::Schedule(NanoSeconds(1000), [&]() {
            rp->ReceiveCnp();
            cut = rp->GetRate();
            rp->OnSend(32767); // one byte-counter quantum: stage 1 = F -> additive increase
        });
        Simulator::Stop(NanoSeconds(2000));
        Simulator::Run();
        double expected = (std::min(LINE + 5e6, LINE) + cut) / 2;
        NS_TEST_ASSERT_MSG_EQ_TOL(rp->GetRate(), expected, expected * 1e-12, "Rc <- (Rt + Rc)/2");
        NS_TEST_ASSERT_MSG_EQ(rp->UsesCnp(), true, "DCQCN needs CNPs");
        NS_TEST_ASSERT_MSG_EQ(rp->UsesInt(), false, "and no INT");
        rp->Dispose();
        Simulator::Destroy();
    }
};

/** \brief DCQCN's TestSuite. */
class DcqcnTestSuite : public TestSuite
{
  public:
    DcqcnTestSuite()
        : TestSuite("heterosim-dcqcn", Type::UNIT)
    {
        AddTestCase(new DcqcnCutTestCase, Duration::QUICK);
        AddTestCase(new DcqcnRecoveryTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static DcqcnTestSuite g_dcqcnTestSuite;
