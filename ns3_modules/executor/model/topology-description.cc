/*
 * HeteroSim: the network graph and routes shared by the packet and the flow network models.
 */
#include "topology-description.h"

#include "ns3/assert.h"
#include "ns3/log.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("TopologyDescription");
NS_OBJECT_ENSURE_REGISTERED(TopologyDescription);

TypeId
TopologyDescription::GetTypeId()
{
    static TypeId tid = TypeId("ns3::TopologyDescription")
                            .SetParent<Object>()
                            .SetGroupName("Heterosim")
                            .AddConstructor<TopologyDescription>();
    return tid;
}

TopologyDescription::TopologyDescription()
{
    NS_LOG_FUNCTION(this);
}

void
TopologyDescription::SetNodes(uint32_t n, const uint8_t* kind, const int32_t* host)
{
    m_nodeKind.assign(kind, kind + n);
    m_nodeHost.assign(host, host + n);
    m_nodeLinks.assign(n, {});
}

void
TopologyDescription::SetLinks(uint32_t n,
                              const int32_t* a,
                              const int32_t* b,
                              const double* rateBps,
                              const int64_t* delayNs,
                              const uint8_t* kind)
{
    NS_ASSERT_MSG(!m_nodeKind.empty(), "SetNodes() before SetLinks()");
    m_linkA.assign(a, a + n);
    m_linkB.assign(b, b + n);
    m_linkRate.assign(rateBps, rateBps + n);
    m_linkDelay.assign(delayNs, delayNs + n);
    m_linkKind.assign(kind, kind + n);
    for (auto& links : m_nodeLinks)
    {
        links.clear();
    }
    for (uint32_t i = 0; i < n; ++i)
    {
        NS_ASSERT(m_linkA[i] < m_nodeKind.size() && m_linkB[i] < m_nodeKind.size());
        m_nodeLinks[m_linkA[i]].push_back(i);
        m_nodeLinks[m_linkB[i]].push_back(i);
    }
}

void
TopologyDescription::SetGpus(uint32_t n, const int32_t* gpuNode, const int32_t* nicNode)
{
    m_gpuNode.assign(gpuNode, gpuNode + n);
    m_gpuNic.assign(nicNode, nicNode + n);
    m_planes = 1;
    m_gpuPlaneNic.assign(m_gpuNic.begin(), m_gpuNic.end());
    m_hostGpus.clear();
    for (uint32_t g = 0; g < n; ++g)
    {
        int32_t host = m_nodeHost.at(m_gpuNode[g]);
        NS_ASSERT_MSG(host >= 0, "a GPU belongs to a host");
        if (static_cast<std::size_t>(host) >= m_hostGpus.size())
        {
            m_hostGpus.resize(host + 1);
        }
        m_hostGpus[host].push_back(g);
    }
}

void
TopologyDescription::SetGpuPlanes(uint32_t planes, const int32_t* nicNodes)
{
    NS_ASSERT_MSG(planes >= 1, "a fabric has at least one plane");
    NS_ASSERT_MSG(!m_gpuNode.empty(), "SetGpus() before SetGpuPlanes()");
    m_planes = planes;
    m_gpuPlaneNic.assign(nicNodes, nicNodes + m_gpuNode.size() * planes);
    for (uint32_t g = 0; g < m_gpuNode.size(); ++g)
    {
        m_gpuNic[g] = m_gpuPlaneNic[g * planes];
    }
}

uint32_t
TopologyDescription::GetNPlanes() const
{
    return m_planes;
}

void
TopologyDescription::SetRoutes(uint32_t entries,
                               const int32_t* node,
                               const int32_t* dst,
                               const int64_t* ptr,
                               const int32_t* links)
{
    m_routes.clear();
    m_routes.reserve(entries);
    for (uint32_t e = 0; e < entries; ++e)
    {
        uint64_t key = (static_cast<uint64_t>(node[e]) << 32) | static_cast<uint32_t>(dst[e]);
        m_routes[key].assign(links + ptr[e], links + ptr[e + 1]);
    }
}

