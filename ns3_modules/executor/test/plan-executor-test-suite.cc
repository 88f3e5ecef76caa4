/*
 * HeteroSim: TestSuite for the plan executor on the fluid network.
 */
#include "ns3/fluid-network.h"
#include "ns3/plan-executor.h"
#include "ns3/simulator.h"
#include "ns3/star-topology-helper.h"
#include "ns3/test.h"
#include "ns3/uinteger.h"

#include <limits>
#include <string>
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
        // the times copied out, the plan and run state go; the run's totals stay
        executor->ReleaseTasks();
        NS_TEST_ASSERT_MSG_EQ(executor->GetNTasks(), 0, "no task left after ReleaseTasks");
        NS_TEST_ASSERT_MSG_EQ(executor->GetMakespanNs(), 1000 + flowNs + 500, "makespan kept");
        NS_TEST_ASSERT_MSG_EQ(executor->GetTasksDone(), 3, "tasks done kept");
        NS_TEST_ASSERT_MSG_EQ(executor->Resume(), PlanExecutor::FINISHED, "still finished");
        executor->Dispose();
        Simulator::Destroy();
        // the same plan again, recording its times in the caller's arrays (BorrowTimes)
        std::vector<int64_t> borrowedStart(3, 7);
        std::vector<int64_t> borrowedEnd(3, 7);
        Ptr<PlanExecutor> again = MakeExecutor(plan);
        again->BorrowTimes(3, borrowedStart.data(), borrowedEnd.data());
        NS_TEST_ASSERT_MSG_EQ(again->Run(), PlanExecutor::FINISHED, again->GetError());
        NS_TEST_ASSERT_MSG_EQ((borrowedStart == start), true, "borrowed start times as copied");
        NS_TEST_ASSERT_MSG_EQ((borrowedEnd == end), true, "borrowed end times as copied");
        again->ReleaseTasks();
        NS_TEST_ASSERT_MSG_EQ(borrowedEnd[1], 1000 + flowNs, "the caller's times outlive the run");
        again->Dispose();
        Simulator::Destroy();
    }
};

/**
 * \brief A borrowed plan (BorrowPlan, BorrowConnections: the caller's arrays, not copies) runs
 * as the copied one: the same start and end of every task; so does one whose parents CSR is let
 * go after Validate() (ReleaseParents) and then overwritten, which Validate() then refuses, and
 * one borrowed with its sizes, durations, delays, connections and parents in 32 bits and its GPU
 * ids in 16 (and one whose GPU columns are missing, which Validate() refuses).
 */
class BorrowedPlanTestCase : public TestCase
{
  public:
    BorrowedPlanTestCase()
        : TestCase("a borrowed plan runs as a copied one")
    {
    }

