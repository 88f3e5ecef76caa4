/*
 * HeteroSim: the packet-level RDMA network behind the FlowNetwork interface.
 */
#include "packet-network.h"

#include "ns3/assert.h"
#include "ns3/boolean.h"
#include "ns3/data-rate.h"
#include "ns3/dcqcn.h"
#include "ns3/log.h"
#include "ns3/mac48-address.h"
#include "ns3/no-congestion-control.h"
#include "ns3/rdma-congestion-control.h"
#include "ns3/red-ecn-marker.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/switch-mmu.h"
#include "ns3/type-id.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PacketNetwork");
NS_OBJECT_ENSURE_REGISTERED(PacketNetwork);

namespace
{
/** Every registered congestion-control class: the children of RdmaCongestionControl. */
std::vector<TypeId>
CongestionControlTypes()
{
    std::vector<TypeId> types;
    TypeId base = RdmaCongestionControl::GetTypeId();
    for (uint16_t i = 0; i < TypeId::GetRegisteredN(); ++i)
    {
        TypeId tid = TypeId::GetRegistered(i);
        if (tid != base && tid.IsChildOf(base) && tid.HasConstructor())
        {
            types.push_back(tid);
        }
    }
    return types;
}

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
            .AddAttribute("Seed",
                          "Run seed: drives the per-flow ECMP hash only",
                          UintegerValue(1),
                          MakeUintegerAccessor(&PacketNetwork::m_seed),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("Ecmp",
                          "Spread flows over equal-cost paths by their hash (else all flows "
                          "hash alike and share one path per destination)",
                          BooleanValue(true),
                          MakeBooleanAccessor(&PacketNetwork::m_ecmp),
                          MakeBooleanChecker())
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
    m_nicFactory.SetTypeId("ns3::RdmaNic");
    m_mmuFactory.SetTypeId("ns3::SwitchMmu");
    m_markerFactory.SetTypeId("ns3::RedEcnMarker");
    m_ffFactory.SetTypeId("ns3::PacketFastForward");
    m_memoFactory.SetTypeId("ns3::PacketEpisodeCache");
    m_socketFactory.SetTypeId("ns3::SocketTransport");
    for (const TypeId& tid : CongestionControlTypes())
    {
        m_ccFactories[tid.GetName()].SetTypeId(tid);
    }
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
    struct Target
    {
        const char* type;
        ObjectFactory* factory;
    };
    std::vector<Target> targets{{"ns3::PacketNetwork", nullptr},
                                {"ns3::RdmaNic", &m_nicFactory},
                                {"ns3::SwitchMmu", &m_mmuFactory},
                                {"ns3::RedEcnMarker", &m_markerFactory},
                                {"ns3::PacketFastForward", &m_ffFactory},
                                {"ns3::PacketEpisodeCache", &m_memoFactory},
                                {"ns3::SocketTransport", &m_socketFactory}};
    for (auto& [type, factory] : m_ccFactories)
    {
        targets.push_back({type.c_str(), &factory});
    }
    bool any = false;
    for (const Target& t : targets)
    {
        if (!cls.empty() && cls != t.type)
        {
            continue;
        }
        TypeId tid = TypeId::LookupByName(t.type);
        TypeId::AttributeInformation info;
        if (!tid.LookupAttributeByName(attr, &info))
        {
            continue;
        }
        Ptr<AttributeValue> v = info.checker->CreateValidValue(StringValue(value));
        if (!v)
        {
            return false;
        }
        if (t.factory == nullptr)
        {
            SetAttribute(attr, *v);
        }
        else
        {
            t.factory->Set(attr, *v);
        }
        any = true;
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

bool
PacketNetwork::Build(Ptr<TopologyDescription> desc)
{
    NS_LOG_FUNCTION(this);
    if (m_ccFactories.find(m_ccType.GetName()) == m_ccFactories.end() ||
        (m_hostFlows != "packet" && m_hostFlows != "fluid") ||
        (m_acceleration != "exact" && m_acceleration != "fast" && m_acceleration != "memo" &&
         m_acceleration != "fast+memo"))
    {
        return false;
    }
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
        m_ff = m_ffFactory.Create<PacketFastForward>();
        m_ff->Attach(this,
                     (cc == "ns3::Dcqcn" || cc == "ns3::NoCongestionControl") &&
                         !desc->HasSocketHosts());
    }
    // The chosen algorithm states what its frames carry (INT records) and what the switches
    // must do for it (stamp INT).
    Ptr<RdmaCongestionControl> ccProbe =
        m_ccFactories[m_ccType.GetName()].Create<RdmaCongestionControl>();
    bool stampInt = ccProbe->UsesInt();
    m_desc = desc;
    m_socket = nullptr;
    if (desc->HasSocketHosts())
    {
        m_socket = m_socketFactory.Create<SocketTransport>();
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
            m_mmuFactory.Set("LossyPriorities", UintegerValue(1U << m_socket->GetPriority()));
        }
    }
    m_hostFluid = nullptr;
    if (m_hostFlows == "fluid")
    {
        m_hostFluid = CreateObject<FluidNetwork>();
        m_hostFluid->SetAttribute("Mtu", UintegerValue(m_mtu));
        m_hostFluid->SetAttribute("Seed", UintegerValue(m_seed));
        m_hostFluid->SetAttribute("Ecmp", BooleanValue(m_ecmp));
        m_hostFluid->SetTopology(desc);
        m_hostFluid->SetFlowDoneCallback(MakeCallback(&PacketNetwork::HostFlowDone, this));
    }
    m_pool = Create<RdmaFramePool>();
    uint32_t phy = m_phyOverhead ? 20 : 0;
    m_sizes.dataHeader = 62 + phy;
    m_sizes.ack = 66 + phy;
    m_sizes.cnp = 78 + phy;
    m_sizes.intBytes = ccProbe->GetIntHeaderBytes();
    m_maxFrame = m_mtu + m_sizes.dataHeader + m_sizes.intBytes;

    uint32_t nNodes = desc->GetNNodes();
    uint32_t nLinks = desc->GetNLinks();
    m_nodes.clear();
    for (uint32_t n = 0; n < nNodes; ++n)
    {
        m_nodes.push_back(CreateObject<Node>());
    }
    m_nodePorts.assign(nNodes, {});
    m_portDev.clear();
    for (uint32_t l = 0; l < nLinks; ++l)
    {
        auto rate = static_cast<uint64_t>(std::llround(desc->GetLinkRateBps(l)));
        Ptr<QbbChannel> channel = CreateObject<QbbChannel>();
        channel->SetAttribute("Delay", TimeValue(NanoSeconds(desc->GetLinkDelayNs(l))));
        uint32_t ends[2] = {desc->GetLinkA(l), desc->GetLinkB(l)};
        for (uint32_t end : ends)
        {
            Ptr<QbbNetDevice> dev = CreateObject<QbbNetDevice>();
            dev->SetAttribute("DataRate", DataRateValue(DataRate(rate)));
            dev->SetAttribute("PfcFrameBytes", UintegerValue(64 + phy));
            dev->SetAddress(Mac48Address::Allocate());
            m_nodes[end]->AddDevice(dev);
            dev->Attach(channel);
            m_nodePorts[end].push_back(static_cast<uint32_t>(m_portDev.size()));
            m_portDev.push_back(dev);
        }
    }
    m_nics.assign(nNodes, nullptr);
    m_switches.assign(nNodes, nullptr);
    for (uint32_t n = 0; n < nNodes; ++n)
    {
        std::vector<Ptr<QbbNetDevice>> ports;
        std::vector<uint32_t> links;
        for (uint32_t gp : m_nodePorts[n])
        {
            ports.push_back(m_portDev[gp]);
            links.push_back(gp / 2);
        }
        uint8_t kind = desc->GetNodeKind(n);
        if (kind == TopologyDescription::GPU || kind == TopologyDescription::NIC)
        {
            Ptr<RdmaNic> nic = m_nicFactory.Create<RdmaNic>();
            // GPU endpoints only carry intra-host copies: payload-only frames, empty ACKs.
            RdmaFrameSizes hostSizes{0, 0, 0, 0};
            nic->Setup(n,
                       ports,
                       PeekPointer(m_pool),
                       &m_qps,
                       kind == TopologyDescription::GPU ? hostSizes : m_sizes,
                       m_mtu);
            nic->SetLossless(m_pfc || kind == TopologyDescription::GPU); // host links: lossless
            nic->SetDeliveredCallback(MakeCallback(&PacketNetwork::Delivered, this));
            m_nodes[n]->AggregateObject(nic);
            m_nics[n] = nic;
        }
        else
        {
            bool fabric = kind == TopologyDescription::LEAF || kind == TopologyDescription::SPINE;
            Ptr<RdmaSwitch> sw = CreateObject<RdmaSwitch>();
            Ptr<SwitchMmu> mmu = m_mmuFactory.Create<SwitchMmu>();
            Ptr<RedEcnMarker> marker =
                fabric && m_ecn ? m_markerFactory.Create<RedEcnMarker>() : nullptr;
            sw->Setup(n,
                      desc,
                      ports,
                      links,
                      PeekPointer(m_pool),
                      mmu,
                      marker,
                      fabric ? m_buffer : m_hostBuffer,
                      fabric ? m_pfc : true,
                      fabric && stampInt,
                      m_maxFrame);
            m_nodes[n]->AggregateObject(sw);
            m_switches[n] = sw;
        }
    }
    if (m_socket)
    {
        m_socket->Setup(desc,
                        m_nodes,
                        m_nodePorts,
                        m_portDev,
                        PeekPointer(m_pool),
                        m_seed,
                        m_ecmp,
                        phy,
                        MakeCallback(&PacketNetwork::Finish, this));
        for (const auto& nic : m_nics)
        {
            if (nic)
            {
                nic->SetIpReceiveCallback(MakeCallback(&SocketTransport::ReceiveFrame, m_socket));
            }
        }
    }
    if ((m_acceleration == "memo" || m_acceleration == "fast+memo") && !desc->HasSocketHosts())
    {
        // TCP connections of socket hosts share the fabric unseen by the cache: none then
        m_memo = m_memoFactory.Create<PacketEpisodeCache>();
        m_memo->Attach(this);
    }
    m_samplePorts.clear();
    for (uint32_t gp = 0; gp < m_portDev.size(); ++gp)
    {
        uint32_t link = gp / 2;
        uint32_t node = gp % 2 == 0 ? desc->GetLinkA(link) : desc->GetLinkB(link);
        uint8_t kind = desc->GetNodeKind(node);
        uint8_t lkind = desc->GetLinkKind(link);
        bool fabricPort =
            lkind == TopologyDescription::ACCESS || lkind == TopologyDescription::FABRIC;
        if (m_sampleAllPorts || (fabricPort && kind != TopologyDescription::GPU))
        {
            m_samplePorts.push_back(gp);
        }
    }
    return true;
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
        if (connection >= 0)
        {
            m_hostFluid->StartFlowOnConnection(
                flowId, srcGpu, dstGpu, bytes, priority, static_cast<uint32_t>(connection));
        }
        else
        {
            m_hostFluid->StartFlow(flowId, srcGpu, dstGpu, bytes, priority);
        }
        return;
    }
    if (connection >= 0)
    {
        auto it = m_connSlot.find(static_cast<uint32_t>(connection));
        if (m_memo && it != m_connSlot.end())
        {
            m_memo->MessageAppended(it->second); // a replay continues packet by packet
        }
        if (it != m_connSlot.end() && !m_qps[it->second]->IsFinished())
        {
            // Append to the open queue pair; the sender may send it after the host latency.
            RdmaQueuePair* qp = m_qps[it->second].get();
            NS_ASSERT_MSG(qp->priority == priority, "messages of one connection share a priority");
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
                m_ff->Changed();
            }
            Simulator::Schedule(NanoSeconds(qp->srcDelayNs),
                                &RdmaNic::Post,
                                m_nics[qp->srcNode],
                                qp->slot,
                                qp->size);
            return;
        }
    }
    uint32_t hashKey = connection >= 0 ? static_cast<uint32_t>(connection) : flowId;
    uint32_t hash = m_ecmp ? TopologyDescription::FlowHash(m_seed, hashKey, srcGpu, dstGpu, 0) : 0;
    uint32_t ackHash =
        m_ecmp ? TopologyDescription::FlowHash(m_seed, hashKey, srcGpu, dstGpu, 1) : 0;
    uint32_t srcEp = sameHost ? srcNode : m_desc->GetGpuNicNode(srcGpu);
    uint32_t dstEp = sameHost ? dstNode : m_desc->GetGpuNicNode(dstGpu);
    std::vector<uint32_t> path = m_desc->GetPath(srcGpu, dstGpu, hash);
    NS_ASSERT_MSG(!path.empty(), "no route from GPU " << srcGpu << " to GPU " << dstGpu);

    // Split the path into host segments (modelled as latency + rate cap) and the transport part.
    std::size_t first = 0;
    std::size_t last = path.size();
    if (!sameHost)
    {
        first = path.size();
        for (std::size_t i = 0; i < path.size(); ++i)
        {
            uint8_t k = m_desc->GetLinkKind(path[i]);
            if (k == TopologyDescription::ACCESS || k == TopologyDescription::FABRIC)
            {
                first = std::min(first, i);
                last = i + 1;
            }
        }
        NS_ASSERT_MSG(first < last, "path between hosts without fabric links");
    }
    int64_t srcDelay = 0;
    int64_t dstDelay = 0;
    double cap = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < path.size(); ++i)
    {
        if (i >= first && i < last)
        {
            continue;
        }
        double rate = m_desc->GetLinkRateBps(path[i]);
        int64_t hop = m_desc->GetLinkDelayNs(path[i]) + TxNs(m_maxFrame, rate);
        (i < first ? srcDelay : dstDelay) += hop;
        cap = std::min(cap, rate);
    }
    if (!sameHost && m_socket && m_desc->UsesSocket(srcGpu, dstGpu))
    {
        m_socket->Send(flowId, srcGpu, dstGpu, srcEp, dstEp, bytes, connection, srcDelay, dstDelay);
        ArmSampling();
        return;
    }
    int64_t rttNs = 0;
    for (std::size_t i = first; i < last; ++i)
    {
        double rate = m_desc->GetLinkRateBps(path[i]);
        rttNs += 2 * m_desc->GetLinkDelayNs(path[i]) + TxNs(m_maxFrame, rate) +
                 TxNs(m_sizes.ack + m_sizes.intBytes, rate);
    }

    auto qp = std::make_unique<RdmaQueuePair>();
    uint32_t slot = static_cast<uint32_t>(m_qps.size());
    qp->flowId = flowId;
    qp->slot = slot;
    qp->srcNode = srcEp;
    qp->dstNode = dstEp;
    qp->hash = hash;
    qp->ackHash = ackHash;
    qp->priority = priority;
    qp->size = bytes;
    qp->posted = bytes;
    qp->sendEnds.push_back(bytes);
    qp->recvEnds.emplace_back(bytes, flowId);
    qp->srcDelayNs = srcDelay;
    qp->srcPort = PortOf(srcEp, path[first]);
    const auto& back = m_desc->GetNextHops(dstEp, srcEp);
    NS_ASSERT_MSG(!back.empty(), "no route back from node " << dstEp << " to " << srcEp);
    qp->dstPort = PortOf(dstEp, back[TopologyDescription::EcmpIndex(ackHash, 0, back.size())]);
    qp->portRate = static_cast<double>(m_portDev[m_nodePorts[srcEp][qp->srcPort]]->GetRateBps());
    qp->lineRate = std::min(qp->portRate, cap);
    qp->deliverDelayNs = dstDelay;
    if (sameHost)
    {
        qp->cc = CreateObject<NoCongestionControl>();
    }
    else
    {
        qp->cc = m_ccFactories[m_ccType.GetName()].Create<RdmaCongestionControl>();
    }
    qp->cc->Start(qp->lineRate, NanoSeconds(rttNs), m_mtu);
    m_slotOf[flowId] = slot;
    if (connection >= 0)
    {
        m_connSlot[static_cast<uint32_t>(connection)] = slot;
        m_msgSpan[flowId] = {0, bytes};
    }
    m_qps.push_back(std::move(qp));
    if (m_sampleInterval.IsStrictlyPositive())
    {
        m_liveSlots.push_back(slot);
    }
    EventId start =
        Simulator::Schedule(NanoSeconds(srcDelay), &RdmaNic::StartQueuePair, m_nics[srcEp], slot);
    if (m_memo)
    {
        m_memo->QueuePairCreated(slot, start); // hands it to the fast-forward unless replayed
    }
    else if (m_ff)
    {
        m_ff->QueuePairAdded(slot);
    }
    ArmSampling();
}