void
TopologyDescription::SetHostTransports(uint32_t n, const uint8_t* socket)
{
    m_hostSocket.assign(socket, socket + n);
    m_anySocket =
        std::any_of(m_hostSocket.begin(), m_hostSocket.end(), [](uint8_t v) { return v != 0; });
}

bool
TopologyDescription::IsSocketHost(int32_t host) const
{
    return host >= 0 && static_cast<std::size_t>(host) < m_hostSocket.size() &&
           m_hostSocket[host] != 0;
}

bool
TopologyDescription::HasSocketHosts() const
{
    return m_anySocket;
}

bool
TopologyDescription::UsesSocket(uint32_t srcGpu, uint32_t dstGpu) const
{
    if (!m_anySocket)
    {
        return false;
    }
    int32_t a = m_nodeHost.at(m_gpuNode.at(srcGpu));
    int32_t b = m_nodeHost.at(m_gpuNode.at(dstGpu));
    return a != b && (IsSocketHost(a) || IsSocketHost(b));
}

void
TopologyDescription::SetLinkUp(uint32_t link, bool up)
{
    NS_LOG_FUNCTION(this << link << up);
    if (m_linkUp.empty())
    {
        m_linkUp.assign(m_linkA.size(), 1);
    }
    m_linkUp.at(link) = up ? 1 : 0;
}

bool
TopologyDescription::IsLinkUp(uint32_t link) const
{
    return m_linkUp.empty() || m_linkUp.at(link) != 0;
}

void
TopologyDescription::SetLinkRateBps(uint32_t link, double rateBps)
{
    m_linkRate.at(link) = rateBps;
}

uint32_t
TopologyDescription::RecomputeFabricRoutes()
{
    NS_LOG_FUNCTION(this);
    if (m_baseRoutes.empty())
    {
        m_baseRoutes = m_routes;
    }
    bool allUp = std::all_of(m_linkUp.begin(), m_linkUp.end(), [](uint8_t u) { return u != 0; });
    if (allUp)
    {
        m_routes = m_baseRoutes;
        return 0;
    }
    uint32_t nNodes = m_nodeKind.size();
    std::vector<uint8_t> unreachable(nNodes, 0);
    std::vector<int64_t> dist(nNodes);
    std::vector<uint32_t> queue;
    for (uint32_t d = 0; d < nNodes; ++d)
    {
        if (m_nodeKind[d] != NIC)
        {
            continue;
        }
        FabricHopCounts(d, dist, queue);
        for (uint32_t u = 0; u < nNodes; ++u)
        {
            if (u == d || !IsFabricNode(u) ||
                (m_nodeKind[u] == NIC && m_nodeHost[u] == m_nodeHost[d]))
            {
                continue; // NIC -> NIC inside a host is a host route
            }
            uint64_t key = (static_cast<uint64_t>(u) << 32) | d;
            if (dist[u] < 0)
            {
                m_routes.erase(key);
                if (m_nodeKind[u] == NIC)
                {
                    unreachable[d] = 1;
                }
                continue;
            }
            m_routes[key] = FabricNextHops(u, d, dist);
        }
    }
    return static_cast<uint32_t>(std::count(unreachable.begin(), unreachable.end(), 1));
}

bool
TopologyDescription::IsUpFabricLink(uint32_t link) const
{
    return (m_linkKind[link] == ACCESS || m_linkKind[link] == FABRIC) && m_linkUp[link] != 0;
}

bool
TopologyDescription::IsFabricNode(uint32_t node) const
{
    uint8_t k = m_nodeKind[node];
    return k == NIC || k == LEAF || k == SPINE;
}