  private:
    void
    DoRun() override
    {
        PlanArrays plan;
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 1000, {});
        plan.Add(PlanExecutor::FLOW, 0, 1, 1000000, 0, {0});
        plan.Add(PlanExecutor::FLOW, 0, 1, 500000, 0, {0});
        plan.Add(PlanExecutor::COMPUTE, 1, -1, 0, 500, {1, 2});
        std::vector<int64_t> connection{-1, 7, 7, -1}; // the two flows: one queue pair
        std::vector<std::vector<int64_t>> times;
        plan.delay[3] = 300; // a delay to read in 32 bits
        std::vector<int32_t> bytes(plan.bytes.begin(), plan.bytes.end());
        std::vector<int32_t> duration(plan.duration.begin(), plan.duration.end());
        std::vector<int32_t> delay(plan.delay.begin(), plan.delay.end());
        std::vector<int32_t> narrowConnection(connection.begin(), connection.end());
        std::vector<int16_t> narrowGpu(plan.gpu.begin(), plan.gpu.end());
        std::vector<int16_t> narrowDst(plan.dst.begin(), plan.dst.end());
        std::vector<int32_t> narrowPtr(plan.depPtr.begin(), plan.depPtr.end());
        std::vector<int32_t> narrowIdx(plan.depIdx.begin(), plan.depIdx.end());
        // copied, borrowed, borrowed with the parents released, borrowed in 32 bits (parents too)
        for (int mode : {0, 1, 2, 3})
        {
            Ptr<PlanExecutor> executor = MakeExecutor(plan);
            std::vector<int64_t> depPtr = plan.depPtr; // the caller's, overwritten once released
            std::vector<int64_t> depIdx = plan.depIdx;
            if (mode == 3)
            {
                executor->BorrowPlanNarrow(plan.kind.size(),
                                           plan.kind.data(),
                                           nullptr,
                                           nullptr,
                                           bytes.data(),
                                           duration.data(),
                                           delay.data(),
                                           plan.stream.data(),
                                           plan.priority.data(),
                                           nullptr,
                                           nullptr);
                executor->BorrowParentsNarrow(plan.kind.size(), narrowPtr.data(), narrowIdx.data());
                NS_TEST_ASSERT_MSG_EQ(executor->Validate(), false, "no GPU columns given yet");
                NS_TEST_ASSERT_MSG_EQ(
                    executor->GetError(),
                    "the plan's GPU columns were not given (BorrowEndpointsNarrow)",
                    "the message says which");
                executor->BorrowEndpointsNarrow(
                    plan.kind.size(), narrowGpu.data(), narrowDst.data());
                executor->BorrowConnectionsNarrow(narrowConnection.size(), narrowConnection.data());
            }
            else if (mode > 0)
            {
                executor->BorrowPlan(plan.kind.size(),
                                     plan.kind.data(),
                                     plan.gpu.data(),
                                     plan.dst.data(),
                                     plan.bytes.data(),
                                     plan.duration.data(),
                                     plan.delay.data(),
                                     plan.stream.data(),
                                     plan.priority.data(),
                                     depPtr.data(),
                                     depIdx.data());
                executor->BorrowConnections(connection.size(), connection.data());
            }
            else
            {
                executor->SetConnections(connection.size(), connection.data());
            }
            NS_TEST_ASSERT_MSG_EQ(executor->ReleaseParents(), false, "not validated yet");
            if (mode == 2)
            {
                NS_TEST_ASSERT_MSG_EQ(executor->Validate(), true, executor->GetError());
                NS_TEST_ASSERT_MSG_EQ(executor->ReleaseParents(), true, "validated");
                std::fill(depPtr.begin(), depPtr.end(), -7);
                std::fill(depIdx.begin(), depIdx.end(), -7);
            }
            NS_TEST_ASSERT_MSG_EQ(executor->Run(), PlanExecutor::FINISHED, executor->GetError());
            if (mode == 2)
            {
                NS_TEST_ASSERT_MSG_EQ(executor->Validate(), false, "no parents to check");
                NS_TEST_ASSERT_MSG_EQ(
                    executor->GetError(),
                    "the dependency lists were released (ReleaseParents); load the plan again",
                    "the message says why");
            }
            std::vector<int64_t> start(4);
            std::vector<int64_t> end(4);
            executor->CopyTimes(start.data(), end.data());
            start.insert(start.end(), end.begin(), end.end());
            times.push_back(start);
            executor->Dispose();
            Simulator::Destroy();
        }
        for (std::size_t i = 0; i < times[0].size(); ++i)
        {
            NS_TEST_ASSERT_MSG_EQ(times[1][i], times[0][i], "borrowed and copied plans agree");
            NS_TEST_ASSERT_MSG_EQ(times[2][i], times[0][i], "released parents change nothing");
            NS_TEST_ASSERT_MSG_EQ(times[3][i], times[0][i], "32-bit columns read the same values");
        }
        // one connection: the second message follows the first (not a fair share of the link)
        NS_TEST_ASSERT_MSG_GT(times[0][4 + 2], times[0][4 + 1], "messages in post order");
    }
};

/**
 * \brief Times recorded in 32 bits (BorrowTimesNarrow) while they fit: a run that passes
 * 2^31 ns returns (NarrowTimesFull) and goes on in 64 bits, widened by the caller
 * (WidenTimes) or by the executor itself; every time equals a 64-bit run's.
 */
class NarrowTimesTestCase : public TestCase
{
  public:
    NarrowTimesTestCase()
        : TestCase("32-bit task times widen when the run passes 2^31 ns")
    {
    }

