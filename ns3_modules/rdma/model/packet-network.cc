/*
 * HeteroSim: the packet-level RDMA network behind the FlowNetwork interface.
 */
#include "packet-network.h"

#include "ns3/assert.h"
#include "ns3/boolean.h"
#include "ns3/dcqcn.h"
#include "ns3/log.h"
#include "ns3/no-congestion-control.h"
#include "ns3/rdma-congestion-control.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/switch-mmu.h"
#include "ns3/type-id.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PacketNetwork");
NS_OBJECT_ENSURE_REGISTERED(PacketNetwork);

namespace
{
/** Serialisation time of \p bytes at \p rateBps, ns, rounded up. */
int64_t
TxNs(uint32_t bytes, double rateBps)
{
    return static_cast<int64_t>(std::ceil(static_cast<double>(bytes) * 8e9 / rateBps));
}
} // namespace

TypeId
PacketNetwork::GetTypeId()
{
    // one entry per attribute and trace source: a table, long because the network has many
    static TypeId tid =
        TypeId("ns3::PacketNetwork")
            .SetParent<FlowNetwork>()
            .SetGroupName("Heterosim")
            .AddConstructor<PacketNetwork>()
            .AddAttribute("Cc",
                          "Congestion control between hosts: the TypeId of a subclass of "
                          "ns3::RdmaCongestionControl (ns3::Dcqcn, ns3::Hpcc, ns3::Timely, "
                          "ns3::Dctcp, ns3::NoCongestionControl, or one of your own)",
                          TypeIdValue(Dcqcn::GetTypeId()),
                          MakeTypeIdAccessor(&PacketNetwork::m_ccType),
                          MakeTypeIdChecker())
            .AddAttribute("Mtu",
                          "RDMA payload bytes per packet, bytes",
                          UintegerValue(4096),
                          MakeUintegerAccessor(&PacketNetwork::m_mtu),
                          MakeUintegerChecker<uint32_t>(64, 9216))
            .AddAttribute("PfcEnabled",
                          "Lossless fabric (PFC) on leaf and spine switches",
                          BooleanValue(true),
                          MakeBooleanAccessor(&PacketNetwork::m_pfc),
                          MakeBooleanChecker())
            .AddAttribute("BufferSize",
                          "Shared buffer of each leaf/spine switch, bytes",
                          UintegerValue(32ULL << 20),
                          MakeUintegerAccessor(&PacketNetwork::m_buffer),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("HostBufferSize",
                          "Buffer of each NVSwitch / PCIe switch / root node, bytes",
                          UintegerValue(64ULL << 20),
                          MakeUintegerAccessor(&PacketNetwork::m_hostBuffer),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnEnabled",
                          "ECN marking at leaf/spine egress queues",
                          BooleanValue(true),
                          MakeBooleanAccessor(&PacketNetwork::m_ecn),
                          MakeBooleanChecker())
            .AddAttribute(
                "Seed",
                "Run seed: drives the per-flow ECMP hash, the ECN markers' random streams (seed 1: "
                "each switch's node id) and random link losses",
                UintegerValue(1),
                MakeUintegerAccessor(&PacketNetwork::m_seed),
                MakeUintegerChecker<uint32_t>())
            .AddAttribute("Ecmp",
                          "Spread flows over equal-cost paths by their hash (else all flows "
                          "hash alike and share one path per destination)",
                          BooleanValue(true),
                          MakeBooleanAccessor(&PacketNetwork::m_ecmp),
                          MakeBooleanChecker())
            .AddAttribute("LoadBalancing",
                          "Choice among equal-cost ports at leaf and spine switches: ecmp (by "
                          "flow hash) or a LoadBalancer mode (flowlet, adaptive, "
                          "adaptive_flowlet, spray, spray_rr)",
                          StringValue("ecmp"),
                          MakeStringAccessor(&PacketNetwork::m_balancing),
                          MakeStringChecker())
            .AddAttribute("SampleInterval",
                          "Sampling period of queue depths and queue-pair rates (0 = off)",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&PacketNetwork::m_sampleInterval),
                          MakeTimeChecker())
            .AddAttribute("SampleAllPorts",
                          "Sample every port (else only leaf/spine ports and NIC uplinks)",
                          BooleanValue(false),
                          MakeBooleanAccessor(&PacketNetwork::m_sampleAllPorts),
                          MakeBooleanChecker())
            .AddAttribute("IncludePhyOverhead",
                          "Count the 8-byte preamble/SFD and 12-byte inter-frame gap of every "
                          "frame on the wire",
                          BooleanValue(true),
                          MakeBooleanAccessor(&PacketNetwork::m_phyOverhead),
                          MakeBooleanChecker())
            .AddAttribute("HostFlows",
                          "Model of flows between GPUs of one host: packet (frames over the "
                          "NVLink/PCIe links) or fluid (a FluidNetwork on the host links, with "
                          "this network's Mtu, Seed and Ecmp)",
                          StringValue("packet"),
                          MakeStringAccessor(&PacketNetwork::m_hostFlows),
                          MakeStringChecker())
            .AddAttribute("Acceleration",
                          "exact (every frame simulated), fast (settled stretches skipped by "
                          "PacketFastForward, whose attributes set the detection thresholds), "
                          "memo (repeated contention episodes replayed by PacketEpisodeCache) "
                          "or fast+memo (both)",
                          StringValue("exact"),
                          MakeStringAccessor(&PacketNetwork::m_acceleration),
                          MakeStringChecker());
    return tid;
}

