/*
 * HeteroSim: the IPv4 interface of a socket-transport host on the RDMA fabric.
 */
#include "fabric-ip-device.h"

#include "ns3/channel.h"
#include "ns3/ipv4-l3-protocol.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("FabricIpDevice");
NS_OBJECT_ENSURE_REGISTERED(FabricIpDevice);

TypeId
FabricIpDevice::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::FabricIpDevice")
            .SetParent<NetDevice>()
            .SetGroupName("Heterosim")
            .AddConstructor<FabricIpDevice>()
            .AddAttribute("Mtu",
                          "IP MTU of the interface, bytes (Ethernet payload)",
                          UintegerValue(1500),
                          MakeUintegerAccessor(&FabricIpDevice::m_mtu),
                          MakeUintegerChecker<uint16_t>(576, 9000))
            .AddTraceSource("Tx",
                            "An IPv4 packet handed to the fabric",
                            MakeTraceSourceAccessor(&FabricIpDevice::m_txTrace),
                            "ns3::Packet::TracedCallback")
            .AddTraceSource("Drop",
                            "An IPv4 packet refused because the NIC's transmit queue was full",
                            MakeTraceSourceAccessor(&FabricIpDevice::m_dropTrace),
                            "ns3::Packet::TracedCallback")
            .AddTraceSource("Rx",
                            "An IPv4 packet delivered up the stack",
                            MakeTraceSourceAccessor(&FabricIpDevice::m_rxTrace),
                            "ns3::Packet::TracedCallback");
    return tid;
}

FabricIpDevice::FabricIpDevice()
    : m_address(Mac48Address::Allocate())
{
    NS_LOG_FUNCTION(this);
}

FabricIpDevice::~FabricIpDevice()
{
    NS_LOG_FUNCTION(this);
}

void
FabricIpDevice::SetTransmitCallback(TransmitCallback cb)
{
    m_transmit = cb;
}

void
FabricIpDevice::Receive(Ptr<Packet> packet)
{
    NS_LOG_FUNCTION(this << packet);
    m_rxTrace(packet);
    if (!m_rx.IsNull())
    {
        m_rx(this, packet, Ipv4L3Protocol::PROT_NUMBER, m_address);
    }
}

uint32_t
FabricIpDevice::GetTopologyNode() const
{
    return m_topologyNode;
}

void
FabricIpDevice::SetTopologyNode(uint32_t node)
{
    m_topologyNode = node;
}

void
FabricIpDevice::SetIfIndex(const uint32_t index)
{
    m_ifIndex = index;
}

uint32_t
FabricIpDevice::GetIfIndex() const
{
    return m_ifIndex;
}

Ptr<Channel>
FabricIpDevice::GetChannel() const
{
    return nullptr;
}

void
FabricIpDevice::SetAddress(Address address)
{
    m_address = Mac48Address::ConvertFrom(address);
}

Address
FabricIpDevice::GetAddress() const
{
    return m_address;
}

bool
FabricIpDevice::SetMtu(const uint16_t mtu)
{
    m_mtu = mtu;
    return true;
}

uint16_t
FabricIpDevice::GetMtu() const
{
    return m_mtu;
}

bool
FabricIpDevice::IsLinkUp() const
{
    return true;
}

void
FabricIpDevice::AddLinkChangeCallback(Callback<void> callback)
{
}

bool
FabricIpDevice::IsBroadcast() const
{
    return true;
}

Address
FabricIpDevice::GetBroadcast() const
{
    return Mac48Address::GetBroadcast();
}

bool
FabricIpDevice::IsMulticast() const
{
    return false;
}

Address
FabricIpDevice::GetMulticast(Ipv4Address multicastGroup) const
{
    return Mac48Address::GetMulticast(multicastGroup);
}

Address
FabricIpDevice::GetMulticast(Ipv6Address addr) const
{
    return Mac48Address::GetMulticast(addr);
}

bool
FabricIpDevice::IsBridge() const
{
    return false;
}

bool
FabricIpDevice::IsPointToPoint() const
{
    return false;
}

bool
FabricIpDevice::Send(Ptr<Packet> packet, const Address& dest, uint16_t protocolNumber)
{
    NS_LOG_FUNCTION(this << packet << protocolNumber);
    if (protocolNumber != Ipv4L3Protocol::PROT_NUMBER || m_transmit.IsNull())
    {
        m_dropTrace(packet);
        return false;
    }
    if (!m_transmit(this, packet))
    {
        m_dropTrace(packet);
        return false;
    }
    m_txTrace(packet);
    return true;
}

bool
FabricIpDevice::SendFrom(Ptr<Packet> packet,
                         const Address& source,
                         const Address& dest,
                         uint16_t protocolNumber)
{
    return Send(packet, dest, protocolNumber);
}

Ptr<Node>
FabricIpDevice::GetNode() const
{
    return m_node;
}

void
FabricIpDevice::SetNode(Ptr<Node> node)
{
    m_node = node;
}

bool
FabricIpDevice::NeedsArp() const
{
    return false;
}

void
FabricIpDevice::SetReceiveCallback(NetDevice::ReceiveCallback cb)
{
    m_rx = cb;
}

void
FabricIpDevice::SetPromiscReceiveCallback(NetDevice::PromiscReceiveCallback cb)
{
}

bool
FabricIpDevice::SupportsSendFrom() const
{
    return false;
}

void
FabricIpDevice::DoDispose()
{
    m_node = nullptr;
    m_transmit = TransmitCallback();
    m_rx = NetDevice::ReceiveCallback();
    NetDevice::DoDispose();
}

} // namespace ns3