void
PacketNetwork::ArmSampling()
{
    if (m_sampleInterval.IsStrictlyPositive() && !m_sampleEvent.IsPending())
    {
        int64_t period = m_sampleInterval.GetNanoSeconds();
        int64_t now = Simulator::Now().GetNanoSeconds();
        int64_t next = (now / period + 1) * period;
        m_sampleEvent = Simulator::Schedule(NanoSeconds(next - now), &PacketNetwork::Sample, this);
    }
}

void
PacketNetwork::Delivered(uint32_t slot, uint32_t flowId)
{
    const RdmaQueuePair* qp = m_qps[slot].get();
    Simulator::Schedule(NanoSeconds(qp->deliverDelayNs), &PacketNetwork::Finish, this, flowId);
    if (m_ff)
    {
        m_ff->Changed();
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

void
PacketNetwork::Sample()
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    for (uint32_t gp : m_samplePorts)
    {
        m_qTime.push_back(now);
        m_qPort.push_back(gp);
        m_qBytes.push_back(m_portDev[gp]->GetTotalQueueBytes());
        m_qTx.push_back(m_portDev[gp]->GetTxBytes());
    }
    // Only queue pairs not yet finished are visited (in slot order, as they were created);
    // finished ones leave the list, so a sample costs the live queue pairs, not every flow so far.
    std::size_t keep = 0;
    for (uint32_t slot : m_liveSlots)
    {
        const RdmaQueuePair* qp = m_qps[slot].get();
        if (qp->active)
        {
            m_rTime.push_back(now);
            m_rFlow.push_back(qp->flowId);
            m_rRate.push_back(qp->cc->GetRate());
            m_rAcked.push_back(qp->sndUna + qp->ffBytes);
        }
        if (!qp->IsFinished())
        {
            m_liveSlots[keep++] = slot;
        }
    }
    m_liveSlots.resize(keep);
    if (m_socket)
    {
        m_socket->AppendProgress(now, m_rTime, m_rFlow, m_rRate, m_rAcked);
    }
    if (m_pending > 0)
    {
        m_sampleEvent = Simulator::Schedule(m_sampleInterval, &PacketNetwork::Sample, this);
    }
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

void
PacketNetwork::CopyPortStats(int32_t* node,
                             int32_t* link,
                             uint8_t* direction,
                             uint64_t* bytesSent,
                             uint64_t* maxQueue,
                             double* meanQueue,
                             uint64_t* pauseSent,
                             uint64_t* pauseReceived,
                             int64_t* pausedNs,
                             uint64_t* ecnMarks,
                             uint64_t* drops,
                             uint64_t* framesSent) const
{
    std::vector<uint64_t> fluidBytes;
    if (m_hostFluid)
    {
        fluidBytes.assign(m_portDev.size(), 0);
        std::vector<int64_t> busy(m_portDev.size(), 0);
        m_hostFluid->CopyLinkStats(fluidBytes.data(), busy.data());
    }
    for (uint32_t gp = 0; gp < m_portDev.size(); ++gp)
    {
        const QbbNetDevice* dev = PeekPointer(m_portDev[gp]);
        uint32_t l = gp / 2;
        direction[gp] = static_cast<uint8_t>(gp % 2);
        link[gp] = static_cast<int32_t>(l);
        node[gp] = static_cast<int32_t>(gp % 2 == 0 ? m_desc->GetLinkA(l) : m_desc->GetLinkB(l));
        bytesSent[gp] = dev->GetTxBytes() + (fluidBytes.empty() ? 0 : fluidBytes[gp]);
        maxQueue[gp] = dev->GetMaxQueueBytes();
        meanQueue[gp] = dev->GetMeanQueueBytes();
        pauseSent[gp] = dev->GetPauseSent();
        pauseReceived[gp] = dev->GetPauseReceived();
        pausedNs[gp] = dev->GetPausedNs();
        ecnMarks[gp] = dev->GetEcnMarks();
        drops[gp] = dev->GetDrops();
        framesSent[gp] = dev->GetTxFrames();
    }
}

void
PacketNetwork::CopyFlowStats(uint32_t n,
                             const uint32_t* ids,
                             uint64_t* retransmits,
                             uint64_t* cnps,
                             uint64_t* rateChanges,
                             uint64_t* timeouts,
                             uint64_t* bytesAcked,
                             uint64_t* bytesDelivered) const
{
    for (uint32_t i = 0; i < n; ++i)
    {
        auto it = m_slotOf.find(ids[i]);
        if (it == m_slotOf.end())
        {
            retransmits[i] = cnps[i] = rateChanges[i] = timeouts[i] = bytesAcked[i] =
                bytesDelivered[i] = 0;
            if (m_socket && m_socket->HasFlow(ids[i]))
            {
                m_socket->GetFlowStats(ids[i], &retransmits[i], &timeouts[i], &bytesDelivered[i]);
                bytesAcked[i] = bytesDelivered[i];
            }
            continue;
        }
        const RdmaQueuePair* qp = m_qps[it->second].get();
        // A queue pair's counters are reported on its first flow only, so that sums over
        // flows count each event once; bytes are the flow's own message's.
        bool first = qp->flowId == ids[i];
        retransmits[i] = first ? qp->retransmits : 0;
        cnps[i] = first ? qp->cnps : 0;
        rateChanges[i] = first ? qp->cc->GetRateChanges() : 0;
        timeouts[i] = first ? qp->timeouts : 0;
        auto span = m_msgSpan.find(ids[i]);
        if (span == m_msgSpan.end())
        {
            bytesAcked[i] = qp->sndUna + qp->ffBytes;
            bytesDelivered[i] = qp->rcvNxt + qp->ffBytes;
        }
        else
        {
            auto [start, len] = span->second;
            auto part = [start = start, len = len](uint64_t at) {
                return at <= start ? 0 : std::min<uint64_t>(len, at - start);
            };
            auto ff = m_msgFf.find(ids[i]);
            uint64_t skipped = ff == m_msgFf.end() ? 0 : ff->second;
            bytesAcked[i] = part(qp->sndUna) + (part(qp->sndUna) > 0 ? skipped : 0);
            bytesDelivered[i] = part(qp->rcvNxt) + (part(qp->rcvNxt) > 0 ? skipped : 0);
        }
    }
}

void
PacketNetwork::CopyFastForwardStats(uint64_t* out) const
{
    if (m_ff)
    {
        m_ff->CopyStats(out);
    }
    else
    {
        std::fill(out, out + PacketFastForward::N_STATS, 0);
    }
}

void
PacketNetwork::CopyMemoStats(uint64_t* out) const
{
    if (m_memo)
    {
        m_memo->CopyStats(out);
    }
    else
    {
        std::fill(out, out + PacketEpisodeCache::N_STATS, 0);
    }
}

void
PacketNetwork::CopyCounters(uint64_t* out) const
{
    uint64_t drops = 0;
    uint64_t pauses = 0;
    uint64_t marks = 0;
    uint64_t frames = 0;
    for (const auto& dev : m_portDev)
    {
        drops += dev->GetDrops();
        pauses += dev->GetPauseSent();
        marks += dev->GetEcnMarks();
        frames += dev->GetTxFrames();
    }
    uint64_t retx = 0;
    uint64_t cnps = 0;
    uint64_t timeouts = 0;
    for (const auto& qp : m_qps)
    {
        retx += qp->retransmits;
        cnps += qp->cnps;
        timeouts += qp->timeouts;
    }
    if (m_socket)
    {
        drops += m_socket->GetHostDrops();
        retx += m_socket->GetRetransmits();
        timeouts += m_socket->GetTimeouts();
    }
    out[0] = m_flows;
    out[1] = m_bytes;
    out[2] = drops;
    out[3] = retx;
    out[4] = pauses;
    out[5] = marks;
    out[6] = cnps;
    out[7] = frames;
    out[8] = timeouts;
}

uint64_t
PacketNetwork::GetNQueueSamples() const
{
    return m_qTime.size();
}

void
PacketNetwork::CopyQueueSeries(int64_t* timeNs,
                               uint32_t* port,
                               uint64_t* bytes,
                               uint64_t* txBytes) const
{
    std::copy(m_qTime.begin(), m_qTime.end(), timeNs);
    std::copy(m_qPort.begin(), m_qPort.end(), port);
    std::copy(m_qBytes.begin(), m_qBytes.end(), bytes);
    std::copy(m_qTx.begin(), m_qTx.end(), txBytes);
}

uint64_t
PacketNetwork::GetNRateSamples() const
{
    return m_rTime.size();
}

void
PacketNetwork::CopyRateSeries(int64_t* timeNs,
                              uint32_t* flow,
                              double* rateBps,
                              uint64_t* bytesAcked) const
{
    std::copy(m_rTime.begin(), m_rTime.end(), timeNs);
    std::copy(m_rFlow.begin(), m_rFlow.end(), flow);
    std::copy(m_rRate.begin(), m_rRate.end(), rateBps);
    std::copy(m_rAcked.begin(), m_rAcked.end(), bytesAcked);
}

uint32_t
PacketNetwork::GetNQueuePairs() const
{
    return static_cast<uint32_t>(m_qps.size());
}

void
PacketNetwork::CopyQueuePairIds(uint32_t* out) const
{
    for (std::size_t i = 0; i < m_qps.size(); ++i)
    {
        out[i] = m_qps[i]->flowId;
    }
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

Ptr<QbbNetDevice>
PacketNetwork::GetPortDevice(uint32_t port) const
{
    return port < m_portDev.size() ? m_portDev[port] : nullptr;
}

Ptr<RdmaCongestionControl>
PacketNetwork::GetFlowCc(uint32_t flowId) const
{
    auto it = m_slotOf.find(flowId);
    return it == m_slotOf.end() ? nullptr : m_qps[it->second]->cc;
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
    m_sampleEvent.Cancel();
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
    m_liveSlots.clear();
    m_desc = nullptr;
    if (m_hostFluid)
    {
        m_hostFluid->Dispose();
        m_hostFluid = nullptr;
    }
    FlowNetwork::DoDispose();
}

} // namespace ns3