PacketNetwork::PacketNetwork()
{
    NS_LOG_FUNCTION(this);
}

PacketNetwork::~PacketNetwork()
{
    NS_LOG_FUNCTION(this);
}

bool
PacketNetwork::SetComponentAttribute(std::string name, std::string value)
{
    std::string cls;
    std::string attr = name;
    std::size_t cut = name.rfind("::");
    if (cut != std::string::npos)
    {
        cls = name.substr(0, cut);
        attr = name.substr(cut + 2);
        if (cls.rfind("ns3::", 0) != 0)
        {
            cls = "ns3::" + cls;
        }
    }
    // the network's own attributes first, then the components' (PacketNetworkBuilder)
    bool any = false;
    if (cls.empty() || cls == "ns3::PacketNetwork")
    {
        TypeId::AttributeInformation info;
        if (PacketNetwork::GetTypeId().LookupAttributeByName(attr, &info))
        {
            Ptr<AttributeValue> v = info.checker->CreateValidValue(StringValue(value));
            if (!v)
            {
                return false;
            }
            SetAttribute(attr, *v);
            any = true;
        }
    }
    switch (m_builder.SetComponentAttribute(cls, attr, value))
    {
    case PacketNetworkBuilder::INVALID:
        return false;
    case PacketNetworkBuilder::SET:
        return true;
    case PacketNetworkBuilder::NOT_FOUND:
        break;
    }
    return any;
}

uint32_t
PacketNetwork::PortOf(uint32_t node, uint32_t link) const
{
    const std::vector<uint32_t>& ports = m_nodePorts[node];
    for (uint32_t p = 0; p < ports.size(); ++p)
    {
        if (ports[p] / 2 == link)
        {
            return p;
        }
    }
    NS_ASSERT_MSG(false, "node " << node << " is not on link " << link);
    return 0;
}

void
PacketNetwork::AttachFastForward(Ptr<TopologyDescription> desc, bool plain)
{
    m_ff = nullptr;
    m_memo = nullptr;
    if (m_acceleration == "fast" || m_acceleration == "fast+memo")
    {
        // Skipped only where a settled state is a fixed point of the controller: DCQCN at its
        // line rate or clear of its share (no CNPs), and none. TIMELY and HPCC read time
        // stamps carried in frames, DCTCP's window keeps growing without marks. TCP
        // connections of socket hosts (SocketTransport) share the fabric with their own
        // state and timers, which a skip does not advance: no skips where there are any.
        std::string cc = m_ccType.GetName();
        m_ff = m_builder.CreateFastForward();
        m_ff->Attach(this,
                     (cc == "ns3::Dcqcn" || cc == "ns3::NoCongestionControl") &&
                         !desc->HasSocketHosts() && plain);
    }
}

bool
PacketNetwork::CheckSettings()
{
    return m_builder.HasCongestionControl(m_ccType) &&
           (m_hostFlows == "packet" || m_hostFlows == "fluid") &&
           (m_acceleration == "exact" || m_acceleration == "fast" || m_acceleration == "memo" ||
            m_acceleration == "fast+memo") &&
           m_builder.SetLoadBalancing(m_balancing);
}