void
TopologyDescription::FabricHopCounts(uint32_t dst,
                                     std::vector<int64_t>& dist,
                                     std::vector<uint32_t>& queue) const
{
    // breadth-first search from the destination over the fabric links that are up
    std::fill(dist.begin(), dist.end(), -1);
    queue.clear();
    dist[dst] = 0;
    queue.push_back(dst);
    for (std::size_t head = 0; head < queue.size(); ++head)
    {
        uint32_t u = queue[head];
        if (u != dst && m_nodeKind[u] == NIC)
        {
            continue; // a NIC never forwards for others
        }
        for (uint32_t l : m_nodeLinks[u])
        {
            if (!IsUpFabricLink(l))
            {
                continue;
            }
            uint32_t v = GetOtherEnd(l, u);
            if (dist[v] < 0 && IsFabricNode(v))
            {
                dist[v] = dist[u] + 1;
                queue.push_back(v);
            }
        }
    }
}

std::vector<uint32_t>
TopologyDescription::FabricNextHops(uint32_t node,
                                    uint32_t dst,
                                    const std::vector<int64_t>& dist) const
{
    std::vector<uint32_t> best;
    for (uint32_t l : m_nodeLinks[node])
    {
        if (!IsUpFabricLink(l))
        {
            continue;
        }
        uint32_t v = GetOtherEnd(l, node);
        if (dist[v] == dist[node] - 1 && (m_nodeKind[v] != NIC || v == dst))
        {
            best.push_back(l);
        }
    }
    // original next hops first, in their order; new ones after, by link id
    std::vector<uint32_t> ordered;
    auto base = m_baseRoutes.find((static_cast<uint64_t>(node) << 32) | dst);
    if (base != m_baseRoutes.end())
    {
        for (uint32_t l : base->second)
        {
            if (std::find(best.begin(), best.end(), l) != best.end())
            {
                ordered.push_back(l);
            }
        }
    }
    for (uint32_t l : best)
    {
        if (std::find(ordered.begin(), ordered.end(), l) == ordered.end())
        {
            ordered.push_back(l);
        }
    }
    return ordered;
}

uint32_t
TopologyDescription::GetNNodes() const
{
    return m_nodeKind.size();
}

uint32_t
TopologyDescription::GetNLinks() const
{
    return m_linkA.size();
}

uint32_t
TopologyDescription::GetNGpus() const
{
    return m_gpuNode.size();
}

uint8_t
TopologyDescription::GetNodeKind(uint32_t node) const
{
    return m_nodeKind.at(node);
}

int32_t
TopologyDescription::GetNodeHost(uint32_t node) const
{
    return m_nodeHost.at(node);
}

uint32_t
TopologyDescription::GetLinkA(uint32_t link) const
{
    return m_linkA.at(link);
}

uint32_t
TopologyDescription::GetLinkB(uint32_t link) const
{
    return m_linkB.at(link);
}

double
TopologyDescription::GetLinkRateBps(uint32_t link) const
{
    return m_linkRate.at(link);
}

int64_t
TopologyDescription::GetLinkDelayNs(uint32_t link) const
{
    return m_linkDelay.at(link);
}

uint8_t
TopologyDescription::GetLinkKind(uint32_t link) const
{
    return m_linkKind.at(link);
}

uint32_t
TopologyDescription::GetOtherEnd(uint32_t link, uint32_t node) const
{
    return m_linkA.at(link) == node ? m_linkB.at(link) : m_linkA.at(link);
}

uint32_t
TopologyDescription::GetGpuNode(uint32_t gpu) const
{
    return m_gpuNode.at(gpu);
}

uint32_t
TopologyDescription::GetGpuNicNode(uint32_t gpu) const
{
    return m_gpuNic.at(gpu);
}

uint32_t
TopologyDescription::GetGpuNicNode(uint32_t gpu, uint32_t plane) const
{
    return m_gpuPlaneNic.at(static_cast<std::size_t>(gpu) * m_planes + plane % m_planes);
}

const std::vector<uint32_t>&
TopologyDescription::GetNodeLinks(uint32_t node) const
{
    return m_nodeLinks.at(node);
}

