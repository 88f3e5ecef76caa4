/*
 * HeteroSim example: an incast on the packet-level RDMA network, with the congestion control
 * chosen by ns-3 TypeId.
 *
 *   ./incast-example --cc=ns3::Hpcc --senders=4 --bytes=4000000 --pfc=true
 *
 * --senders hosts send --bytes each to one more host through a 100 Gb/s switch; the program
 * prints each flow's completion time and the network counters (drops, PFC pause frames, ECN
 * marks, CNPs). Any subclass of ns3::RdmaCongestionControl can be named with --cc.
 */
#include "ns3/command-line.h"
#include "ns3/packet-network-stats.h"
#include "ns3/packet-network.h"
#include "ns3/simulator.h"
#include "ns3/star-topology-helper.h"

#include <iostream>
#include <string>
#include <vector>

using namespace ns3;

int
main(int argc, char* argv[])
{
    std::string cc = "ns3::Dcqcn";
    uint32_t senders = 4;
    uint64_t bytes = 4000000;
    bool pfc = true;
    CommandLine cmd(__FILE__);
    cmd.AddValue("cc", "congestion control TypeId", cc);
    cmd.AddValue("senders", "hosts sending to the last host", senders);
    cmd.AddValue("bytes", "bytes per flow", bytes);
    cmd.AddValue("pfc", "lossless fabric", pfc);
    cmd.Parse(argc, argv);

    Ptr<TopologyDescription> topo =
        StarTopologyHelper(senders + 1, 100e9, 400e9, MicroSeconds(1)).Create();
    Ptr<PacketNetwork> net = CreateObject<PacketNetwork>();
    if (!net->SetComponentAttribute("Cc", cc) ||
        !net->SetComponentAttribute("PfcEnabled", pfc ? "true" : "false") || !net->Build(topo))
    {
        std::cerr << "--cc=" << cc << ": not a congestion-control TypeId" << std::endl;
        return 1;
    }
    std::vector<uint32_t> ids;
    std::vector<uint32_t> src;
    std::vector<uint32_t> dst;
    for (uint32_t s = 0; s < senders; ++s)
    {
        ids.push_back(s);
        src.push_back(s);
        dst.push_back(senders);
    }
    std::vector<uint64_t> size(senders, bytes);
    std::vector<int64_t> start(senders, 0);
    std::vector<uint8_t> priority(senders, 3);
    net->ScheduleFlows(
        senders, ids.data(), src.data(), dst.data(), size.data(), start.data(), priority.data());
    net->SetStopAfterFlows(senders);
    Simulator::Stop(Seconds(1));
    Simulator::Run();

    std::vector<int64_t> end(senders);
    net->CopyFinishTimes(senders, ids.data(), end.data());
    for (uint32_t s = 0; s < senders; ++s)
    {
        std::cout << "flow " << s << ": "
                  << (end[s] < 0 ? std::string("did not finish") : std::to_string(end[s]) + " ns")
                  << std::endl;
    }
    std::vector<uint64_t> counters(PacketNetworkStats::N_COUNTERS);
    PacketNetworkStats(net).CopyCounters(counters.data());
    std::cout << "drops " << counters[2] << ", retransmits " << counters[3] << ", PFC pauses "
              << counters[4] << ", ECN marks " << counters[5] << ", CNPs " << counters[6]
              << std::endl;
    net->Dispose();
    Simulator::Destroy();
    return 0;
}