bool
PacketNetwork::Build(Ptr<TopologyDescription> desc)
{
    NS_LOG_FUNCTION(this);
    if (!CheckSettings())
    {
        return false;
    }
    // fast-forward and memoization assume one path per queue pair and go-back-N state
    bool plain = m_balancing == "ecmp" && m_builder.NicsGoBackN();
    AttachFastForward(desc, plain);
    // The chosen algorithm states what its frames carry (INT records) and what the switches
    // must do for it (stamp INT).
    Ptr<RdmaCongestionControl> ccProbe = m_builder.CreateCongestionControl(m_ccType);
    m_desc = desc;
    if (!CreateSocketTransport(desc))
    {
        return false;
    }
    CreateHostFluid(desc);
    BuildFabric(desc, ccProbe);
    ConnectSocketTransport(desc);
    AttachEpisodeCache(desc, plain);
    m_sampler.Setup(desc,
                    &m_portDev,
                    &m_qps,
                    m_socket,
                    m_sampleInterval,
                    m_sampleAllPorts,
                    MakeCallback(&PacketNetwork::HasPendingFlows, this));
    return true;
}

bool
PacketNetwork::CreateSocketTransport(Ptr<TopologyDescription> desc)
{
    m_socket = nullptr;
    if (!desc->HasSocketHosts())
    {
        return true;
    }
    m_socket = m_builder.CreateSocketTransport();
    StringValue tcp;
    m_socket->GetAttribute("TcpCongestionControl", tcp);
    TypeId tcpType;
    if (!TypeId::LookupByNameFailSafe(tcp.Get(), &tcpType) ||
        !tcpType.IsChildOf(TypeId::LookupByName("ns3::TcpCongestionOps")))
    {
        return false;
    }
    if (m_pfc && !m_socket->IsLossless())
    {
        m_builder.SetLossyPriorities(1U << m_socket->GetPriority());
    }
    return true;
}

void
PacketNetwork::CreateHostFluid(Ptr<TopologyDescription> desc)
{
    m_hostFluid = nullptr;
    if (m_hostFlows != "fluid")
    {
        return;
    }
    m_hostFluid = CreateObject<FluidNetwork>();
    m_hostFluid->SetAttribute("Mtu", UintegerValue(m_mtu));
    m_hostFluid->SetAttribute("Seed", UintegerValue(m_seed));
    m_hostFluid->SetAttribute("Ecmp", BooleanValue(m_ecmp));
    m_hostFluid->SetTopology(desc);
    m_hostFluid->SetFlowDoneCallback(MakeCallback(&PacketNetwork::HostFlowDone, this));
}

uint32_t
PacketNetwork::PhyBytes() const
{
    // preamble and start delimiter (8 bytes) and the inter-frame gap (12 bytes), IEEE 802.3
    return m_phyOverhead ? 20 : 0;
}

void
PacketNetwork::BuildFabric(Ptr<TopologyDescription> desc, Ptr<RdmaCongestionControl> ccProbe)
{
    m_pool = Create<RdmaFramePool>();
    uint32_t phy = PhyBytes();
    m_sizes.dataHeader = 62 + phy;
    m_sizes.ack = 66 + phy;
    m_sizes.cnp = 78 + phy;
    m_sizes.intBytes = ccProbe->GetIntHeaderBytes();
    m_maxFrame = m_mtu + m_sizes.dataHeader + m_sizes.intBytes;

    PacketFabricSettings settings;
    settings.mtu = m_mtu;
    settings.seed = m_seed;
    settings.pfc = m_pfc;
    settings.buffer = m_buffer;
    settings.hostBuffer = m_hostBuffer;
    settings.ecn = m_ecn;
    settings.phyBytes = phy;
    settings.stampInt = ccProbe->UsesInt();
    settings.sizes = m_sizes;
    settings.maxFrame = m_maxFrame;
    settings.balance = m_balancing != "ecmp";
    settings.pool = PeekPointer(m_pool);
    settings.qps = &m_qps;
    settings.delivered = MakeCallback(&PacketNetwork::Delivered, this);
    PacketFabric fabric = m_builder.Build(desc, settings);
    m_nodes = std::move(fabric.nodes);
    m_portDev = std::move(fabric.portDev);
    m_nodePorts = std::move(fabric.nodePorts);
    m_nics = std::move(fabric.nics);
    m_switches = std::move(fabric.switches);
}