  private:
    void
    DoRun() override
    {
        PlanArrays plan;
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 2000000000, {});
        plan.Add(PlanExecutor::FLOW, 0, 1, 1000000, 0, {0});
        plan.Add(PlanExecutor::COMPUTE, 1, -1, 0, 1000000000, {1}); // ends past 2^31 ns
        plan.Add(PlanExecutor::MARKER, -1, -1, 0, 0, {2});
        plan.Add(PlanExecutor::COMPUTE, 1, -1, 0, 500, {3});
        std::size_t n = plan.kind.size();
        std::vector<std::vector<int64_t>> runs;
        // 64 bits; 32 bits widened by the caller; 32 bits widened by the executor; 32 bits
        // widened by the caller in place (the 64-bit arrays overlay the 32-bit ones)
        for (int mode : {0, 1, 2, 3})
        {
            Ptr<PlanExecutor> executor = MakeExecutor(plan);
            std::vector<int64_t> start(n, 7);
            std::vector<int64_t> end(n, 7);
            std::vector<int32_t> own32(2 * n, 7);
            int32_t* start32 = own32.data();
            int32_t* end32 = own32.data() + n;
            if (mode == 3)
            {
                start32 = reinterpret_cast<int32_t*>(start.data());
                end32 = reinterpret_cast<int32_t*>(end.data());
            }
            if (mode == 0)
            {
                executor->BorrowTimes(n, start.data(), end.data());
            }
            else
            {
                executor->BorrowTimesNarrow(n, start32, end32);
            }
            NS_TEST_ASSERT_MSG_EQ(executor->Start(), true, executor->GetError());
            int32_t state = executor->Resume();
            bool full = false;
            while (state == PlanExecutor::YIELDED)
            {
                full = full || executor->NarrowTimesFull();
                if ((mode == 1 || mode == 3) && executor->NarrowTimesFull())
                {
                    executor->WidenTimes(n, start.data(), end.data());
                    NS_TEST_ASSERT_MSG_EQ(executor->NarrowTimesFull(), false, "widened");
                }
                state = executor->Resume();
            }
            NS_TEST_ASSERT_MSG_EQ(state, PlanExecutor::FINISHED, executor->GetError());
            NS_TEST_ASSERT_MSG_EQ(full, (mode > 0), "only 32-bit times fill up");
            NS_TEST_ASSERT_MSG_EQ(
                own32[0], (mode == 1 || mode == 2 ? 0 : 7), "32-bit times before the widening");
            std::vector<int64_t> times(2 * n);
            executor->CopyTimes(times.data(), times.data() + n);
            if (mode != 2)
            {
                for (std::size_t i = 0; i < n; ++i)
                {
                    NS_TEST_ASSERT_MSG_EQ(start[i], times[i], "the caller's arrays hold the run");
                    NS_TEST_ASSERT_MSG_EQ(end[i], times[n + i], "the caller's arrays hold the run");
                }
            }
            runs.push_back(times);
            executor->Dispose();
            Simulator::Destroy();
        }
        NS_TEST_ASSERT_MSG_GT(runs[0][n + 2], std::numeric_limits<int32_t>::max(), "past 2^31");
        NS_TEST_ASSERT_MSG_EQ(runs[0][n + 4], runs[0][n + 2] + 500, "the last task after it");
        for (std::size_t i = 0; i < runs[0].size(); ++i)
        {
            NS_TEST_ASSERT_MSG_EQ(runs[1][i], runs[0][i], "widened by the caller: the same times");
            NS_TEST_ASSERT_MSG_EQ(runs[2][i], runs[0][i], "widened by the executor: the same");
            NS_TEST_ASSERT_MSG_EQ(runs[3][i], runs[0][i], "widened in place: the same times");
        }
    }
};

/**
 * \brief The executor's end times are the record of its flows: the network keeps no finish
 * time per flow of its own then (no second table per task); flows scheduled without an
 * executor keep theirs.
 */
