/*
 * HeteroSim: fluid (flow-level) network with max-min fair bandwidth sharing.
 */
#include "fluid-network.h"

#include "ns3/abort.h"
#include "ns3/assert.h"
#include "ns3/boolean.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("FluidNetwork");

namespace
{
/** Fixed-point scale of the link loads: 2^44 units per byte/ns (rates up to ~5e5 byte/ns). */
constexpr double kFxScale = 17592186044416.0;
/** Relative tolerance of "saturated" and of "a fixed flow is faster". */
constexpr double kRelTol = 1e-9;

int64_t
ToFx(double bytesPerNs)
{
    return std::llround(bytesPerNs * kFxScale);
}

/** Min-heap order of the water-filling: smallest share first, then lowest resource index. */
bool
FillAfter(const auto& a, const auto& b)
{
    return a.share > b.share || (a.share == b.share && a.res > b.res);
}

/** Bytes a resource used with \p share carries of \p bytes (rounded; exact for share 1). */
uint64_t
ShareOf(uint64_t bytes, const double* shares, uint32_t hop)
{
    return shares == nullptr
               ? bytes
               : static_cast<uint64_t>(std::llround(static_cast<double>(bytes) * shares[hop]));
}
} // namespace
NS_OBJECT_ENSURE_REGISTERED(FluidNetwork);