void
PacketNetwork::ConnectSocketTransport(Ptr<TopologyDescription> desc)
{
    if (!m_socket)
    {
        return;
    }
    m_socket->Setup(desc,
                    m_nodes,
                    m_nodePorts,
                    m_portDev,
                    PeekPointer(m_pool),
                    m_seed,
                    m_ecmp,
                    PhyBytes(),
                    MakeCallback(&PacketNetwork::Finish, this));
    for (const auto& nic : m_nics)
    {
        if (nic)
        {
            nic->SetIpReceiveCallback(MakeCallback(&SocketTransport::ReceiveFrame, m_socket));
        }
    }
}

void
PacketNetwork::AttachEpisodeCache(Ptr<TopologyDescription> desc, bool plain)
{
    if ((m_acceleration == "memo" || m_acceleration == "fast+memo") && !desc->HasSocketHosts() &&
        plain)
    {
        // TCP connections of socket hosts share the fabric unseen by the cache: none then
        m_memo = m_builder.CreateEpisodeCache();
        m_memo->Attach(this);
    }
}

void
PacketNetwork::StartFlow(
    uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint64_t bytes, uint8_t priority)
{
    StartMessage(flowId, srcGpu, dstGpu, bytes, priority, -1);
}

void
PacketNetwork::StartFlowOnConnection(uint32_t flowId,
                                     uint32_t srcGpu,
                                     uint32_t dstGpu,
                                     uint64_t bytes,
                                     uint8_t priority,
                                     uint32_t connection)
{
    StartMessage(flowId, srcGpu, dstGpu, bytes, priority, connection);
}

void
PacketNetwork::SetLinkUp(uint32_t link, bool up)
{
    NS_LOG_FUNCTION(this << link << up);
    if (m_ff)
    {
        m_ff->Fault(); // the fast-forward falls back to packets until settled again
    }
    if (m_memo)
    {
        m_memo->Fault(); // replays are materialised, nothing is memoized from now on
    }
    NS_ASSERT_MSG(m_desc, "Build() before faults");
    m_portDev[2 * link]->SetLinkDown(!up);
    m_portDev[2 * link + 1]->SetLinkDown(!up);
    m_desc->SetLinkUp(link, up);
}

uint32_t
PacketNetwork::Reroute()
{
    NS_LOG_FUNCTION(this);
    std::vector<std::pair<uint32_t, std::vector<uint32_t>>> before;
    for (const auto& qp : m_qps)
    {
        if (!qp->IsFinished())
        {
            before.emplace_back(qp->flowId, GetFlowPath(qp->flowId));
        }
    }
    m_desc->RecomputeFabricRoutes();
    for (auto& sw : m_switches)
    {
        if (sw)
        {
            sw->UpdateRoutes();
        }
    }
    uint32_t moved = 0;
    for (const auto& [flowId, path] : before)
    {
        std::vector<uint32_t> now = GetFlowPath(flowId);
        if (!now.empty() && now != path)
        {
            ++moved;
        }
    }
    std::vector<UnroutedMessage> waiting;
    waiting.swap(m_unrouted);
    for (const UnroutedMessage& m : waiting)
    {
        --m_pending; // counted again by StartMessage (which may put it back to wait)
        StartMessage(m.flowId, m.srcGpu, m.dstGpu, m.bytes, m.priority, m.connection);
    }
    return moved;
}

void
PacketNetwork::SetLinkRate(uint32_t link, double rateBps)
{
    NS_LOG_FUNCTION(this << link << rateBps);
    if (m_ff)
    {
        m_ff->Fault(); // the fast-forward falls back to packets until settled again
    }
    if (m_memo)
    {
        m_memo->Fault(); // replays are materialised, nothing is memoized from now on
    }
    auto rate = static_cast<uint64_t>(std::llround(rateBps));
    m_portDev[2 * link]->SetRate(rate);
    m_portDev[2 * link + 1]->SetRate(rate);
    m_desc->SetLinkRateBps(link, rateBps);
}

void
PacketNetwork::SetLinkLoss(uint32_t link, double probability, double goodputFactor)
{
    NS_LOG_FUNCTION(this << link << probability);
    if (m_ff)
    {
        m_ff->Fault(); // the fast-forward falls back to packets until settled again
    }
    if (m_memo)
    {
        m_memo->Fault(); // replays are materialised, nothing is memoized from now on
    }
    // streams far above the ECN markers' (one per node) and different for every port and seed
    int64_t base = (static_cast<int64_t>(m_seed) + 1) * 1000003LL * 4;
    m_portDev[2 * link]->SetLossProbability(probability, base + 2 * link);
    m_portDev[2 * link + 1]->SetLossProbability(probability, base + 2 * link + 1);
}