const std::vector<uint32_t>&
TopologyDescription::GetNextHops(uint32_t node, uint32_t dst) const
{
    auto it = m_routes.find((static_cast<uint64_t>(node) << 32) | dst);
    return it == m_routes.end() ? m_noRoute : it->second;
}

uint32_t
TopologyDescription::FlowHash(
    uint32_t seed, uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint32_t salt)
{
    uint64_t z = (static_cast<uint64_t>(seed) << 32 | flowId) * 0x9E3779B97F4A7C15ULL;
    z ^= (static_cast<uint64_t>(srcGpu) << 40) ^ (static_cast<uint64_t>(dstGpu) << 16) ^ salt;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return static_cast<uint32_t>(z);
}

uint32_t
TopologyDescription::EcmpIndex(uint32_t flowHash, uint32_t hop, uint32_t choices)
{
    uint32_t x = flowHash * 0x9E3779B1u + hop * 0x85EBCA77u + 0x165667B1u;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return x % choices;
}

bool
TopologyDescription::Walk(uint32_t node,
                          uint32_t dst,
                          uint32_t flowHash,
                          std::vector<uint32_t>& out) const
{
    uint32_t hop = 0;
    while (node != dst)
    {
        const auto& options = GetNextHops(node, dst);
        if (options.empty() || hop > m_nodeKind.size())
        {
            return false;
        }
        uint32_t link = options[EcmpIndex(flowHash, hop, options.size())];
        out.push_back(link);
        node = GetOtherEnd(link, node);
        ++hop;
    }
    return true;
}

std::vector<uint32_t>
TopologyDescription::GetPath(uint32_t srcGpu, uint32_t dstGpu, uint32_t flowHash) const
{
    return GetPath(srcGpu, dstGpu, flowHash, -1);
}

std::pair<uint32_t, uint32_t>
TopologyDescription::GetFlowNics(
    uint32_t srcGpu, uint32_t dstGpu, uint32_t flowHash, int32_t plane, uint32_t* proxyGpu) const
{
    uint32_t p = plane >= 0 ? static_cast<uint32_t>(plane) % m_planes
                            : EcmpIndex(flowHash, PLANE_HOP, m_planes);
    uint32_t nicA = GetGpuNicNode(srcGpu, p);
    uint32_t nicB = GetGpuNicNode(dstGpu, p);
    uint32_t proxy = srcGpu;
    // routes as built, before any fault: PXN serves fabrics without a route between the ports
    // (rail-only), not links that are down (the flow waits for those, as on any fabric)
    const auto& built = m_baseRoutes.empty() ? m_routes : m_baseRoutes;
    auto hasRoute = [&built](uint32_t node, uint32_t dst) {
        auto it = built.find((static_cast<uint64_t>(node) << 32) | dst);
        return it != built.end() && !it->second.empty();
    };
    if (!hasRoute(nicA, nicB))
    {
        // no fabric route between the ports (rail-only): leave by the port of the first GPU of
        // the source host that reaches the destination port (NCCL's PXN)
        int32_t host = m_nodeHost.at(m_gpuNode.at(srcGpu));
        for (uint32_t g : m_hostGpus.at(host))
        {
            uint32_t nic = GetGpuNicNode(g, p);
            if (hasRoute(nic, nicB))
            {
                nicA = nic;
                proxy = g;
                break;
            }
        }
    }
    if (proxyGpu)
    {
        *proxyGpu = proxy;
    }
    return {nicA, nicB};
}

