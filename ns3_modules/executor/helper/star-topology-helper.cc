/*
 * HeteroSim: a one-switch topology for examples and tests.
 */
#include "star-topology-helper.h"

#include "ns3/abort.h"
#include "ns3/object.h"

#include <vector>

namespace ns3
{

StarTopologyHelper::StarTopologyHelper(uint32_t hosts,
                                       double nicRateBps,
                                       double pcieRateBps,
                                       Time linkDelay)
    : m_hosts(hosts)
    , m_nicRate(nicRateBps)
    , m_pcieRate(pcieRateBps)
    , m_delay(linkDelay)
{
    NS_ABORT_MSG_IF(hosts < 2, "a star needs at least two hosts");
}

uint32_t
StarTopologyHelper::GetLeafNode() const
{
    return 2 * m_hosts;
}

Ptr<TopologyDescription>
StarTopologyHelper::Create() const
{
    uint32_t nodes = 2 * m_hosts + 1;
    std::vector<uint8_t> kind(nodes);
    std::vector<int32_t> host(nodes);
    for (uint32_t h = 0; h < m_hosts; ++h)
    {
        kind[2 * h] = TopologyDescription::GPU;
        kind[2 * h + 1] = TopologyDescription::NIC;
        host[2 * h] = host[2 * h + 1] = static_cast<int32_t>(h);
    }
    kind[GetLeafNode()] = TopologyDescription::LEAF;
    host[GetLeafNode()] = -1;

    uint32_t links = 2 * m_hosts;
    std::vector<int32_t> a(links);
    std::vector<int32_t> b(links);
    std::vector<double> rate(links);
    std::vector<int64_t> delay(links, m_delay.GetNanoSeconds());
    std::vector<uint8_t> linkKind(links);
    std::vector<int32_t> gpuNode(m_hosts);
    std::vector<int32_t> nicNode(m_hosts);
    for (uint32_t h = 0; h < m_hosts; ++h)
    {
        a[2 * h] = static_cast<int32_t>(2 * h);
        b[2 * h] = static_cast<int32_t>(2 * h + 1);
        rate[2 * h] = m_pcieRate;
        linkKind[2 * h] = TopologyDescription::PCIE;
        a[2 * h + 1] = static_cast<int32_t>(2 * h + 1);
        b[2 * h + 1] = static_cast<int32_t>(GetLeafNode());
        rate[2 * h + 1] = m_nicRate;
        linkKind[2 * h + 1] = TopologyDescription::ACCESS;
        gpuNode[h] = static_cast<int32_t>(2 * h);
        nicNode[h] = static_cast<int32_t>(2 * h + 1);
    }

    // Routes (CSR over (node, destination) entries): GPU <-> own NIC; NIC -> any other NIC
    // through its access link; leaf -> NIC through that NIC's access link.
    std::vector<int32_t> rNode;
    std::vector<int32_t> rDst;
    std::vector<int64_t> rPtr{0};
    std::vector<int32_t> rLink;
    auto add = [&](uint32_t node, uint32_t dst, uint32_t link) {
        rNode.push_back(static_cast<int32_t>(node));
        rDst.push_back(static_cast<int32_t>(dst));
        rLink.push_back(static_cast<int32_t>(link));
        rPtr.push_back(static_cast<int64_t>(rLink.size()));
    };
    for (uint32_t h = 0; h < m_hosts; ++h)
    {
        add(2 * h, 2 * h + 1, 2 * h);
        add(2 * h + 1, 2 * h, 2 * h);
        add(GetLeafNode(), 2 * h + 1, 2 * h + 1);
        for (uint32_t k = 0; k < m_hosts; ++k)
        {
            if (k != h)
            {
                add(2 * h + 1, 2 * k + 1, 2 * h + 1);
            }
        }
    }

    Ptr<TopologyDescription> desc = CreateObject<TopologyDescription>();
    desc->SetNodes(nodes, kind.data(), host.data());
    desc->SetLinks(links, a.data(), b.data(), rate.data(), delay.data(), linkKind.data());
    desc->SetGpus(m_hosts, gpuNode.data(), nicNode.data());
    desc->SetRoutes(
        static_cast<uint32_t>(rNode.size()), rNode.data(), rDst.data(), rPtr.data(), rLink.data());
    return desc;
}

} // namespace ns3