uint64_t
PacketNetwork::GetLinkFaultDrops(uint32_t link) const
{
    return m_portDev[2 * link]->GetFaultDrops() + m_portDev[2 * link + 1]->GetFaultDrops();
}

uint64_t
PacketNetwork::GetMessagesQueued() const
{
    return m_messagesQueued;
}

void
PacketNetwork::StartMessage(uint32_t flowId,
                            uint32_t srcGpu,
                            uint32_t dstGpu,
                            uint64_t bytes,
                            uint8_t priority,
                            int64_t connection)
{
    NS_LOG_FUNCTION(this << flowId << srcGpu << dstGpu << bytes << connection);
    NS_ASSERT_MSG(m_desc, "Build() before StartFlow()");
    ++m_flows;
    m_bytes += bytes;
    ++m_pending;
    if (srcGpu == dstGpu || bytes == 0)
    {
        Simulator::ScheduleNow(&PacketNetwork::Finish, this, flowId);
        return;
    }
    NS_ASSERT_MSG(priority < QbbNetDevice::N_PRIORITIES, "priority must be 0..7");
    uint32_t srcNode = m_desc->GetGpuNode(srcGpu);
    uint32_t dstNode = m_desc->GetGpuNode(dstGpu);
    bool sameHost = m_desc->GetNodeHost(srcNode) == m_desc->GetNodeHost(dstNode);
    if (sameHost && m_hostFluid)
    {
        StartOnHostFluid(flowId, srcGpu, dstGpu, bytes, priority, connection);
        return;
    }
    if (connection >= 0 &&
        AppendToConnection(flowId, bytes, priority, static_cast<uint32_t>(connection)))
    {
        return;
    }
    MessageRoute route =
        RouteMessage(flowId, srcGpu, dstGpu, srcNode, dstNode, sameHost, connection);
    if (route.path.empty())
    {
        // a link fault cuts one end off: the message waits until Reroute() finds a route
        NS_LOG_DEBUG("no route from GPU " << srcGpu << " to GPU " << dstGpu << ": flow " << flowId
                                          << " waits for a link");
        --m_flows;
        m_bytes -= bytes;
        m_unrouted.push_back({flowId, srcGpu, dstGpu, bytes, priority, connection});
        return;
    }
    SplitHostSegments(route, sameHost);
    if (!sameHost && m_socket && m_desc->UsesSocket(srcGpu, dstGpu))
    {
        m_socket->Send(flowId,
                       srcGpu,
                       dstGpu,
                       route.srcEp,
                       route.dstEp,
                       bytes,
                       connection,
                       route.srcDelayNs,
                       route.dstDelayNs);
        m_sampler.Arm();
        return;
    }
    OpenQueuePair(flowId, bytes, priority, connection, sameHost, route);
}

void
PacketNetwork::StartOnHostFluid(uint32_t flowId,
                                uint32_t srcGpu,
                                uint32_t dstGpu,
                                uint64_t bytes,
                                uint8_t priority,
                                int64_t connection)
{
    if (connection >= 0)
    {
        m_hostFluid->StartFlowOnConnection(
            flowId, srcGpu, dstGpu, bytes, priority, static_cast<uint32_t>(connection));
    }
    else
    {
        m_hostFluid->StartFlow(flowId, srcGpu, dstGpu, bytes, priority);
    }
}

bool
PacketNetwork::AppendToConnection(uint32_t flowId,
                                  uint64_t bytes,
                                  uint8_t priority,
                                  uint32_t connection)
{
    auto it = m_connSlot.find(connection);
    if (m_memo && it != m_connSlot.end())
    {
        m_memo->MessageAppended(it->second); // a replay continues packet by packet
    }
    if (it == m_connSlot.end() || m_qps[it->second]->IsFinished())
    {
        return false;
    }
    // Append to the open queue pair; the sender may send it after the host latency.
    RdmaQueuePair* qp = m_qps[it->second].get();
    NS_ASSERT_MSG(qp->priority == priority, "messages of one connection share a priority");
    // still sending, and posted bytes last longer than the host latency of the new
    // message: it queues behind the others and changes no rate
    bool busy = qp->active && qp->sndNxt<qp->posted&& static_cast<double>(qp->posted - qp->sndNxt) *
                                         8e9 / qp->lineRate> static_cast<double>(qp->srcDelayNs);
    uint64_t first = qp->size;
    qp->size += bytes;
    qp->sendEnds.push_back(qp->size);
    qp->recvEnds.emplace_back(qp->size, flowId);
    qp->delivered = false;
    m_slotOf[flowId] = qp->slot;
    m_msgSpan[flowId] = {first, bytes};
    ++m_messagesQueued;
    if (m_ff)
    {
        m_ff->MessageQueued(qp->slot, busy);
    }
    Simulator::Schedule(NanoSeconds(qp->srcDelayNs),
                        &RdmaNic::Post,
                        m_nics[qp->srcNode],
                        qp->slot,
                        qp->size,
                        qp->ffBytes);
    return true;
}