TypeId
FluidNetwork::GetTypeId()
{
    // one entry per attribute and trace source: a table, long because the fluid model has many
    static TypeId tid =
        TypeId("ns3::FluidNetwork")
            .SetParent<FlowNetwork>()
            .SetGroupName("Heterosim")
            .AddConstructor<FluidNetwork>()
            .AddAttribute("Mtu",
                          "Packet payload size in bytes used for the store-and-forward latency "
                          "term (one packet serialized per hop); 0 disables the term",
                          UintegerValue(4096),
                          MakeUintegerAccessor(&FluidNetwork::m_mtu),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("HeaderBytes",
                          "Header bytes carried per Mtu of payload on network links (NIC access "
                          "and switch fabric links; NVLink and PCIe links carry payload only): "
                          "their capacities available to payload are scaled by "
                          "Mtu / (Mtu + HeaderBytes). 0 = payload only",
                          UintegerValue(0),
                          MakeUintegerAccessor(&FluidNetwork::m_headerBytes),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("SocketMss",
                          "TCP payload per segment of socket-transport flows, bytes (1500-byte "
                          "IP MTU - 52 bytes of IPv4, TCP and timestamp headers)",
                          UintegerValue(1448),
                          MakeUintegerAccessor(&FluidNetwork::m_socketMss),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("SocketFrameOverhead",
                          "Wire bytes per TCP segment beyond its payload: IPv4 20 + TCP 20 + "
                          "timestamps 12 + Ethernet header and FCS 18 + preamble and gap 20",
                          UintegerValue(90),
                          MakeUintegerAccessor(&FluidNetwork::m_socketOverhead),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("SocketInitialCwnd",
                          "TCP initial window of socket-transport connections, segments",
                          UintegerValue(10),
                          MakeUintegerAccessor(&FluidNetwork::m_socketInitialCwnd),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("Seed",
                          "Seed mixed into every flow's ECMP hash (TopologyDescription::FlowHash)",
                          UintegerValue(1),
                          MakeUintegerAccessor(&FluidNetwork::m_seed),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("Ecmp",
                          "Spread flows over equal-cost paths by their hash (the packet network's "
                          "rule, so both models route a flow alike); false = always the first path",
                          BooleanValue(true),
                          MakeBooleanAccessor(&FluidNetwork::m_ecmp),
                          MakeBooleanChecker())
            .AddAttribute("Spray",
                          "Split every flow between hosts over all equal-cost fabric paths, as "
                          "leaf and spine switches spraying per packet do over many packets "
                          "(class documentation); false = one ECMP path per flow",
                          BooleanValue(false),
                          MakeBooleanAccessor(&FluidNetwork::m_spray),
                          MakeBooleanChecker())
            .AddAttribute("LocalRecompute",
                          "Re-fill only the flows a start or finish can affect (exact; see the "
                          "class documentation); false re-fills the whole connected component",
                          BooleanValue(true),
                          MakeBooleanAccessor(&FluidNetwork::m_localRecompute),
                          MakeBooleanChecker())
            .AddAttribute("MaxLocalRounds",
                          "Times a local recomputation may grow its set and fill again before it "
                          "fills the whole connected component instead",
                          UintegerValue(16),
                          MakeUintegerAccessor(&FluidNetwork::m_maxRounds),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("SampleInterval",
                          "Period of the per-link-direction series of carried bytes "
                          "(CopyLinkSeries); 0 records none",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&FluidNetwork::m_sampleInterval),
                          MakeTimeChecker())
            .AddTraceSource("FlowStart",
                            "A flow started: id, source GPU, destination GPU, bytes",
                            MakeTraceSourceAccessor(&FluidNetwork::m_startTrace),
                            "ns3::FluidNetwork::FlowStartCallback")
            .AddTraceSource("TransferDone",
                            "The last byte of a flow left its source (delivery follows after "
                            "the path latency): id",
                            MakeTraceSourceAccessor(&FluidNetwork::m_transferDoneTrace),
                            "ns3::FluidNetwork::FlowIdCallback")
            .AddTraceSource("RateChange",
                            "A flow's max-min rate changed: id, new rate in bit/s",
                            MakeTraceSourceAccessor(&FluidNetwork::m_rateTrace),
                            "ns3::FluidNetwork::RateCallback");
    return tid;
}

FluidNetwork::FluidNetwork()
    : m_mtu(4096)
    , m_headerBytes(0)
    , m_seed(1)
{
    NS_LOG_FUNCTION(this);
}

FluidNetwork::~FluidNetwork()
{
    NS_LOG_FUNCTION(this);
}

void
FluidNetwork::SetTopology(Ptr<TopologyDescription> topo)
{
    NS_LOG_FUNCTION(this << topo);
    NS_ASSERT_MSG(m_started == 0, "SetTopology() after flows started");
    m_topo = topo;
    uint32_t nLinks = topo->GetNLinks();
    m_res.assign(2 * nLinks, Resource());
    m_capLeft.assign(2 * nLinks, 0.0);
    m_cntLeft.assign(2 * nLinks, 0);
    m_wLeft.assign(2 * nLinks, 0.0);
    m_cntSet.assign(2 * nLinks, 0);
    m_setFx.assign(2 * nLinks, 0);
    m_share.assign(2 * nLinks, 0.0);
    m_maxOld.assign(2 * nLinks, 0.0);
    m_maxNew.assign(2 * nLinks, 0.0);
    m_newSetFx.assign(2 * nLinks, 0);
    m_version.assign(2 * nLinks, 0);
}

uint32_t
FluidNetwork::GetNGpus() const
{
    return m_topo ? m_topo->GetNGpus() : 0;
}

uint32_t
FluidNetwork::FlowHash(uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu) const
{
    return m_ecmp ? TopologyDescription::FlowHash(m_seed, flowId, srcGpu, dstGpu, 0) : 0;
}

void
FluidNetwork::StartFlow(
    uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint64_t bytes, uint8_t priority)
{
    NS_LOG_FUNCTION(this << flowId << srcGpu << dstGpu << bytes << +priority);
    if (WaitsForRoute(flowId, srcGpu, dstGpu, bytes, priority, -1))
    {
        return;
    }
    int64_t slot = Open(flowId, srcGpu, dstGpu, bytes, flowId);
    if (slot >= 0 && m_topo->UsesSocket(srcGpu, dstGpu))
    {
        // As in the packet model, flows between two GPUs without a connection id share one
        // NCCL connection (its TCP connections open once).
        MakeSocketFlow(m_flows[slot], (static_cast<uint64_t>(srcGpu) << 32) | dstGpu);
    }
}

void
FluidNetwork::StartFlowOnConnection(uint32_t flowId,
                                    uint32_t srcGpu,
                                    uint32_t dstGpu,
                                    uint64_t bytes,
                                    uint8_t priority,
                                    uint32_t connection)
{
    NS_LOG_FUNCTION(this << flowId << srcGpu << dstGpu << bytes << +priority << connection);
    auto it = m_connections.find(connection);
    if (it != m_connections.end())
    {
        NS_ASSERT_MSG(bytes > 0, "a flow moves at least one byte");
        ++m_started;
        ++m_messagesQueued;
        m_startTrace(flowId, srcGpu, dstGpu, bytes);
        it->second.queued.emplace_back(flowId, bytes);
        return;
    }
    if (WaitsForRoute(flowId, srcGpu, dstGpu, bytes, priority, connection))
    {
        return;
    }
    int64_t slot = Open(flowId, srcGpu, dstGpu, bytes, connection);
    if (slot >= 0)
    {
        Flow& f = m_flows[slot];
        f.onConnection = true;
        f.connection = connection;
        m_connections[connection].slot = static_cast<uint32_t>(slot);
        if (m_topo->UsesSocket(srcGpu, dstGpu))
        {
            MakeSocketFlow(f, (1ULL << 63) | connection);
        }
    }
}

double
FluidNetwork::SocketScale() const
{
    double payloadShare = m_mtu > 0 ? static_cast<double>(m_mtu) / (m_mtu + m_headerBytes) : 1.0;
    return static_cast<double>(m_socketMss + m_socketOverhead) / m_socketMss * payloadShare;
}

void
FluidNetwork::MakeSocketFlow(Flow& f, uint64_t connectionKey)
{
    f.scale = SocketScale();
    f.remaining = static_cast<double>(f.bytes) * f.scale;
    if (!m_socketConnections.insert(connectionKey).second)
    {
        return;
    }
    // First message of the NCCL connection: the TCP handshake (one round trip before data)
    // and the time slow start loses against the bottleneck rate while the window grows from
    // SocketInitialCwnd segments to the bandwidth-delay product (doubling every round trip).
    double frame = static_cast<double>(m_socketMss + m_socketOverhead);
    double ack = static_cast<double>(m_socketOverhead);
    double rttNs = 0;
    double bottleneck = std::numeric_limits<double>::infinity();
    for (uint32_t r : f.route < 0 ? f.res : m_sprayRoutes[f.route].path)
    {
        uint32_t link = r / 2;
        double rate = m_topo->GetLinkRateBps(link);
        rttNs +=
            2.0 * static_cast<double>(m_topo->GetLinkDelayNs(link)) + (frame + ack) * 8e9 / rate;
        bottleneck = std::min(bottleneck, rate);
    }
    double window = static_cast<double>(m_socketInitialCwnd) * m_socketMss;
    double bdp = bottleneck * rttNs * 1e-9 / 8.0;
    double lost = 0;
    if (bdp > window)
    {
        double rounds = std::ceil(std::log2(bdp / window));
        double sent = window * (std::pow(2.0, rounds) - 1.0);
        lost = std::max(0.0, rounds * rttNs - sent * f.scale * 8e9 / bottleneck);
    }
    f.latencyNs += std::llround(rttNs + lost);
}

int64_t
FluidNetwork::PathLatencyNs(const Flow& f, uint64_t bytes) const
{
    double packet = static_cast<double>(std::min<uint64_t>(m_mtu, bytes));
    double serialization = 0;
    double slowest = 0;
    int64_t propagation = 0;
    for (uint32_t r : f.route < 0 ? f.res : m_sprayRoutes[f.route].path)
    {
        uint32_t link = r / 2;
        double rate = m_topo->GetLinkRateBps(link);
        propagation += m_topo->GetLinkDelayNs(link);
        double perPacketNs = packet * 8e9 / rate;
        serialization += perPacketNs;
        slowest = std::max(slowest, perPacketNs);
    }
    return propagation + std::llround(serialization - slowest);
}

bool
FluidNetwork::WaitsForRoute(uint32_t flowId,
                            uint32_t srcGpu,
                            uint32_t dstGpu,
                            uint64_t bytes,
                            uint8_t priority,
                            int64_t connection)
{
    uint32_t nGpus = m_topo ? m_topo->GetNGpus() : 0;
    if (std::find(m_linkUp.begin(), m_linkUp.end(), 0) == m_linkUp.end() || srcGpu >= nGpus ||
        dstGpu >= nGpus || srcGpu == dstGpu ||
        !m_topo
             ->GetPath(srcGpu,
                       dstGpu,
                       FlowHash(connection >= 0 ? connection : flowId, srcGpu, dstGpu),
                       GetFlowPlane(flowId))
             .empty())
    {
        return false;
    }
    // a link fault cuts one end off: the flow starts when Reroute() finds a route again
    NS_LOG_DEBUG("flow " << flowId << " waits for a route");
    m_unrouted.push_back({flowId, srcGpu, dstGpu, bytes, priority, connection});
    return true;
}

int64_t
FluidNetwork::Open(
    uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint64_t bytes, uint32_t hashKey)
{
    NS_ASSERT_MSG(m_topo, "FluidNetwork: SetTopology() first");
    NS_ASSERT_MSG(bytes > 0, "a flow moves at least one byte");
    ++m_started;
    m_startTrace(flowId, srcGpu, dstGpu, bytes);
    uint32_t nGpus = m_topo->GetNGpus();
    std::vector<uint32_t> path;
    if (srcGpu < nGpus && dstGpu < nGpus && srcGpu != dstGpu)
    {
        path = m_topo->GetPath(
            srcGpu, dstGpu, FlowHash(hashKey, srcGpu, dstGpu), GetFlowPlane(flowId));
    }
    if (path.empty())
    {
        ++m_unroutable;
        if (m_unroutableMsg.empty())
        {
            std::ostringstream msg;
            msg << "flow " << flowId << " from GPU " << srcGpu << " to GPU " << dstGpu
                << (srcGpu == dstGpu ? " has no hops (same GPU)" : " has no route");
            m_unroutableMsg = msg.str();
        }
        NS_LOG_WARN("unroutable flow " << flowId);
        return -1;
    }

    uint32_t slot;
    if (!m_freeSlots.empty())
    {
        slot = m_freeSlots.back();
        m_freeSlots.pop_back();
    }
    else
    {
        slot = m_flows.size();
        m_flows.emplace_back();
    }
    Flow& f = m_flows[slot];
    f.id = flowId;
    f.bytes = bytes;
    f.remaining = static_cast<double>(bytes);
    f.scale = 1.0;
    f.rate = 0;
    f.newRate = 0;
    f.rateFx = 0;
    f.bottleneck = kNoResource;
    f.heapPos = -1;
    f.lastUpdate = Simulator::Now().GetNanoSeconds();
    f.inUse = true;
    f.frozen = false;
    f.onConnection = false;
    f.src = srcGpu;
    f.dst = dstGpu;
    f.hashKey = hashKey;
    f.pathStartDone = 0;
    f.route = m_spray ? SprayRouteOf(flowId, srcGpu, dstGpu, hashKey) : -1;
    if (f.route < 0)
    {
        AttachPath(slot, path, srcGpu);
    }
    else
    {
        f.res.clear();
        JoinResources(slot);
    }
    m_seedFlows.push_back(slot);
    RequestRecompute();
    f.latencyNs = PathLatencyNs(f, bytes);
    ++m_active;
    return slot;
}

void
FluidNetwork::AttachPath(uint32_t slot, const std::vector<uint32_t>& path, uint32_t srcGpu)
{
    Flow& f = m_flows[slot];
    f.res.clear();
    // walk the path: one resource per hop and direction
    uint32_t node = m_topo->GetGpuNode(srcGpu);
    for (uint32_t link : path)
    {
        uint32_t dir = (m_topo->GetLinkA(link) == node) ? 0 : 1;
        f.res.push_back(2 * link + dir);
        node = m_topo->GetOtherEnd(link, node);
    }
    JoinResources(slot);
}

void
FluidNetwork::JoinResources(uint32_t slot)
{
    Flow& f = m_flows[slot];
    f.pos.clear();
    int64_t now = Simulator::Now().GetNanoSeconds();
    const std::vector<uint32_t>& resources = Resources(f);
    for (uint32_t hop = 0; hop < resources.size(); ++hop)
    {
        uint32_t r = resources[hop];
        uint32_t link = r / 2;
        double rate = m_topo->GetLinkRateBps(link);
        Resource& res = m_res[r];
        if (!res.capSet)
        {
            uint8_t kind = m_topo->GetLinkKind(link);
            bool framed =
                kind == TopologyDescription::ACCESS || kind == TopologyDescription::FABRIC;
            double payloadShare =
                (m_mtu > 0 && framed) ? static_cast<double>(m_mtu) / (m_mtu + m_headerBytes) : 1.0;
            res.capacity = rate / 8e9 * payloadShare;
            res.capFx = ToFx(res.capacity);
            res.tolFx = std::max<int64_t>(1, std::llround(res.capacity * kRelTol * kFxScale));
            res.capSet = true;
        }
        if (res.flows.empty())
        {
            res.busySince = now;
        }
        if (!res.sampleListed)
        {
            res.sampleListed = true;
            m_sampleJoined.push_back(r);
        }
        f.pos.push_back(res.flows.size());
        if (m_localRecompute && IsSaturated(res))
        {
            SeedBottlenecked(r, 0); // the new flow takes a share of a full link
        }
        res.flows.emplace_back(slot, hop);
    }
}

int32_t
FluidNetwork::SprayRouteOf(uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint32_t hashKey)
{
    if (m_topo->GetNodeHost(m_topo->GetGpuNode(srcGpu)) ==
        m_topo->GetNodeHost(m_topo->GetGpuNode(dstGpu)))
    {
        return -1; // inside a host: no fabric switch sprays it
    }
    // the flow's plane as GetPath picks it; the rest of the route is the pair's
    uint32_t planes = m_topo->GetNPlanes();
    int32_t plane = GetFlowPlane(flowId);
    uint32_t p = plane >= 0 ? static_cast<uint32_t>(plane) % planes
                            : TopologyDescription::EcmpIndex(FlowHash(hashKey, srcGpu, dstGpu),
                                                             TopologyDescription::PLANE_HOP,
                                                             planes);
    uint64_t key = (static_cast<uint64_t>(srcGpu) * m_topo->GetNGpus() + dstGpu) * planes + p;
    auto it = m_sprayRouteOf.find(key);
    if (it != m_sprayRouteOf.end())
    {
        return it->second;
    }
    uint32_t pairHash = FlowHash(0, srcGpu, dstGpu);
    SprayRoute route;
    std::vector<uint32_t> links = m_topo->GetPath(srcGpu, dstGpu, pairHash, p);
    if (links.empty() ||
        !m_topo->GetSprayedDirections(srcGpu, dstGpu, pairHash, p, route.res, route.share))
    {
        return -1;
    }
    uint32_t node = m_topo->GetGpuNode(srcGpu);
    for (uint32_t link : links)
    {
        route.path.push_back(2 * link + (m_topo->GetLinkA(link) == node ? 0 : 1));
        node = m_topo->GetOtherEnd(link, node);
    }
    int32_t index = static_cast<int32_t>(m_sprayRoutes.size());
    m_sprayRoutes.push_back(std::move(route));
    m_sprayRouteOf.emplace(key, index);
    return index;
}

uint64_t
FluidNetwork::GetSprayRoutes() const
{
    return m_sprayRouteOf.size();
}

void
FluidNetwork::DetachPath(uint32_t slot)
{
    Flow& f = m_flows[slot];
    int64_t now = Simulator::Now().GetNanoSeconds();
    Advance(f, now);
    uint64_t done = f.bytes - std::min<uint64_t>(f.bytes, std::llround(f.remaining / f.scale));
    uint64_t carried = done - std::min(done, f.pathStartDone);
    const std::vector<uint32_t>& resources = Resources(f);
    const double* shares = Shares(f);
    for (size_t k = 0; k < resources.size(); ++k)
    {
        uint32_t r = resources[k];
        Resource& res = m_res[r];
        uint32_t at = f.pos[k];
        auto moved = res.flows.back();
        res.flows[at] = moved;
        res.flows.pop_back();
        if (at < res.flows.size())
        {
            m_flows[moved.first].pos[moved.second] = at;
        }
        res.bytesDone += ShareOf(carried, shares, k);
        res.loadFx -= Weighted(f.rateFx, shares ? shares[k] : 1.0);
        if (res.flows.empty())
        {
            res.busyNs += now - res.busySince;
            res.busySince = -1;
        }
        else
        {
            m_seedRes.push_back(r);
        }
    }
    f.res.clear();
    f.pos.clear();
    f.rateFx = 0;
    f.pathStartDone = done;
}

void
FluidNetwork::InitLinkState()
{
    if (m_linkUp.empty())
    {
        uint32_t n = m_topo->GetNLinks();
        m_linkUp.assign(n, 1);
        m_linkGoodput.assign(n, 1.0);
        m_linkRate.resize(n);
        for (uint32_t l = 0; l < n; ++l)
        {
            m_linkRate[l] = m_topo->GetLinkRateBps(l);
        }
    }
}

void
FluidNetwork::ApplyLinkCapacity(uint32_t link)
{
    double payloadShare = m_mtu > 0 ? static_cast<double>(m_mtu) / (m_mtu + m_headerBytes) : 1.0;
    double rate = m_linkUp[link] ? m_linkRate[link] * m_linkGoodput[link] : 0.0;
    for (uint32_t r : {2 * link, 2 * link + 1})
    {
        Resource& res = m_res[r];
        res.capacity = rate / 8e9 * payloadShare;
        res.capFx = ToFx(res.capacity);
        res.tolFx = std::max<int64_t>(1, std::llround(res.capacity * kRelTol * kFxScale));
        res.capSet = true;
        if (!res.flows.empty())
        {
            m_seedRes.push_back(r);
        }
    }
    m_forceWhole = true;
    RequestRecompute();
}

void
FluidNetwork::SetLinkUp(uint32_t link, bool up)
{
    NS_LOG_FUNCTION(this << link << up);
    InitLinkState();
    m_linkUp.at(link) = up ? 1 : 0;
    m_topo->SetLinkUp(link, up);
    ApplyLinkCapacity(link);
}

uint32_t
FluidNetwork::Reroute()
{
    NS_LOG_FUNCTION(this);
    SampleUntil(Simulator::Now().GetNanoSeconds()); // before flows change paths
    m_topo->RecomputeFabricRoutes();
    m_sprayRouteOf.clear(); // spray routes are made again over the routes that remain
    uint32_t moved = 0;
    for (uint32_t slot = 0; slot < m_flows.size(); ++slot)
    {
        Flow& f = m_flows[slot];
        if (!f.inUse)
        {
            continue;
        }
        if (f.route >= 0)
        {
            int32_t route = SprayRouteOf(f.id, f.src, f.dst, f.hashKey);
            const SprayRoute& now = m_sprayRoutes[route < 0 ? f.route : route];
            const SprayRoute& was = m_sprayRoutes[f.route];
            if (route < 0 || (now.res == was.res && now.share == was.share))
            {
                f.route = route < 0 ? f.route : route; // nowhere to go, or the same directions
                continue;
            }
            DetachPath(slot);
            f.route = route;
            JoinResources(slot);
            f.latencyNs = PathLatencyNs(f, f.bytes);
            m_seedFlows.push_back(slot);
            ++moved;
            continue;
        }
        std::vector<uint32_t> path =
            m_topo->GetPath(f.src, f.dst, FlowHash(f.hashKey, f.src, f.dst), GetFlowPlane(f.id));
        if (path.empty())
        {
            continue; // nowhere to go: it waits on its path for the link to return
        }
        std::vector<uint32_t> links;
        for (uint32_t r : f.res)
        {
            links.push_back(r / 2);
        }
        if (links == path)
        {
            continue;
        }
        DetachPath(slot);
        AttachPath(slot, path, f.src);
        f.latencyNs = PathLatencyNs(f, f.bytes);
        m_seedFlows.push_back(slot);
        ++moved;
    }
    m_rerouted += moved;
    m_forceWhole = true;
    RequestRecompute();
    std::vector<UnroutedFlow> waiting;
    waiting.swap(m_unrouted);
    for (const UnroutedFlow& w : waiting)
    {
        if (w.connection >= 0)
        {
            StartFlowOnConnection(w.flowId,
                                  w.srcGpu,
                                  w.dstGpu,
                                  w.bytes,
                                  w.priority,
                                  static_cast<uint32_t>(w.connection));
        }
        else
        {
            StartFlow(w.flowId, w.srcGpu, w.dstGpu, w.bytes, w.priority);
        }
    }
    return moved;
}

void
FluidNetwork::SetLinkRate(uint32_t link, double rateBps)
{
    NS_LOG_FUNCTION(this << link << rateBps);
    InitLinkState();
    m_linkRate.at(link) = rateBps;
    m_topo->SetLinkRateBps(link, rateBps);
    ApplyLinkCapacity(link);
}

void
FluidNetwork::SetLinkLoss(uint32_t link, double probability, double goodputFactor)
{
    NS_LOG_FUNCTION(this << link << probability << goodputFactor);
    InitLinkState();
    m_linkGoodput.at(link) = std::clamp(goodputFactor, 0.0, 1.0);
    ApplyLinkCapacity(link);
}

uint64_t
FluidNetwork::GetFlowsRerouted() const
{
    return m_rerouted;
}

void
FluidNetwork::RequestRecompute()
{
    if (!m_recomputePending)
    {
        m_recomputePending = true;
        Simulator::ScheduleNow(&FluidNetwork::Recompute, this);
    }
}

bool
FluidNetwork::IsSaturated(const Resource& res) const
{
    return res.loadFx >= res.capFx - res.tolFx;
}

void
FluidNetwork::Advance(Flow& f, int64_t now)
{
    if (now > f.lastUpdate)
    {
        f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.lastUpdate));
        f.lastUpdate = now;
    }
}

void
FluidNetwork::SeedBottlenecked(uint32_t r, double otherRate)
{
    // on a saturated resource, the flows with the highest rate are the ones it limits
    const Resource& res = m_res[r];
    double fastest = otherRate;
    for (const auto& [slot, hop] : res.flows)
    {
        fastest = std::max(fastest, m_flows[slot].rate);
    }
    double floor = fastest * (1 - kRelTol);
    for (const auto& [slot, hop] : res.flows)
    {
        if (m_flows[slot].rate >= floor)
        {
            m_seedFlows.push_back(slot);
        }
    }
}

void
FluidNetwork::AddToSet(uint32_t slot)
{
    Flow& f = m_flows[slot];
    if (f.stamp != m_stamp && f.inUse)
    {
        f.stamp = m_stamp;
        m_compFlows.push_back(slot);
    }
}

void
FluidNetwork::ExpandResource(uint32_t r)
{
    Resource& res = m_res[r];
    if (res.expanded == m_stamp)
    {
        return;
    }
    res.expanded = m_stamp;
    for (const auto& [slot, hop] : res.flows)
    {
        AddToSet(slot);
    }
}

void
FluidNetwork::Recompute()
{
    NS_LOG_FUNCTION(this << m_seedRes.size() << m_seedFlows.size());
    m_recomputePending = false;
    ++m_recomputations;
    ++m_stamp;
    m_compFlows.clear();
    m_compRes.clear();
    for (uint32_t r : m_seedRes)
    {
        ExpandResource(r);
    }
    for (uint32_t slot : m_seedFlows)
    {
        AddToSet(slot);
    }
    m_seedRes.clear();
    m_seedFlows.clear();
    bool whole = !m_localRecompute || m_forceWhole; // re-fill the whole connected component
    m_forceWhole = false;
    uint32_t rounds = 0;
    size_t head = 0;
    while (true)
    {
        // list the resources of the set (and, for a whole component, take in their flows)
        for (; head < m_compFlows.size(); ++head)
        {
            const Flow& f = m_flows[m_compFlows[head]];
            for (uint32_t q : Resources(f))
            {
                Resource& res = m_res[q];
                if (res.stamp != m_stamp)
                {
                    res.stamp = m_stamp;
                    m_compRes.push_back(q);
                }
                if (whole)
                {
                    ExpandResource(q);
                }
            }
        }
        if (m_compFlows.empty())
        {
            return;
        }
        WaterFill();
        if (whole || !GrowSetWhereNotMaxMin())
        {
            break;
        }
        ++m_growths;
        if (++rounds == m_maxRounds)
        {
            // the set keeps growing one step at a time: fill the whole component at once
            whole = true;
            for (size_t i = 0; i < m_compRes.size(); ++i)
            {
                ExpandResource(m_compRes[i]);
            }
        }
    }
    m_assignments += m_compFlows.size();
    CommitRates();
}

void
FluidNetwork::StartFill()
{
    m_heap.clear();
    m_bottlenecks.clear();
    for (uint32_t r : m_compRes)
    {
        m_cntSet[r] = 0;
        m_setFx[r] = 0;
        m_maxOld[r] = 0;
        m_maxNew[r] = 0;
        m_newSetFx[r] = 0;
        m_wLeft[r] = 0;
    }
    for (uint32_t slot : m_compFlows)
    {
        Flow& f = m_flows[slot];
        f.frozen = false;
        const std::vector<uint32_t>& resources = Resources(f);
        const double* shares = Shares(f);
        for (uint32_t k = 0; k < resources.size(); ++k)
        {
            uint32_t q = resources[k];
            double share = shares ? shares[k] : 1.0;
            ++m_cntSet[q];
            m_wLeft[q] += share;
            m_setFx[q] += Weighted(f.rateFx, share);
            m_maxOld[q] = std::max(m_maxOld[q], f.rate);
        }
    }
    for (uint32_t r : m_compRes)
    {
        const Resource& res = m_res[r];
        int64_t fixedFx = res.loadFx - m_setFx[r];
        m_capLeft[r] = fixedFx == 0
                           ? res.capacity
                           : std::max(0.0, res.capacity - static_cast<double>(fixedFx) / kFxScale);
        m_cntLeft[r] = m_cntSet[r];
        m_version[r] = m_popVersion;
        m_heap.push_back({m_capLeft[r] / m_wLeft[r], r, m_popVersion});
    }
    ++m_popVersion;
}

void
FluidNetwork::WaterFill()
{
    // progressive filling: repeatedly saturate the resource with the smallest fair share, with
    // the capacity that flows outside the set leave on each resource
    StartFill();
    auto after = [](const FillEntry& a, const FillEntry& b) {
        return FillAfter(a, b);
    };
    std::make_heap(m_heap.begin(), m_heap.end(), after);
    while (!m_heap.empty())
    {
        std::pop_heap(m_heap.begin(), m_heap.end(), after);
        FillEntry top = m_heap.back();
        m_heap.pop_back();
        uint32_t r = top.res;
        if (top.version != m_version[r] || m_cntLeft[r] == 0)
        {
            continue;
        }
        double share = top.share;
        m_share[r] = share;
        m_bottlenecks.push_back(r);
        m_touched.clear();
        for (const auto& [slot, hop] : m_res[r].flows)
        {
            Flow& f = m_flows[slot];
            if (f.stamp != m_stamp || f.frozen)
            {
                continue;
            }
            f.frozen = true;
            f.newRate = share;
            f.newBottleneck = r;
            int64_t shareFx = ToFx(share);
            const std::vector<uint32_t>& resources = Resources(f);
            const double* shares = Shares(f);
            for (uint32_t k = 0; k < resources.size(); ++k)
            {
                uint32_t q = resources[k];
                double used = shares ? shares[k] : 1.0; // share of the flow's rate on q
                m_capLeft[q] = std::max(0.0, m_capLeft[q] - share * used);
                m_newSetFx[q] += Weighted(shareFx, used);
                m_maxNew[q] = std::max(m_maxNew[q], share);
                --m_cntLeft[q];
                m_wLeft[q] -= used;
                if (m_version[q] != m_popVersion)
                {
                    m_version[q] = m_popVersion; // one new heap entry per resource and pop
                    m_touched.push_back(q);
                }
            }
        }
        for (uint32_t q : m_touched)
        {
            if (m_cntLeft[q] > 0)
            {
                m_heap.push_back({m_capLeft[q] / m_wLeft[q], q, m_popVersion});
                std::push_heap(m_heap.begin(), m_heap.end(), after);
            }
        }
        ++m_popVersion;
    }
}

bool
FluidNetwork::GrowSetWhereNotMaxMin()
{
    // The filling is the max-min allocation if every flow has a bottleneck: a saturated
    // resource on which no flow is faster. Fixed flows are the only ones that can break this.
    bool grew = false;
    // 1. a flow of the set is frozen on a resource where a fixed flow is faster: take it in
    for (uint32_t r : m_bottlenecks)
    {
        const Resource& res = m_res[r];
        if (res.flows.size() == m_cntSet[r])
        {
            continue;
        }
        double limit = m_share[r] * (1 + kRelTol);
        for (const auto& [slot, hop] : res.flows)
        {
            const Flow& g = m_flows[slot];
            if (g.stamp != m_stamp && g.rate > limit)
            {
                AddToSet(slot);
                grew = true;
            }
        }
    }
    // 2. a fixed flow's bottleneck is a resource of the set that is no longer saturated, or on
    //    which a flow of the set now goes faster: take the fixed flow in
    for (uint32_t r : m_compRes)
    {
        const Resource& res = m_res[r];
        if (res.flows.size() == m_cntSet[r])
        {
            continue;
        }
        bool saturated = res.loadFx - m_setFx[r] + m_newSetFx[r] >= res.capFx - res.tolFx;
        if (saturated && m_maxNew[r] <= m_maxOld[r] * (1 + kRelTol))
        {
            continue; // fixed flows bottlenecked here were >= every old rate, so >= the new ones
        }
        double floor = m_maxNew[r] * (1 - kRelTol);
        for (const auto& [slot, hop] : res.flows)
        {
            const Flow& g = m_flows[slot];
            if (g.stamp != m_stamp && g.bottleneck == r && (!saturated || g.rate < floor))
            {
                AddToSet(slot);
                grew = true;
            }
        }
    }
    return grew;
}

void
FluidNetwork::CommitRates()
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    SampleUntil(now);
    for (uint32_t slot : m_compFlows)
    {
        Flow& f = m_flows[slot];
        f.bottleneck = f.newBottleneck;
        int64_t fx = ToFx(f.newRate);
        if (fx != f.rateFx)
        {
            const std::vector<uint32_t>& resources = Resources(f);
            const double* shares = Shares(f);
            for (uint32_t k = 0; k < resources.size(); ++k)
            {
                double share = shares ? shares[k] : 1.0;
                m_res[resources[k]].loadFx += Weighted(fx, share) - Weighted(f.rateFx, share);
            }
            f.rateFx = fx;
        }
        if (f.newRate == f.rate && f.heapPos >= 0)
        {
            continue;
        }
        Advance(f, now);
        f.rate = f.newRate;
        m_rateTrace(f.id, f.rate * 8e9);
        if (f.rate <= 0)
        {
            UnscheduleDone(slot); // no capacity: the flow waits (the executor reports a stall)
            continue;
        }
        double ns = f.remaining / f.rate;
        f.doneAt = now + std::max<int64_t>(static_cast<int64_t>(std::ceil(ns - 1e-6)), 0);
        ScheduleDone(slot);
    }
    ArmWakeup();
}

bool
FluidNetwork::EndsBefore(uint32_t a, uint32_t b) const
{
    const Flow& x = m_flows[a];
    const Flow& y = m_flows[b];
    return x.doneAt < y.doneAt || (x.doneAt == y.doneAt && x.doneSeq < y.doneSeq);
}

void
FluidNetwork::SiftDone(uint32_t i)
{
    uint32_t slot = m_doneHeap[i];
    while (i > 0 && EndsBefore(slot, m_doneHeap[(i - 1) / 2]))
    {
        uint32_t parent = (i - 1) / 2;
        m_doneHeap[i] = m_doneHeap[parent];
        m_flows[m_doneHeap[i]].heapPos = i;
        i = parent;
    }
    uint32_t n = m_doneHeap.size();
    while (true)
    {
        uint32_t child = 2 * i + 1;
        if (child >= n)
        {
            break;
        }
        if (child + 1 < n && EndsBefore(m_doneHeap[child + 1], m_doneHeap[child]))
        {
            ++child;
        }
        if (!EndsBefore(m_doneHeap[child], slot))
        {
            break;
        }
        m_doneHeap[i] = m_doneHeap[child];
        m_flows[m_doneHeap[i]].heapPos = i;
        i = child;
    }
    m_doneHeap[i] = slot;
    m_flows[slot].heapPos = i;
}

void
FluidNetwork::ScheduleDone(uint32_t slot)
{
    Flow& f = m_flows[slot];
    f.doneSeq = m_doneSeq++; // ties end in the order they were (re)scheduled, as events would
    if (f.heapPos < 0)
    {
        f.heapPos = m_doneHeap.size();
        m_doneHeap.push_back(slot);
    }
    SiftDone(f.heapPos);
}

void
FluidNetwork::UnscheduleDone(uint32_t slot)
{
    Flow& f = m_flows[slot];
    if (f.heapPos < 0)
    {
        return;
    }
    uint32_t i = f.heapPos;
    f.heapPos = -1;
    uint32_t last = m_doneHeap.back();
    m_doneHeap.pop_back();
    if (last != slot)
    {
        m_doneHeap[i] = last;
        m_flows[last].heapPos = i;
        SiftDone(i);
    }
}

void
FluidNetwork::ArmWakeup()
{
    int64_t at = m_doneHeap.empty() ? -1 : m_flows[m_doneHeap.front()].doneAt;
    if (at == m_wakeupAt)
    {
        return;
    }
    m_wakeup.Cancel();
    m_wakeupAt = at;
    if (at >= 0)
    {
        m_wakeup = Simulator::Schedule(
            NanoSeconds(at - Simulator::Now().GetNanoSeconds()), &FluidNetwork::Wakeup, this);
    }
}

void
FluidNetwork::Wakeup()
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    m_wakeupAt = -1;
    while (!m_doneHeap.empty() && m_flows[m_doneHeap.front()].doneAt <= now)
    {
        uint32_t slot = m_doneHeap.front();
        UnscheduleDone(slot);
        TransferDone(slot);
    }
    ArmWakeup();
}

void
FluidNetwork::NextMessage(uint32_t slot, int64_t now)
{
    Flow& f = m_flows[slot];
    Connection& connection = m_connections.at(f.connection);
    const std::vector<uint32_t>& resources = Resources(f);
    for (uint32_t k = 0; k < resources.size(); ++k)
    {
        m_res[resources[k]].bytesDone += ShareOf(f.bytes - f.pathStartDone, Shares(f), k);
    }
    m_transferDoneTrace(f.id);
    Simulator::Schedule(NanoSeconds(f.latencyNs), &FluidNetwork::Deliver, this, f.id);
    m_bytesDelivered += f.bytes;
    auto [nextId, nextBytes] = connection.queued.front();
    connection.queued.pop_front();
    f.id = nextId;
    f.bytes = nextBytes;
    f.pathStartDone = 0;
    f.remaining = static_cast<double>(nextBytes) * f.scale;
    f.latencyNs = PathLatencyNs(f, nextBytes);
    if (f.rate > 0)
    {
        double ns = f.remaining / f.rate;
        f.doneAt = now + std::max<int64_t>(static_cast<int64_t>(std::ceil(ns - 1e-6)), 0);
        ScheduleDone(slot);
    }
}

void
FluidNetwork::TransferDone(uint32_t slot)
{
    Flow& f = m_flows[slot];
    NS_LOG_FUNCTION(this << f.id);
    NS_ASSERT(f.inUse);
    int64_t now = Simulator::Now().GetNanoSeconds();
    SampleUntil(now);
    f.remaining = 0;
    f.lastUpdate = now;
    if (f.onConnection)
    {
        auto it = m_connections.find(f.connection);
        NS_ASSERT(it != m_connections.end() && it->second.slot == slot);
        if (!it->second.queued.empty())
        {
            NextMessage(slot, now);
            return;
        }
        m_connections.erase(it);
        f.onConnection = false;
    }
    const std::vector<uint32_t>& resources = Resources(f);
    const double* shares = Shares(f);
    for (size_t k = 0; k < resources.size(); ++k)
    {
        uint32_t r = resources[k];
        Resource& res = m_res[r];
        uint32_t at = f.pos[k];
        auto moved = res.flows.back();
        res.flows[at] = moved;
        res.flows.pop_back();
        if (at < res.flows.size())
        {
            m_flows[moved.first].pos[moved.second] = at;
        }
        res.bytesDone += ShareOf(f.bytes - f.pathStartDone, shares, k);
        bool saturated = IsSaturated(res);
        res.loadFx -= Weighted(f.rateFx, shares ? shares[k] : 1.0);
        if (res.flows.empty())
        {
            res.busyNs += now - res.busySince;
            res.busySince = -1;
        }
        else if (!m_localRecompute)
        {
            m_seedRes.push_back(r);
        }
        else if (saturated)
        {
            // capacity freed: the flows this resource limited may speed up (and, through
            // them, others change); the check after the filling finds everything else
            SeedBottlenecked(r, f.rate);
        }
    }
    if (!m_seedRes.empty() || !m_seedFlows.empty())
    {
        RequestRecompute();
    }
    f.inUse = false;
    f.rate = 0;
    f.rateFx = 0;
    f.bottleneck = kNoResource;
    f.heapPos = -1;
    m_freeSlots.push_back(slot);
    --m_active;
    m_transferDoneTrace(f.id);
    Simulator::Schedule(NanoSeconds(f.latencyNs), &FluidNetwork::Deliver, this, f.id);
    m_bytesDelivered += f.bytes;
}

void
FluidNetwork::Deliver(uint32_t flowId)
{
    ++m_finished;
    NotifyFlowDone(flowId);
}

uint64_t
FluidNetwork::GetFlowsStarted() const
{
    return m_started;
}

uint64_t
FluidNetwork::GetFlowsFinished() const
{
    return m_finished;
}

uint64_t
FluidNetwork::GetFlowsActive() const
{
    return m_active;
}

uint64_t
FluidNetwork::GetFlowsUnroutable() const
{
    return m_unroutable;
}

std::string
FluidNetwork::GetUnroutableMessage() const
{
    return m_unroutableMsg;
}

uint64_t
FluidNetwork::GetBytesDelivered() const
{
    return m_bytesDelivered;
}

uint64_t
FluidNetwork::GetRecomputations() const
{
    return m_recomputations;
}

uint64_t
FluidNetwork::GetRateAssignments() const
{
    return m_assignments;
}

uint64_t
FluidNetwork::GetSetGrowths() const
{
    return m_growths;
}

uint64_t
FluidNetwork::GetMessagesQueued() const
{
    return m_messagesQueued;
}

void
FluidNetwork::CopyLinkStats(uint64_t* bytes, int64_t* busyNs) const
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    for (size_t r = 0; r < m_res.size(); ++r)
    {
        const Resource& res = m_res[r];
        uint64_t carried = res.bytesDone;
        for (const auto& [slot, hop] : res.flows)
        {
            const Flow& f = m_flows[slot];
            double left =
                std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.lastUpdate));
            uint64_t onPath = f.bytes - f.pathStartDone;
            carried += ShareOf(
                onPath - std::min<uint64_t>(onPath, std::llround(left / f.scale)), Shares(f), hop);
        }
        bytes[r] = carried;
        busyNs[r] = res.busyNs + (res.busySince >= 0 ? now - res.busySince : 0);
    }
}