std::vector<uint32_t>
TopologyDescription::GetPath(uint32_t srcGpu,
                             uint32_t dstGpu,
                             uint32_t flowHash,
                             int32_t plane) const
{
    std::vector<uint32_t> path;
    uint32_t src = GetGpuNode(srcGpu);
    uint32_t dst = GetGpuNode(dstGpu);
    if (src == dst)
    {
        return path;
    }
    bool ok;
    if (m_nodeHost.at(src) == m_nodeHost.at(dst))
    {
        ok = Walk(src, dst, flowHash, path);
    }
    else
    {
        uint32_t proxy = srcGpu;
        auto [nicA, nicB] = GetFlowNics(srcGpu, dstGpu, flowHash, plane, &proxy);
        uint32_t via = GetGpuNode(proxy);
        ok = (via == src || Walk(src, via, flowHash, path)) && Walk(via, nicA, flowHash, path) &&
             Walk(nicA, nicB, flowHash, path) && Walk(nicB, dst, flowHash, path);
    }
    if (!ok)
    {
        path.clear();
    }
    return path;
}

bool
TopologyDescription::SprayWalk(uint32_t node,
                               uint32_t dst,
                               uint32_t flowHash,
                               std::vector<uint32_t>& directions,
                               std::vector<double>& shares) const
{
    // hop by hop over the equal-cost DAG towards dst: the share of the flow at each node
    std::vector<std::pair<uint32_t, double>> layer{{node, 1.0}};
    std::vector<std::pair<uint32_t, double>> next;
    for (uint32_t hop = 0; hop <= m_nodeKind.size(); ++hop)
    {
        next.clear();
        bool arrived = true;
        for (const auto& [u, share] : layer)
        {
            if (u == dst)
            {
                next.emplace_back(u, share);
                continue;
            }
            arrived = false;
            const auto& options = GetNextHops(u, dst);
            if (options.empty())
            {
                return false;
            }
            bool sprays = m_nodeKind[u] == LEAF || m_nodeKind[u] == SPINE;
            uint32_t first = sprays ? 0 : EcmpIndex(flowHash, hop, options.size());
            uint32_t count = sprays ? options.size() : 1;
            double part = share / count;
            for (uint32_t k = first; k < first + count; ++k)
            {
                uint32_t link = options[k];
                uint32_t direction = 2 * link + (m_linkA[link] == u ? 0 : 1);
                auto at = std::find(directions.begin(), directions.end(), direction);
                if (at == directions.end())
                {
                    directions.push_back(direction);
                    shares.push_back(part);
                }
                else
                {
                    shares[at - directions.begin()] += part;
                }
                uint32_t v = GetOtherEnd(link, u);
                auto seen = std::find_if(
                    next.begin(), next.end(), [v](const auto& e) { return e.first == v; });
                if (seen == next.end())
                {
                    next.emplace_back(v, part);
                }
                else
                {
                    seen->second += part;
                }
            }
        }
        if (arrived)
        {
            return true;
        }
        layer.swap(next);
    }
    return false;
}

bool
TopologyDescription::GetSprayedDirections(uint32_t srcGpu,
                                          uint32_t dstGpu,
                                          uint32_t flowHash,
                                          int32_t plane,
                                          std::vector<uint32_t>& directions,
                                          std::vector<double>& shares) const
{
    directions.clear();
    shares.clear();
    uint32_t src = GetGpuNode(srcGpu);
    uint32_t dst = GetGpuNode(dstGpu);
    if (m_nodeHost.at(src) == m_nodeHost.at(dst))
    {
        return false;
    }
    uint32_t proxy = srcGpu;
    auto [nicA, nicB] = GetFlowNics(srcGpu, dstGpu, flowHash, plane, &proxy);
    uint32_t via = GetGpuNode(proxy);
    // the host segments take GetPath's links, whole
    auto walkHost = [&](uint32_t from, uint32_t to) {
        std::vector<uint32_t> links;
        if (!Walk(from, to, flowHash, links))
        {
            return false;
        }
        for (uint32_t link : links)
        {
            directions.push_back(2 * link + (m_linkA[link] == from ? 0 : 1));
            shares.push_back(1.0);
            from = GetOtherEnd(link, from);
        }
        return true;
    };
    return (via == src || walkHost(src, via)) && walkHost(via, nicA) &&
           SprayWalk(nicA, nicB, flowHash, directions, shares) && walkHost(nicB, dst);
}

} // namespace ns3