PacketNetwork::MessageRoute
PacketNetwork::RouteMessage(uint32_t flowId,
                            uint32_t srcGpu,
                            uint32_t dstGpu,
                            uint32_t srcNode,
                            uint32_t dstNode,
                            bool sameHost,
                            int64_t connection) const
{
    MessageRoute route;
    uint32_t hashKey = connection >= 0 ? static_cast<uint32_t>(connection) : flowId;
    route.hash = m_ecmp ? TopologyDescription::FlowHash(m_seed, hashKey, srcGpu, dstGpu, 0) : 0;
    route.ackHash = m_ecmp ? TopologyDescription::FlowHash(m_seed, hashKey, srcGpu, dstGpu, 1) : 0;
    int32_t plane = GetFlowPlane(flowId);
    route.srcEp = srcNode;
    route.dstEp = dstNode;
    if (!sameHost)
    {
        std::tie(route.srcEp, route.dstEp) = m_desc->GetFlowNics(srcGpu, dstGpu, route.hash, plane);
    }
    route.path = m_desc->GetPath(srcGpu, dstGpu, route.hash, plane);
    return route;
}

void
PacketNetwork::SplitHostSegments(MessageRoute& route, bool sameHost) const
{
    const std::vector<uint32_t>& path = route.path;
    route.first = 0;
    route.last = path.size();
    if (!sameHost)
    {
        route.first = path.size();
        for (std::size_t i = 0; i < path.size(); ++i)
        {
            uint8_t k = m_desc->GetLinkKind(path[i]);
            if (k == TopologyDescription::ACCESS || k == TopologyDescription::FABRIC)
            {
                route.first = std::min(route.first, i);
                route.last = i + 1;
            }
        }
        NS_ASSERT_MSG(route.first < route.last, "path between hosts without fabric links");
    }
    route.srcDelayNs = 0;
    route.dstDelayNs = 0;
    route.capBps = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < path.size(); ++i)
    {
        if (i >= route.first && i < route.last)
        {
            continue;
        }
        double rate = m_desc->GetLinkRateBps(path[i]);
        int64_t hop = m_desc->GetLinkDelayNs(path[i]) + TxNs(m_maxFrame, rate);
        (i < route.first ? route.srcDelayNs : route.dstDelayNs) += hop;
        route.capBps = std::min(route.capBps, rate);
    }
}

int64_t
PacketNetwork::TransportRttNs(const MessageRoute& route) const
{
    int64_t rttNs = 0;
    for (std::size_t i = route.first; i < route.last; ++i)
    {
        double rate = m_desc->GetLinkRateBps(route.path[i]);
        rttNs += 2 * m_desc->GetLinkDelayNs(route.path[i]) + TxNs(m_maxFrame, rate) +
                 TxNs(m_sizes.ack + m_sizes.intBytes, rate);
    }
    return rttNs;
}

