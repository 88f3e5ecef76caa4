/*
 * HeteroSim: the component factories of the packet network and the assembly of its fabric.
 */
#include "packet-network-builder.h"

#include "ns3/data-rate.h"
#include "ns3/log.h"
#include "ns3/mac48-address.h"
#include "ns3/qbb-channel.h"
#include "ns3/red-ecn-marker.h"
#include "ns3/string.h"
#include "ns3/switch-mmu.h"
#include "ns3/uinteger.h"

#include <cmath>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PacketNetworkBuilder");

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
} // namespace

PacketNetworkBuilder::PacketNetworkBuilder()
{
    NS_LOG_FUNCTION(this);
    m_nicFactory.SetTypeId("ns3::RdmaNic");
    m_mmuFactory.SetTypeId("ns3::SwitchMmu");
    m_markerFactory.SetTypeId("ns3::RedEcnMarker");
    m_ffFactory.SetTypeId("ns3::PacketFastForward");
    m_memoFactory.SetTypeId("ns3::PacketEpisodeCache");
    m_socketFactory.SetTypeId("ns3::SocketTransport");
    m_lbFactory.SetTypeId("ns3::LoadBalancer");
    m_switchFactory.SetTypeId("ns3::RdmaSwitch");
    for (const TypeId& tid : CongestionControlTypes())
    {
        m_ccFactories[tid.GetName()].SetTypeId(tid);
    }
}

PacketNetworkBuilder::SetResult
PacketNetworkBuilder::SetComponentAttribute(const std::string& cls,
                                            const std::string& attr,
                                            const std::string& value)
{
    NS_LOG_FUNCTION(this << cls << attr << value);
    struct Target
    {
        const char* type;
        ObjectFactory* factory;
    };
    std::vector<Target> targets{{"ns3::RdmaNic", &m_nicFactory},
                                {"ns3::SwitchMmu", &m_mmuFactory},
                                {"ns3::RedEcnMarker", &m_markerFactory},
                                {"ns3::PacketFastForward", &m_ffFactory},
                                {"ns3::PacketEpisodeCache", &m_memoFactory},
                                {"ns3::SocketTransport", &m_socketFactory},
                                {"ns3::LoadBalancer", &m_lbFactory},
                                {"ns3::RdmaSwitch", &m_switchFactory}};
    for (auto& [type, factory] : m_ccFactories)
    {
        targets.push_back({type.c_str(), &factory});
    }
    SetResult result = NOT_FOUND;
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
            return INVALID;
        }
        t.factory->Set(attr, *v);
        result = SET;
    }
    return result;
}

bool
PacketNetworkBuilder::HasCongestionControl(TypeId cc) const
{
    return m_ccFactories.find(cc.GetName()) != m_ccFactories.end();
}

Ptr<RdmaCongestionControl>
PacketNetworkBuilder::CreateCongestionControl(TypeId cc)
{
    auto it = m_ccFactories.find(cc.GetName());
    NS_ASSERT_MSG(it != m_ccFactories.end(), cc.GetName() << " is no congestion control");
    return it->second.Create<RdmaCongestionControl>();
}

Ptr<PacketFastForward>
PacketNetworkBuilder::CreateFastForward()
{
    return m_ffFactory.Create<PacketFastForward>();
}

Ptr<PacketEpisodeCache>
PacketNetworkBuilder::CreateEpisodeCache()
{
    return m_memoFactory.Create<PacketEpisodeCache>();
}

Ptr<SocketTransport>
PacketNetworkBuilder::CreateSocketTransport()
{
    return m_socketFactory.Create<SocketTransport>();
}

bool
PacketNetworkBuilder::SetLoadBalancing(const std::string& mode)
{
    if (mode == "ecmp")
    {
        return true;
    }
    return SetComponentAttribute("ns3::LoadBalancer", "Mode", mode) == SET;
}

bool
PacketNetworkBuilder::NicsGoBackN() const
{
    return m_nicFactory.Create<RdmaNic>()->GetTransport() == RdmaNic::ROCE;
}

void
PacketNetworkBuilder::SetLossyPriorities(uint32_t mask)
{
    m_mmuFactory.Set("LossyPriorities", UintegerValue(mask));
}