void
FluidNetwork::SampleUntil(int64_t nowNs)
{
    int64_t step = m_sampleInterval.GetNanoSeconds();
    if (step <= 0 || m_nextSample > nowNs)
    {
        return;
    }
    m_sampledBytes.resize(m_res.size(), 0);
    if (!m_sampleJoined.empty())
    {
        // rows in direction order: merge the directions that joined since the last sample
        std::sort(m_sampleJoined.begin(), m_sampleJoined.end());
        size_t middle = m_sampleActive.size();
        m_sampleActive.insert(m_sampleActive.end(), m_sampleJoined.begin(), m_sampleJoined.end());
        std::inplace_merge(
            m_sampleActive.begin(), m_sampleActive.begin() + middle, m_sampleActive.end());
        m_sampleJoined.clear();
    }
    // Only directions with a flow on them, or with bytes a sample has not recorded yet, can
    // have a row: an idle direction's carried bytes are its bytesDone, which changes only while
    // it carries a flow.
    for (; m_nextSample <= nowNs; m_nextSample += step)
    {
        int64_t t = m_nextSample;
        uint64_t rowsBefore = m_seriesDir.Size();
        for (uint32_t r : m_sampleActive)
        {
            const Resource& res = m_res[r];
            double carried = static_cast<double>(res.bytesDone);
            for (const auto& [slot, hop] : res.flows)
            {
                const Flow& f = m_flows[slot];
                // bytes moved on this path so far (a rerouted flow's earlier bytes are in
                // bytesDone)
                double onPath = static_cast<double>(f.bytes - f.pathStartDone);
                double left = f.remaining - f.rate * static_cast<double>(t - f.lastUpdate);
                const double* shares = Shares(f);
                carried += (onPath - std::clamp(left, 0.0, onPath)) * (shares ? shares[hop] : 1.0);
            }
            uint64_t bytes = static_cast<uint64_t>(std::llround(carried));
            if (bytes != m_sampledBytes[r])
            {
                m_sampledBytes[r] = bytes;
                m_seriesDir.PushBack(r);
                m_seriesBytes.PushBack(bytes);
            }
        }
        if (m_seriesDir.Size() != rowsBefore)
        {
            m_seriesTime.push_back(t);
            m_seriesTimeEnd.push_back(m_seriesDir.Size());
        }
    }
    // idle directions whose bytes are recorded leave the list until a flow joins them again
    auto idle = [this](uint32_t r) {
        Resource& res = m_res[r];
        if (!res.flows.empty() || res.bytesDone != m_sampledBytes[r])
        {
            return false;
        }
        res.sampleListed = false;
        return true;
    };
    m_sampleActive.erase(std::remove_if(m_sampleActive.begin(), m_sampleActive.end(), idle),
                         m_sampleActive.end());
}