void
PacketNetwork::OpenQueuePair(uint32_t flowId,
                             uint64_t bytes,
                             uint8_t priority,
                             int64_t connection,
                             bool sameHost,
                             const MessageRoute& route)
{
    int64_t rttNs = TransportRttNs(route);
    uint32_t srcEp = route.srcEp;
    uint32_t dstEp = route.dstEp;
    auto qp = std::make_unique<RdmaQueuePair>();
    uint32_t slot = static_cast<uint32_t>(m_qps.size());
    qp->flowId = flowId;
    qp->slot = slot;
    qp->srcNode = srcEp;
    qp->dstNode = dstEp;
    qp->hash = route.hash;
    qp->ackHash = route.ackHash;
    qp->priority = priority;
    qp->size = bytes;
    qp->posted = bytes;
    qp->sendEnds.push_back(bytes);
    qp->recvEnds.emplace_back(bytes, flowId);
    qp->srcDelayNs = route.srcDelayNs;
    qp->srcPort = PortOf(srcEp, route.path[route.first]);
    const auto& back = m_desc->GetNextHops(dstEp, srcEp);
    NS_ASSERT_MSG(!back.empty(), "no route back from node " << dstEp << " to " << srcEp);
    qp->dstPort =
        PortOf(dstEp, back[TopologyDescription::EcmpIndex(route.ackHash, 0, back.size())]);
    qp->portRate = static_cast<double>(m_portDev[m_nodePorts[srcEp][qp->srcPort]]->GetRateBps());
    qp->lineRate = std::min(qp->portRate, route.capBps);
    qp->deliverDelayNs = route.dstDelayNs;
    if (sameHost)
    {
        qp->cc = CreateObject<NoCongestionControl>();
    }
    else
    {
        qp->cc = m_builder.CreateCongestionControl(m_ccType);
    }
    qp->cc->Start(qp->lineRate, NanoSeconds(rttNs), m_mtu);
    m_slotOf[flowId] = slot;
    if (connection >= 0)
    {
        m_connSlot[static_cast<uint32_t>(connection)] = slot;
        m_msgSpan[flowId] = {0, bytes};
    }
    m_qps.push_back(std::move(qp));
    m_sampler.AddQueuePair(slot);
    EventId start = Simulator::Schedule(
        NanoSeconds(route.srcDelayNs), &RdmaNic::StartQueuePair, m_nics[srcEp], slot);
    if (m_memo)
    {
        m_memo->QueuePairCreated(slot, start); // hands it to the fast-forward unless replayed
    }
    else if (m_ff)
    {
        m_ff->QueuePairAdded(slot);
    }
    m_sampler.Arm();
}

void
PacketNetwork::Delivered(uint32_t slot, uint32_t flowId)
{
    const RdmaQueuePair* qp = m_qps[slot].get();
    Simulator::Schedule(NanoSeconds(qp->deliverDelayNs), &PacketNetwork::Finish, this, flowId);
    if (m_ff)
    {
        // a message boundary with the next message already queued changes no rate
        m_ff->MessageDelivered(slot, !qp->recvEnds.empty() && qp->sndNxt < qp->posted);
    }
    if (m_memo)
    {
        m_memo->Delivered(slot);
    }
}

void
PacketNetwork::Finish(uint32_t flowId)
{
    --m_pending;
    NotifyFlowDone(flowId);
    if (m_stopAfter > 0 && GetFinishedCount() >= m_stopAfter)
    {
        Simulator::Stop();
    }
}

void
PacketNetwork::HostFlowDone(uint32_t flowId, Time when)
{
    Finish(flowId);
}

Ptr<FluidNetwork>
PacketNetwork::GetHostFluid() const
{
    return m_hostFluid;
}

void
PacketNetwork::SetStopAfterFlows(uint64_t n)
{
    m_stopAfter = n;
}

bool
PacketNetwork::HasPendingFlows() const
{
    return m_pending > 0;
}

uint32_t
PacketNetwork::GetNGpus() const
{
    return m_desc ? m_desc->GetNGpus() : 0;
}

uint32_t
PacketNetwork::GetNPorts() const
{
    return static_cast<uint32_t>(m_portDev.size());
}

Ptr<QbbNetDevice>
PacketNetwork::GetPortDevice(uint32_t port) const
{
    return port < m_portDev.size() ? m_portDev[port] : nullptr;
}

Ptr<TopologyDescription>
PacketNetwork::GetTopology() const
{
    return m_desc;
}

uint32_t
PacketNetwork::GetNQueuePairs() const
{
    return static_cast<uint32_t>(m_qps.size());
}

const RdmaQueuePair*
PacketNetwork::GetQueuePair(uint32_t slot) const
{
    return m_qps[slot].get();
}

const RdmaQueuePair*
PacketNetwork::FindQueuePair(uint32_t flowId) const
{
    auto it = m_slotOf.find(flowId);
    return it == m_slotOf.end() ? nullptr : m_qps[it->second].get();
}