class FinishTimesTestCase : public TestCase
{
  public:
    FinishTimesTestCase()
        : TestCase("the network keeps finish times only for flows run without an executor")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<TopologyDescription> topo =
            StarTopologyHelper(2, 100e9, 100e9, NanoSeconds(1000)).Create();
        int64_t flowNs = 80000 + 4 * 1000 + 3 * 80; // as in ComputeFlowComputeTestCase
        uint32_t id = 0;
        for (bool withExecutor : {true, false})
        {
            Ptr<FluidNetwork> net = CreateObject<FluidNetwork>();
            net->SetAttribute("Mtu", UintegerValue(1000));
            net->SetTopology(topo);
            Ptr<PlanExecutor> executor;
            if (withExecutor)
            {
                PlanArrays plan;
                plan.Add(PlanExecutor::FLOW, 0, 1, 1000000, 0, {});
                executor = CreateObject<PlanExecutor>();
                executor->SetNetwork(net);
                executor->SetTopology(topo);
                plan.LoadInto(executor);
                NS_TEST_ASSERT_MSG_EQ(
                    executor->Run(), PlanExecutor::FINISHED, executor->GetError());
                std::vector<int64_t> start(1);
                std::vector<int64_t> end(1);
                executor->CopyTimes(start.data(), end.data());
                NS_TEST_ASSERT_MSG_EQ(end[0], flowNs, "the executor records the flow's end");
            }
            else
            {
                uint32_t src = 0;
                uint32_t dst = 1;
                uint64_t bytes = 1000000;
                int64_t startNs = 0;
                uint8_t priority = 3;
                net->ScheduleFlows(1, &id, &src, &dst, &bytes, &startNs, &priority);
                Simulator::Run();
            }
            int64_t kept = 7;
            net->CopyFinishTimes(1, &id, &kept);
            NS_TEST_ASSERT_MSG_EQ(kept, withExecutor ? -1 : flowNs, "the network's own record");
            NS_TEST_ASSERT_MSG_EQ(net->GetFinishedCount(), 1, "the flow is counted either way");
            if (executor)
            {
                executor->Dispose();
            }
            net->Dispose();
            Simulator::Destroy();
        }
    }
};

/**
 * \brief A compute task slows down only while a flow runs on its GPU: its nominal work done
 * before the flow, during it (at 1 / factor) and after it adds up to its duration.
 */
class ContentionTestCase : public TestCase
{
  public:
    ContentionTestCase()
        : TestCase("compute is slowed by the communication kernel only while it runs")
    {
    }

