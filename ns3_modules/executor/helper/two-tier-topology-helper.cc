/*
 * HeteroSim: a two-leaf, several-spine topology (equal-cost paths) for examples and tests.
 */
#include "two-tier-topology-helper.h"

#include "ns3/abort.h"
#include "ns3/object.h"

#include <vector>

namespace ns3
{

TwoTierTopologyHelper::TwoTierTopologyHelper(
    uint32_t hostsPerLeaf, uint32_t spines, double rateBps, double pcieRateBps, Time linkDelay)
    : m_hostsPerLeaf(hostsPerLeaf)
    , m_spines(spines)
    , m_rate(rateBps)
    , m_pcieRate(pcieRateBps)
    , m_delay(linkDelay)
{
    NS_ABORT_MSG_IF(hostsPerLeaf < 1 || spines < 1, "a two-tier fabric needs hosts and spines");
}

uint32_t
TwoTierTopologyHelper::GetUplink(uint32_t leaf, uint32_t spine) const
{
    return 4 * m_hostsPerLeaf + leaf * m_spines + spine;
}

Ptr<TopologyDescription>
TwoTierTopologyHelper::Create() const
{
    Ptr<TopologyDescription> desc = CreateObject<TopologyDescription>();
    DescribeNodesAndLinks(desc);
    DescribeRoutes(desc);
    return desc;
}

void
TwoTierTopologyHelper::DescribeNodesAndLinks(Ptr<TopologyDescription> desc) const
{
    uint32_t hosts = 2 * m_hostsPerLeaf;
    uint32_t leaf0 = 2 * hosts;
    uint32_t nodes = leaf0 + 2 + m_spines;
    std::vector<uint8_t> kind(nodes, TopologyDescription::SPINE);
    std::vector<int32_t> host(nodes, -1);
    uint32_t links = 2 * hosts + 2 * m_spines;
    std::vector<int32_t> a(links);
    std::vector<int32_t> b(links);
    std::vector<double> rate(links, m_rate);
    std::vector<int64_t> delay(links, m_delay.GetNanoSeconds());
    std::vector<uint8_t> linkKind(links, TopologyDescription::FABRIC);
    std::vector<int32_t> gpuNode(hosts);
    std::vector<int32_t> nicNode(hosts);
    kind[leaf0] = kind[leaf0 + 1] = TopologyDescription::LEAF;
    for (uint32_t h = 0; h < hosts; ++h)
    {
        kind[2 * h] = TopologyDescription::GPU;
        kind[2 * h + 1] = TopologyDescription::NIC;
        host[2 * h] = host[2 * h + 1] = static_cast<int32_t>(h);
        a[2 * h] = static_cast<int32_t>(2 * h);
        b[2 * h] = static_cast<int32_t>(2 * h + 1);
        rate[2 * h] = m_pcieRate;
        linkKind[2 * h] = TopologyDescription::PCIE;
        a[2 * h + 1] = static_cast<int32_t>(2 * h + 1);
        b[2 * h + 1] = static_cast<int32_t>(leaf0 + h / m_hostsPerLeaf);
        linkKind[2 * h + 1] = TopologyDescription::ACCESS;
        gpuNode[h] = static_cast<int32_t>(2 * h);
        nicNode[h] = static_cast<int32_t>(2 * h + 1);
    }
    for (uint32_t l = 0; l < 2; ++l)
    {
        for (uint32_t s = 0; s < m_spines; ++s)
        {
            a[GetUplink(l, s)] = static_cast<int32_t>(leaf0 + l);
            b[GetUplink(l, s)] = static_cast<int32_t>(leaf0 + 2 + s);
        }
    }
    desc->SetNodes(nodes, kind.data(), host.data());
    desc->SetLinks(links, a.data(), b.data(), rate.data(), delay.data(), linkKind.data());
    desc->SetGpus(hosts, gpuNode.data(), nicNode.data());
}

void
TwoTierTopologyHelper::DescribeRoutes(Ptr<TopologyDescription> desc) const
{
    uint32_t hosts = 2 * m_hostsPerLeaf;
    uint32_t leaf0 = 2 * hosts;
    // Routes (CSR over (node, destination) entries): GPU <-> own NIC; NIC -> other NICs through
    // its access link; leaf -> own NICs directly, other NICs over every uplink; spine -> NIC
    // through the NIC's leaf.
    std::vector<int32_t> rNode;
    std::vector<int32_t> rDst;
    std::vector<int64_t> rPtr{0};
    std::vector<int32_t> rLink;
    auto add = [&](uint32_t node, uint32_t dst, const std::vector<uint32_t>& via) {
        rNode.push_back(static_cast<int32_t>(node));
        rDst.push_back(static_cast<int32_t>(dst));
        for (uint32_t link : via)
        {
            rLink.push_back(static_cast<int32_t>(link));
        }
        rPtr.push_back(static_cast<int64_t>(rLink.size()));
    };
    for (uint32_t h = 0; h < hosts; ++h)
    {
        uint32_t nic = 2 * h + 1;
        uint32_t leaf = h / m_hostsPerLeaf;
        add(2 * h, nic, {2 * h});
        add(nic, 2 * h, {2 * h});
        for (uint32_t k = 0; k < hosts; ++k)
        {
            if (k != h)
            {
                add(nic, 2 * k + 1, {2 * h + 1});
            }
        }
        for (uint32_t l = 0; l < 2; ++l)
        {
            std::vector<uint32_t> via;
            for (uint32_t s = 0; s < m_spines && l != leaf; ++s)
            {
                via.push_back(GetUplink(l, s));
            }
            add(leaf0 + l, nic, l == leaf ? std::vector<uint32_t>{2 * h + 1} : via);
        }
        for (uint32_t s = 0; s < m_spines; ++s)
        {
            add(leaf0 + 2 + s, nic, {GetUplink(leaf, s)});
        }
    }
    desc->SetRoutes(
        static_cast<uint32_t>(rNode.size()), rNode.data(), rDst.data(), rPtr.data(), rLink.data());
}

} // namespace ns3