bool
PacketNetwork::GetMessageProgress(uint32_t flowId, uint64_t* acked, uint64_t* delivered) const
{
    const RdmaQueuePair* qp = FindQueuePair(flowId);
    if (qp == nullptr)
    {
        *acked = *delivered = 0;
        return false;
    }
    auto span = m_msgSpan.find(flowId);
    if (span == m_msgSpan.end())
    {
        *acked = qp->sndUna + qp->ffBytes;
        *delivered = qp->rcvNxt + qp->ffBytes;
        return true;
    }
    auto [start, len] = span->second;
    auto part = [start = start, len = len](uint64_t at) {
        return at <= start ? 0 : std::min<uint64_t>(len, at - start);
    };
    auto ff = m_msgFf.find(flowId);
    uint64_t skipped = ff == m_msgFf.end() ? 0 : ff->second;
    *acked = part(qp->sndUna) + (part(qp->sndUna) > 0 ? skipped : 0);
    *delivered = part(qp->rcvNxt) + (part(qp->rcvNxt) > 0 ? skipped : 0);
    return true;
}

uint64_t
PacketNetwork::GetFlowsStarted() const
{
    return m_flows;
}

uint64_t
PacketNetwork::GetBytesStarted() const
{
    return m_bytes;
}

uint64_t
PacketNetwork::GetSmallestSharedPool() const
{
    uint64_t smallest = std::numeric_limits<uint64_t>::max();
    for (uint32_t n = 0; n < m_switches.size(); ++n)
    {
        uint8_t kind = m_desc->GetNodeKind(n);
        if (m_switches[n] &&
            (kind == TopologyDescription::LEAF || kind == TopologyDescription::SPINE))
        {
            smallest = std::min(smallest, m_switches[n]->GetMmu()->GetSharedPool());
        }
    }
    return smallest == std::numeric_limits<uint64_t>::max() ? 0 : smallest;
}

uint64_t
PacketNetwork::GetFramesInUse() const
{
    return m_pool ? m_pool->GetInUse() : 0;
}

Ptr<RdmaCongestionControl>
PacketNetwork::GetFlowCc(uint32_t flowId) const
{
    const RdmaQueuePair* qp = FindQueuePair(flowId);
    return qp == nullptr ? nullptr : qp->cc;
}

Ptr<PacketFastForward>
PacketNetwork::GetFastForward() const
{
    return m_ff;
}

Ptr<PacketEpisodeCache>
PacketNetwork::GetEpisodeCache() const
{
    return m_memo;
}

const PacketNetworkSampler&
PacketNetwork::GetSampler() const
{
    return m_sampler;
}

Ptr<SocketTransport>
PacketNetwork::GetSocketTransport() const
{
    return m_socket;
}

std::vector<uint32_t>
PacketNetwork::GetFlowPath(uint32_t flowId) const
{
    auto it = m_slotOf.find(flowId);
    if (it == m_slotOf.end())
    {
        return {};
    }
    const RdmaQueuePair* qp = m_qps[it->second].get();
    // Walk the tables exactly as the devices forward: from the sending endpoint.
    std::vector<uint32_t> links;
    uint32_t node = qp->srcNode;
    uint32_t hop = 0;
    while (node != qp->dstNode && hop <= m_desc->GetNNodes())
    {
        const auto& set = m_desc->GetNextHops(node, qp->dstNode);
        if (set.empty())
        {
            return {};
        }
        uint32_t link = set.size() == 1
                            ? set[0]
                            : set[TopologyDescription::EcmpIndex(qp->hash, hop, set.size())];
        links.push_back(link);
        node = m_desc->GetOtherEnd(link, node);
        ++hop;
    }
    return links;
}

void
PacketNetwork::DoDispose()
{
    m_sampler.Stop();
    if (m_socket)
    {
        m_socket->Dispose();
        m_socket = nullptr;
    }
    for (auto& qp : m_qps)
    {
        qp->rtoEvent.Cancel();
        if (qp->cc)
        {
            qp->cc->Dispose();
        }
    }
    for (auto& nic : m_nics)
    {
        if (nic)
        {
            nic->Dispose();
        }
    }
    for (auto& sw : m_switches)
    {
        if (sw)
        {
            sw->Dispose();
        }
    }
    m_nics.clear();
    m_switches.clear();
    m_portDev.clear();
    m_nodes.clear();
    m_qps.clear();
    m_connSlot.clear();
    m_msgSpan.clear();
    m_msgFf.clear();
    if (m_ff)
    {
        m_ff->Dispose();
        m_ff = nullptr;
    }
    if (m_memo)
    {
        m_memo->Dispose();
        m_memo = nullptr;
    }
    m_desc = nullptr;
    if (m_hostFluid)
    {
        m_hostFluid->Dispose();
        m_hostFluid = nullptr;
    }
    FlowNetwork::DoDispose();
}

} // namespace ns3