PacketFabric
PacketNetworkBuilder::Build(Ptr<TopologyDescription> desc, const PacketFabricSettings& settings)
{
    NS_LOG_FUNCTION(this);
    PacketFabric fabric;
    uint32_t nNodes = desc->GetNNodes();
    for (uint32_t n = 0; n < nNodes; ++n)
    {
        fabric.nodes.push_back(CreateObject<Node>());
    }
    BuildLinks(desc, settings, fabric);
    fabric.nics.assign(nNodes, nullptr);
    fabric.switches.assign(nNodes, nullptr);
    for (uint32_t n = 0; n < nNodes; ++n)
    {
        std::vector<Ptr<QbbNetDevice>> ports;
        std::vector<uint32_t> links;
        for (uint32_t gp : fabric.nodePorts[n])
        {
            ports.push_back(fabric.portDev[gp]);
            links.push_back(gp / 2);
        }
        uint8_t kind = desc->GetNodeKind(n);
        if (kind == TopologyDescription::GPU || kind == TopologyDescription::NIC)
        {
            Ptr<RdmaNic> nic = BuildEndpoint(n, kind, ports, settings);
            fabric.nodes[n]->AggregateObject(nic);
            fabric.nics[n] = nic;
        }
        else
        {
            Ptr<RdmaSwitch> sw = BuildSwitch(n, kind, desc, ports, links, settings);
            fabric.nodes[n]->AggregateObject(sw);
            fabric.switches[n] = sw;
        }
    }
    return fabric;
}

void
PacketNetworkBuilder::BuildLinks(Ptr<TopologyDescription> desc,
                                 const PacketFabricSettings& settings,
                                 PacketFabric& fabric) const
{
    fabric.nodePorts.assign(desc->GetNNodes(), {});
    uint32_t nLinks = desc->GetNLinks();
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
            dev->SetAttribute("PfcFrameBytes", UintegerValue(64 + settings.phyBytes));
            dev->SetAddress(Mac48Address::Allocate());
            fabric.nodes[end]->AddDevice(dev);
            dev->Attach(channel);
            fabric.nodePorts[end].push_back(static_cast<uint32_t>(fabric.portDev.size()));
            fabric.portDev.push_back(dev);
        }
    }
}

Ptr<RdmaNic>
PacketNetworkBuilder::BuildEndpoint(uint32_t node,
                                    uint8_t kind,
                                    const std::vector<Ptr<QbbNetDevice>>& ports,
                                    const PacketFabricSettings& settings) const
{
    Ptr<RdmaNic> nic = m_nicFactory.Create<RdmaNic>();
    // GPU endpoints only carry intra-host copies: payload-only frames, empty ACKs.
    RdmaFrameSizes hostSizes{0, 0, 0, 0};
    nic->Setup(node,
               ports,
               settings.pool,
               settings.qps,
               kind == TopologyDescription::GPU ? hostSizes : settings.sizes,
               settings.mtu);
    // host links: lossless
    nic->SetLossless(settings.pfc || kind == TopologyDescription::GPU);
    nic->SetDeliveredCallback(settings.delivered);
    return nic;
}

Ptr<RdmaSwitch>
PacketNetworkBuilder::BuildSwitch(uint32_t node,
                                  uint8_t kind,
                                  Ptr<TopologyDescription> desc,
                                  const std::vector<Ptr<QbbNetDevice>>& ports,
                                  const std::vector<uint32_t>& links,
                                  const PacketFabricSettings& settings) const
{
    bool leafSpine = kind == TopologyDescription::LEAF || kind == TopologyDescription::SPINE;
    Ptr<RdmaSwitch> sw = m_switchFactory.Create<RdmaSwitch>();
    sw->SetPhyBytes(settings.phyBytes);
    Ptr<SwitchMmu> mmu = m_mmuFactory.Create<SwitchMmu>();
    Ptr<RedEcnMarker> marker =
        leafSpine && settings.ecn ? m_markerFactory.Create<RedEcnMarker>() : nullptr;
    sw->Setup(node,
              desc,
              ports,
              links,
              settings.pool,
              mmu,
              marker,
              leafSpine ? settings.buffer : settings.hostBuffer,
              leafSpine ? settings.pfc : true,
              leafSpine && settings.stampInt,
              settings.maxFrame);
    // one random stream per switch and seed; seed 1 keeps the node id as stream
    uint64_t stream =
        static_cast<uint64_t>(node) + ((static_cast<uint64_t>(settings.seed) - 1) << 32);
    if (marker)
    {
        marker->SetStream(stream);
    }
    if (leafSpine && settings.balance)
    {
        sw->SetLoadBalancer(m_lbFactory.Create<LoadBalancer>(), stream);
    }
    return sw;
}

} // namespace ns3