  private:
    void
    DoRun() override
    {
        PlanArrays plan;
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 100000, {});
        plan.Add(PlanExecutor::COMPUTE, 1, -1, 0, 10000, {});
        plan.Add(PlanExecutor::FLOW, 1, 0, 1000000, 0, {1});
        Ptr<PlanExecutor> executor = MakeExecutor(plan);
        Ptr<ComputeContention> contention = CreateObject<ComputeContention>();
        std::vector<double> wave{0.5, 0.5, 0.0};
        std::vector<double> share{0.01, 0.01, 0.0};
        std::vector<int32_t> above{8, 8, 0};
        std::vector<int32_t> blocks{0, 0, 16};
        std::vector<int32_t> instance{-1, -1, -1};
        contention->SetComputeTerms(3, wave.data(), share.data(), above.data());
        contention->SetFlowBlocks(3, blocks.data(), instance.data());
        contention->SetGpuCount(2);
        executor->SetComputeContention(contention);
        NS_TEST_ASSERT_MSG_EQ(executor->Run(), PlanExecutor::FINISHED, executor->GetError());
        std::vector<int64_t> start(3);
        std::vector<int64_t> end(3);
        executor->CopyTimes(start.data(), end.data());
        int64_t flowNs = 80000 + 4 * 1000 + 3 * 80; // as in ComputeFlowComputeTestCase
        NS_TEST_ASSERT_MSG_EQ(end[2], 10000 + flowNs, "the flow is not slowed");
        // f = max(1 + 0.5 (16 blocks > 8), 1 / (1 - 16 * 0.01)) = 1.5 while the flow runs
        double during = static_cast<double>(flowNs) / 1.5;
        auto expected = static_cast<int64_t>(10000 + flowNs + (100000 - 10000 - during));
        NS_TEST_ASSERT_MSG_EQ(end[0], expected, "work before, during and after the flow");
        NS_TEST_ASSERT_MSG_EQ(end[1], 10000, "the other GPU's compute ran before the flow");
        NS_TEST_ASSERT_MSG_EQ(contention->GetExtraNs()[0], expected - 100000, "time lost on GPU 0");
        NS_TEST_ASSERT_MSG_EQ(contention->GetTasksSlowed()[0], 1, "one task slowed on GPU 0");
        NS_TEST_ASSERT_MSG_EQ(contention->GetTasksSlowed()[1], 0, "none on GPU 1");
        NS_TEST_ASSERT_MSG_EQ(contention->GetTaskExtraNs().at(0), expected - 100000, "per task");
        NS_TEST_ASSERT_MSG_EQ(contention->GetTaskExtraNs().size(), 1, "only slowed tasks kept");
        NS_TEST_ASSERT_MSG_EQ(contention->GetNSlowedTasks(), 1, "one slowed task to copy out");
        std::vector<int64_t> gpuExtra(contention->GetExtraNs().size());
        std::vector<uint64_t> gpuSlowed(gpuExtra.size());
        uint32_t slowedTask = 7;
        int64_t slowedExtra = 0;
        contention->CopyAccounts(gpuExtra.data(), gpuSlowed.data(), &slowedTask, &slowedExtra);
        NS_TEST_ASSERT_MSG_EQ(gpuExtra[0], expected - 100000, "copied: time lost on GPU 0");
        NS_TEST_ASSERT_MSG_EQ(gpuSlowed[0], 1, "copied: one task slowed on GPU 0");
        NS_TEST_ASSERT_MSG_EQ(slowedTask, 0, "copied: the slowed task");
        NS_TEST_ASSERT_MSG_EQ(slowedExtra, expected - 100000, "copied: its extra time");
        NS_TEST_ASSERT_MSG_EQ(contention->BlocksOn(0), 0, "no block held after the run");
        contention->ReleaseTasks();
        NS_TEST_ASSERT_MSG_EQ(contention->GetTaskExtraNs().size(), 0, "per-task accounts freed");
        NS_TEST_ASSERT_MSG_EQ(contention->GetExtraNs()[0], expected - 100000, "per GPU kept");
        executor->Dispose();
        Simulator::Destroy();
        // the same terms borrowed (the caller's arrays, not copies): the same slowed end
        Ptr<ComputeContention> borrowed = CreateObject<ComputeContention>();
        borrowed->BorrowComputeTerms(3, wave.data(), share.data(), above.data());
        borrowed->BorrowFlowBlocks(3, blocks.data(), instance.data());
        NS_TEST_ASSERT_MSG_EQ(
            FirstTaskEnd(plan, borrowed), expected, "borrowed terms slow the task as copied ones");
        // the blocks in 8 bits: the same slowed end
        std::vector<uint8_t> narrowBlocks(blocks.begin(), blocks.end());
        Ptr<ComputeContention> narrow = CreateObject<ComputeContention>();
        narrow->BorrowComputeTerms(3, wave.data(), share.data(), above.data());
        narrow->BorrowFlowBlocksNarrow(3, narrowBlocks.data(), instance.data());
        NS_TEST_ASSERT_MSG_EQ(
            FirstTaskEnd(plan, narrow), expected, "8-bit blocks slow the task as 32-bit ones");
    }

    /// End of task 0 when \p plan runs on two GPUs with \p contention installed (-1 if the run
    /// does not finish).
    int64_t
    FirstTaskEnd(const PlanArrays& plan, Ptr<ComputeContention> contention)
    {
        Ptr<PlanExecutor> executor = MakeExecutor(plan);
        contention->SetGpuCount(2);
        executor->SetComputeContention(contention);
        int32_t state = executor->Run();
        NS_TEST_EXPECT_MSG_EQ(state, PlanExecutor::FINISHED, executor->GetError());
        std::vector<int64_t> start(plan.kind.size());
        std::vector<int64_t> end(plan.kind.size());
        executor->CopyTimes(start.data(), end.data());
        executor->Dispose();
        Simulator::Destroy();
        return state == PlanExecutor::FINISHED ? end[0] : -1;
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

/**
 * \brief Validate() names the first problem of a malformed plan in one line: each check (task
 * fields, connections, dependency arrays, cycles) with its exact message.
 */
class ValidationMessagesTestCase : public TestCase
{
  public:
    ValidationMessagesTestCase()
        : TestCase("Validate() reports each kind of malformed plan with its message")
    {
    }

  private:
    /** Validate \p plan (with \p connections if not empty) and compare the error. */
    void
    Expect(const PlanArrays& plan,
           const std::string& expected,
           const std::vector<int64_t>& connections = {})
    {
        Ptr<PlanExecutor> executor = MakeExecutor(plan);
        if (!connections.empty())
        {
            executor->SetConnections(connections.size(), connections.data());
        }
        bool valid = executor->Validate();
        NS_TEST_EXPECT_MSG_EQ(valid, expected.empty(), "valid: " << executor->GetError());
        NS_TEST_EXPECT_MSG_EQ(executor->GetError(), expected, "the message");
        executor->Dispose();
        Simulator::Destroy();
    }

    /** A plan of \p n compute tasks without dependencies. */
    static PlanArrays
    Computes(uint32_t n)
    {
        PlanArrays plan;
        for (uint32_t i = 0; i < n; ++i)
        {
            plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {});
        }
        return plan;
    }

    void
    DoRun() override
    {
        PlanArrays plan = Computes(2);
        plan.kind[1] = 3;
        Expect(plan, "task 1: unknown kind 3 (expected 0 compute, 1 flow, 2 marker)");
        plan = Computes(1);
        plan.delay[0] = -5;
        Expect(plan, "task 0: negative delay -5 ns");
        plan = Computes(1);
        plan.gpu[0] = 7;
        Expect(plan, "task 0: compute task on GPU 7, but the cluster has 2 GPUs");
        plan = Computes(1);
        plan.stream[0] = -2;
        Expect(plan, "task 0: negative duration or stream");

        plan = PlanArrays();
        plan.Add(PlanExecutor::FLOW, 0, 5, 100, 0, {});
        Expect(plan, "task 0: flow from GPU 0 to GPU 5, but the cluster has 2 GPUs");
        plan = PlanArrays();
        plan.Add(PlanExecutor::FLOW, 1, 1, 100, 0, {});
        Expect(plan, "task 0: flow from GPU 1 to itself");
        plan = PlanArrays();
        plan.Add(PlanExecutor::FLOW, 0, 1, 0, 0, {});
        Expect(plan, "task 0: flow of 0 bytes (expected > 0)");

        plan = PlanArrays();
        plan.Add(PlanExecutor::FLOW, 0, 1, 100, 0, {});
        Expect(plan, "task 0: connection id 4294967296 is larger than 2^32 - 1", {1LL << 32});
        plan.Add(PlanExecutor::FLOW, 0, 1, 100, 0, {});
        plan.Add(PlanExecutor::FLOW, 1, 0, 100, 0, {});
        Expect(plan, "", {5, 5, 100000}); // one connection, and a sparse id of its own
        Expect(plan,
               "task 2: connection 5 joins flows 0 and 2 with different GPUs or priorities",
               {5, 5, 5});
        Expect(plan,
               "task 2: connection 100000 joins flows 0 and 2 with different GPUs or priorities",
               {100000, 100000, 100000});
        plan = PlanArrays();
        plan.Add(PlanExecutor::MARKER, 0, -1, 0, 0, {});
        Expect(plan, "task 0: only flows have a connection", {3});

        plan = Computes(2);
        plan.depPtr = {1, 1, 1};
        plan.depIdx = {0};
        Expect(plan, "dependency offsets do not match the dependency list");
        plan = Computes(3);
        plan.depPtr = {0, 1, 0, 1};
        plan.depIdx = {2};
        Expect(plan, "task 1: dependency offsets decrease");
        plan = Computes(3);
        plan.depPtr = {0, 5, 0, 1};
        plan.depIdx = {2};
        Expect(plan, "task 0: dependency offsets run past the dependency list");
        plan = Computes(1);
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {9});
        Expect(plan, "task 1: depends on task 9, which does not exist");

        plan = PlanArrays();
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {1});
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {0});
        Expect(plan, "dependency cycle (2 tasks can never start): task 1 -> 0 -> 1");
        plan = PlanArrays();
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {11});
        for (int64_t i = 0; i < 11; ++i)
        {
            plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {i});
        }
        plan.Add(PlanExecutor::COMPUTE, 0, -1, 0, 10, {});
        Expect(plan,
               "dependency cycle (12 tasks can never start): task 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> "
               "7 -> 8 -> 9 -> 10 -> ... -> 1");
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
        AddTestCase(new BorrowedPlanTestCase, Duration::QUICK);
        AddTestCase(new FinishTimesTestCase, Duration::QUICK);
        AddTestCase(new NarrowTimesTestCase, Duration::QUICK);
        AddTestCase(new ContentionTestCase, Duration::QUICK);
        AddTestCase(new CycleTestCase, Duration::QUICK);
        AddTestCase(new ValidationMessagesTestCase, Duration::QUICK);
        AddTestCase(new SharedBottleneckTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static PlanExecutorTestSuite g_planExecutorTestSuite;