uint64_t
FluidNetwork::GetNLinkSamples() const
{
    return m_seriesDir.Size();
}

void
FluidNetwork::CopyLinkSeries(int64_t* timeNs, uint32_t* direction, uint64_t* bytes) const
{
    uint64_t row = 0;
    for (size_t k = 0; k < m_seriesTime.size(); ++k)
    {
        for (; row < m_seriesTimeEnd[k]; ++row)
        {
            timeNs[row] = m_seriesTime[k];
        }
    }
    m_seriesDir.CopyTo(direction);
    m_seriesBytes.CopyTo(bytes);
}

void
FluidNetwork::TakeLinkSeries(int64_t* timeNs, uint32_t* direction, uint64_t* bytes)
{
    NS_LOG_FUNCTION(this << m_seriesDir.Size());
    uint64_t row = 0;
    for (size_t k = 0; k < m_seriesTime.size(); ++k)
    {
        for (; row < m_seriesTimeEnd[k]; ++row)
        {
            timeNs[row] = m_seriesTime[k];
        }
    }
    m_seriesDir.MoveTo(direction);
    m_seriesBytes.MoveTo(bytes);
    ReleaseLinkSeries();
}

void
ReturnFreedMemory()
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

void
FluidNetwork::ReleaseLinkSeries()
{
    m_seriesTime.clear();
    m_seriesTime.shrink_to_fit();
    m_seriesTimeEnd.clear();
    m_seriesTimeEnd.shrink_to_fit();
    m_seriesDir.Clear();
    m_seriesBytes.Clear();
}

