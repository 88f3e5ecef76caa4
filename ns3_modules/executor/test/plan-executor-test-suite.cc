/*
 * HeteroSim: TestSuite for the plan executor on the fluid network.
 */
#include "ns3/fluid-network.h"
#include "ns3/plan-executor.h"
#include "ns3/simulator.h"
#include "ns3/star-topology-helper.h"
#include "ns3/test.h"
#include "ns3/uinteger.h"

#include <vector>

using namespace ns3;

namespace
{

/** A plan as the arrays PlanExecutor::LoadPlan takes (one row per task). */
struct PlanArrays
{
    std::vector<uint8_t> kind;
    std::vector<int32_t> gpu;
    std::vector<int32_t> dst;
    std::vector<int64_t> bytes;
    std::vector<int64_t> duration;
    std::vector<int64_t> delay;
    std::vector<int16_t> stream;
    std::vector<uint8_t> priority;
    std::vector<int64_t> depPtr{0};
    std::vector<int64_t> depIdx;

    void
    Add(uint8_t k, int32_t g, int32_t d, int64_t b, int64_t dur, std::vector<int64_t> deps)
    {
        kind.push_back(k);
        gpu.push_back(g);
        dst.push_back(d);
        bytes.push_back(b);
        duration.push_back(dur);
        delay.push_back(0);
        stream.push_back(0);
        priority.push_back(3);
        depIdx.insert(depIdx.end(), deps.begin(), deps.end());
        depPtr.push_back(static_cast<int64_t>(depIdx.size()));
    }

    void
    LoadInto(Ptr<PlanExecutor> executor) const
    {
        executor->LoadPlan(kind.size(),
                           kind.data(),
                           gpu.data(),
                           dst.data(),
                           bytes.data(),
                           duration.data(),
                           delay.data(),
                           stream.data(),
                           priority.data(),
                           depPtr.data(),
                           depIdx.data());
    }
};

/** Executor on a 2-host star (100 Gb/s everywhere, 1 us links) with a fluid network. */
Ptr<PlanExecutor>
MakeExecutor(const PlanArrays& plan)
{
    Ptr<TopologyDescription> topo = StarTopologyHelper(2, 100e9, 100e9, NanoSeconds(1000)).Create();
    Ptr<FluidNetwork> net = CreateObject<FluidNetwork>();
    net->SetAttribute("Mtu", UintegerValue(1000));
    net->SetTopology(topo);
    Ptr<PlanExecutor> executor = CreateObject<PlanExecutor>();
    executor->SetNetwork(net);
    executor->SetTopology(topo);
    plan.LoadInto(executor);
    return executor;
}

} // namespace

/**
 * \brief Compute -> flow -> compute across two hosts: the makespan is the two compute
 * durations plus the fluid model's completion time of a lone flow (its header's formula).
 */
class ComputeFlowComputeTestCase : public TestCase
{
  public:
    ComputeFlowComputeTestCase()
        : TestCase("compute, flow and compute run back to back with the fluid flow time")
    {
    }

  private:
    void
    DoRun() override
    {
        PlanArrays plan;
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 1000, {});
        plan.Add(PlanExecutor::FLOW, 0, 1, 1000000, 0, {0});
        plan.Add(PlanExecutor::COMPUTE, 1, -1, 0, 500, {1});
        Ptr<PlanExecutor> executor = MakeExecutor(plan);
        NS_TEST_ASSERT_MSG_EQ(executor->Run(), PlanExecutor::FINISHED, executor->GetError());
        // 1 MB at 100 Gb/s = 80,000 ns; 4 hops of 1 us; the first 1000-byte packet is stored
        // and forwarded on 3 hops besides the slowest: 3 x 80 ns
        int64_t flowNs = 80000 + 4 * 1000 + 3 * 80;
        std::vector<int64_t> start(3);
        std::vector<int64_t> end(3);
        executor->CopyTimes(start.data(), end.data());
        NS_TEST_ASSERT_MSG_EQ(start[1], 1000, "the flow starts when its parent finishes");
        NS_TEST_ASSERT_MSG_EQ(end[1], 1000 + flowNs, "fluid completion time of a lone flow");
        NS_TEST_ASSERT_MSG_EQ(executor->GetMakespanNs(), 1000 + flowNs + 500, "makespan");
        NS_TEST_ASSERT_MSG_EQ(executor->GetTasksDone(), 3, "every task ran");
        executor->Dispose();
        Simulator::Destroy();
    }
};

/** \brief A dependency cycle is refused before the run, with a message. */
class CycleTestCase : public TestCase
{
  public:
    CycleTestCase()
        : TestCase("a plan with a dependency cycle is invalid")
    {
    }

  private:
    void
    DoRun() override
    {
        PlanArrays plan;
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {1});
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {0});
        Ptr<PlanExecutor> executor = MakeExecutor(plan);
        NS_TEST_ASSERT_MSG_EQ(executor->Validate(), false, "a cycle cannot run");
        NS_TEST_ASSERT_MSG_EQ((executor->GetError().find("cycle") != std::string::npos),
                              true,
                              "the error names the cycle: " << executor->GetError());
        executor->Dispose();
        Simulator::Destroy();
    }
};

/** \brief Two flows into one NIC share its link: each gets half, both end together. */
class SharedBottleneckTestCase : public TestCase
{
  public:
    SharedBottleneckTestCase()
        : TestCase("two flows into one GPU share its access link max-min fairly")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<TopologyDescription> topo =
            StarTopologyHelper(3, 100e9, 100e9, NanoSeconds(1000)).Create();
        Ptr<FluidNetwork> net = CreateObject<FluidNetwork>();
        net->SetAttribute("Mtu", UintegerValue(1000));
        net->SetTopology(topo);
        PlanArrays plan;
        plan.Add(PlanExecutor::FLOW, 0, 2, 1000000, 0, {});
        plan.Add(PlanExecutor::FLOW, 1, 2, 1000000, 0, {});
        Ptr<PlanExecutor> executor = CreateObject<PlanExecutor>();
        executor->SetNetwork(net);
        executor->SetTopology(topo);
        plan.LoadInto(executor);
        NS_TEST_ASSERT_MSG_EQ(executor->Run(), PlanExecutor::FINISHED, executor->GetError());
        std::vector<int64_t> start(2);
        std::vector<int64_t> end(2);
        executor->CopyTimes(start.data(), end.data());
        // each at 50 Gb/s: 160,000 ns, plus the same path latency as a lone flow
        NS_TEST_ASSERT_MSG_EQ(end[0], 160000 + 4 * 1000 + 3 * 80, "half the link each");
        NS_TEST_ASSERT_MSG_EQ(end[1], end[0], "symmetric flows finish together");
        executor->Dispose();
        Simulator::Destroy();
    }
};

/** \brief The plan executor's TestSuite. */
class PlanExecutorTestSuite : public TestSuite
{
  public:
    PlanExecutorTestSuite()
        : TestSuite("heterosim-plan-executor", Type::UNIT)
    {
        AddTestCase(new ComputeFlowComputeTestCase, Duration::QUICK);
        AddTestCase(new CycleTestCase, Duration::QUICK);
        AddTestCase(new SharedBottleneckTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static PlanExecutorTestSuite g_planExecutorTestSuite;
