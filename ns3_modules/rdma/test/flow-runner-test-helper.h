/*
 * HeteroSim: the flow runner shared by the rdma TestSuites: build a packet network with given
 * attributes, run a set of flows to the end and read their per-flow counters.
 */
#ifndef HETEROSIM_FLOW_RUNNER_TEST_HELPER_H
#define HETEROSIM_FLOW_RUNNER_TEST_HELPER_H

#include "ns3/abort.h"
#include "ns3/packet-network-stats.h"
#include "ns3/packet-network.h"
#include "ns3/simulator.h"

#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace ns3
{
namespace rdmatest
{

/** Flows to run: (source GPU, destination GPU, bytes, start ns; no starts: all at 0). */
struct Flows
{
    std::vector<uint32_t> src;   //!< source GPUs
    std::vector<uint32_t> dst;   //!< destination GPUs
    std::vector<uint64_t> bytes; //!< sizes
    std::vector<int64_t> start;  //!< start times, ns (empty: every flow at 0)
};

/** What a run left behind, per flow. */
struct Outcome
{
    uint64_t finished{0};              //!< flows finished
    std::vector<int64_t> end;          //!< finish time, ns (-1: unfinished)
    std::vector<uint64_t> retransmits; //!< packets retransmitted
    std::vector<uint64_t> delivered;   //!< bytes delivered in order
    std::vector<uint64_t> acked;       //!< bytes acknowledged
    std::vector<uint64_t> outOfOrder;  //!< packets that arrived out of order
    std::vector<uint64_t> maxDepth;    //!< deepest reordering seen, packets
};

/** \return the ids 0..n-1 */
inline std::vector<uint32_t>
Ids(uint32_t n)
{
    std::vector<uint32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    return ids;
}

/** Build a network on \p topo: \p defaults, then \p attrs (each must be accepted). */
inline Ptr<PacketNetwork>
BuildNetwork(Ptr<TopologyDescription> topo,
             const std::map<std::string, std::string>& defaults,
             const std::map<std::string, std::string>& attrs)
{
    Ptr<PacketNetwork> net = CreateObject<PacketNetwork>();
    for (const auto& [name, value] : defaults)
    {
        net->SetComponentAttribute(name, value);
    }
    for (const auto& [name, value] : attrs)
    {
        NS_ABORT_MSG_UNLESS(net->SetComponentAttribute(name, value), name << " is set");
    }
    NS_ABORT_MSG_UNLESS(net->Build(topo), "the network builds");
    return net;
}

/** Schedule \p flows on \p net (priority 3), run until they finish (or 100 ms) and read the
 * per-flow counters. */
inline Outcome
RunFlows(Ptr<PacketNetwork> net, const Flows& flows)
{
    auto n = static_cast<uint32_t>(flows.src.size());
    std::vector<uint32_t> ids = Ids(n);
    std::vector<int64_t> start = flows.start.empty() ? std::vector<int64_t>(n, 0) : flows.start;
    std::vector<uint8_t> priority(n, 3);
    net->ScheduleFlows(n,
                       ids.data(),
                       flows.src.data(),
                       flows.dst.data(),
                       flows.bytes.data(),
                       start.data(),
                       priority.data());
    net->SetStopAfterFlows(n);
    Simulator::Stop(MilliSeconds(100));
    Simulator::Run();
    Outcome out;
    out.finished = net->GetFinishedCount();
    out.end.assign(n, -1);
    net->CopyFinishTimes(n, ids.data(), out.end.data());
    std::vector<uint64_t> cnps(n);
    std::vector<uint64_t> changes(n);
    std::vector<uint64_t> timeouts(n);
    out.retransmits.assign(n, 0);
    out.delivered.assign(n, 0);
    out.acked.assign(n, 0);
    out.outOfOrder.assign(n, 0);
    out.maxDepth.assign(n, 0);
    PacketNetworkStats stats(net);
    stats.CopyFlowStats(n,
                        ids.data(),
                        out.retransmits.data(),
                        cnps.data(),
                        changes.data(),
                        timeouts.data(),
                        out.acked.data(),
                        out.delivered.data());
    stats.CopyReorderStats(n, ids.data(), out.outOfOrder.data(), out.maxDepth.data());
    return out;
}

} // namespace rdmatest
} // namespace ns3

#endif /* HETEROSIM_FLOW_RUNNER_TEST_HELPER_H */
