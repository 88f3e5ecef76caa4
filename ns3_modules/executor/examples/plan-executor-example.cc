/*
 * HeteroSim example: a data-parallel step on two hosts run by the plan executor on the fluid
 * network, with the result printed.
 *
 *   ./plan-executor-example --bytes=4000000 --compute=20000
 *
 * Each GPU computes for --compute ns, then the two exchange --bytes (one flow each way), then
 * each runs an optimizer step of a tenth of the compute time. The program prints every task's
 * start and end and the makespan.
 */
#include "ns3/command-line.h"
#include "ns3/fluid-network.h"
#include "ns3/plan-executor.h"
#include "ns3/simulator.h"
#include "ns3/star-topology-helper.h"

#include <iostream>
#include <vector>

using namespace ns3;

int
main(int argc, char* argv[])
{
    uint64_t bytes = 4000000;
    int64_t compute = 20000;
    CommandLine cmd(__FILE__);
    cmd.AddValue("bytes", "bytes each GPU sends to the other", bytes);
    cmd.AddValue("compute", "compute time before the exchange, ns", compute);
    cmd.Parse(argc, argv);

    Ptr<TopologyDescription> topo = StarTopologyHelper(2, 100e9, 400e9, MicroSeconds(1)).Create();
    Ptr<FluidNetwork> net = CreateObject<FluidNetwork>();
    net->SetTopology(topo);

    // tasks: 0, 1 compute; 2 flow 0->1; 3 flow 1->0; 4, 5 optimizer steps
    std::vector<uint8_t> kind{PlanExecutor::COMPUTE,
                              PlanExecutor::COMPUTE,
                              PlanExecutor::FLOW,
                              PlanExecutor::FLOW,
                              PlanExecutor::COMPUTE,
                              PlanExecutor::COMPUTE};
    std::vector<int32_t> gpu{0, 1, 0, 1, 0, 1};
    std::vector<int32_t> dst{-1, -1, 1, 0, -1, -1};
    std::vector<int64_t> size{0, 0, static_cast<int64_t>(bytes), static_cast<int64_t>(bytes), 0, 0};
    std::vector<int64_t> duration{compute, compute, 0, 0, compute / 10, compute / 10};
    std::vector<int64_t> delay(6, 0);
    std::vector<int16_t> stream(6, 0);
    std::vector<uint8_t> priority(6, 3);
    std::vector<int64_t> depPtr{0, 0, 0, 1, 2, 4, 6};
    std::vector<int64_t> depIdx{0, 1, 2, 3, 2, 3};

    Ptr<PlanExecutor> executor = CreateObject<PlanExecutor>();
    executor->SetNetwork(net);
    executor->SetTopology(topo);
    executor->LoadPlan(6,
                       kind.data(),
                       gpu.data(),
                       dst.data(),
                       size.data(),
                       duration.data(),
                       delay.data(),
                       stream.data(),
                       priority.data(),
                       depPtr.data(),
                       depIdx.data());
    if (executor->Run() != PlanExecutor::FINISHED)
    {
        std::cerr << "the plan did not finish: " << executor->GetError() << std::endl;
        return 1;
    }
    std::vector<int64_t> start(6);
    std::vector<int64_t> end(6);
    executor->CopyTimes(start.data(), end.data());
    for (uint32_t t = 0; t < 6; ++t)
    {
        std::cout << "task " << t << ": " << start[t] << " .. " << end[t] << " ns" << std::endl;
    }
    std::cout << "makespan " << executor->GetMakespanNs() << " ns" << std::endl;
    executor->Dispose();
    Simulator::Destroy();
    return 0;
}