uint64_t
FluidNetwork::GetNLinkSampleTimes() const
{
    return m_seriesTime.size();
}

void
FluidNetwork::CopyLinkSampleTimes(int64_t* timeNs, uint64_t* lastBytes) const
{
    std::copy(m_seriesTime.begin(), m_seriesTime.end(), timeNs);
    std::fill(lastBytes, lastBytes + m_res.size(), 0);
    std::copy(m_sampledBytes.begin(), m_sampledBytes.end(), lastBytes);
}

uint64_t
FluidNetwork::KeepLinkSeriesOf(uint32_t nDirections, const uint32_t* directions)
{
    std::vector<bool> wanted(m_res.size(), false);
    for (uint32_t k = 0; k < nDirections; ++k)
    {
        NS_ABORT_MSG_IF(directions[k] >= m_res.size(), "no link direction " << directions[k]);
        wanted[directions[k]] = true;
    }
    uint64_t kept = 0;
    uint64_t row = 0;
    for (size_t k = 0; k < m_seriesTime.size(); ++k)
    {
        for (; row < m_seriesTimeEnd[k]; ++row)
        {
            uint32_t r = m_seriesDir.At(row);
            if (wanted[r])
            {
                m_seriesDir.Set(kept, r); // kept <= row: compaction in place
                m_seriesBytes.Set(kept, m_seriesBytes.At(row));
                ++kept;
            }
        }
        m_seriesTimeEnd[k] = kept;
    }
    m_seriesDir.Truncate(kept);
    m_seriesBytes.Truncate(kept);
    return kept;
}

double
FluidNetwork::GetFlowRateBps(uint32_t flowId) const
{
    for (const Flow& f : m_flows)
    {
        if (f.inUse && f.id == flowId)
        {
            return f.rate * 8e9;
        }
    }
    return -1;
}

void
FluidNetwork::DoDispose()
{
    // pending events die with the simulator (Simulator::Destroy); nothing to cancel here
    m_flows.clear();
    m_res.clear();
    m_doneHeap.clear();
    m_connections.clear();
    m_socketConnections.clear();
    m_topo = nullptr;
    FlowNetwork::DoDispose();
}

} // namespace ns3
