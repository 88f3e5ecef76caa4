/*
 * HeteroSim: the IPv4 interface of a socket-transport host on the RDMA fabric.
 */
#ifndef HETEROSIM_FABRIC_IP_DEVICE_H
#define HETEROSIM_FABRIC_IP_DEVICE_H

#include "ns3/callback.h"
#include "ns3/mac48-address.h"
#include "ns3/net-device.h"
#include "ns3/node.h"
#include "ns3/packet.h"
#include "ns3/traced-callback.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief A NetDevice that hands IPv4 packets of ns-3's internet stack to the fabric of the
 * packet network and delivers the ones that arrive back up the stack.
 *
 * It has no wire of its own: Send() calls the transmit hook (SocketTransport), which wraps the
 * packet into an RdmaFrame and queues it on the NIC's QbbNetDevice port, so that TCP traffic
 * shares that port, the switches, their buffers and ECN markers with the RDMA traffic of the
 * fabric. Receive() is called by SocketTransport when an IP frame reaches this host's NIC.
 * No ARP: the destination is read from the IPv4 header (the fabric forwards by destination
 * host, as an L3 fabric does). Send() returns false when the transmit hook refuses the packet
 * (the NIC's transmit queue is full), which ns-3's traffic-control layer counts as a drop.
 */
class FabricIpDevice : public NetDevice
{
  public:
    /** Transmit hook: (this device, IPv4 packet with its header) -> accepted. */
    typedef Callback<bool, Ptr<FabricIpDevice>, Ptr<Packet>> TransmitCallback;

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    FabricIpDevice();
    ~FabricIpDevice() override;

    /**
     * \brief Set the transmit hook.
     * \param cb the hook
     */
    void SetTransmitCallback(TransmitCallback cb);

    /**
     * \brief Deliver an IPv4 packet that arrived from the fabric up the stack.
     * \param packet the packet, IPv4 header first
     */
    void Receive(Ptr<Packet> packet);

    /** \return topology node of the NIC this device belongs to */
    uint32_t GetTopologyNode() const;
    /** \param node topology node of the NIC */
    void SetTopologyNode(uint32_t node);

    // NetDevice interface
    void SetIfIndex(const uint32_t index) override;
    uint32_t GetIfIndex() const override;
    Ptr<Channel> GetChannel() const override;
    void SetAddress(Address address) override;
    Address GetAddress() const override;
    bool SetMtu(const uint16_t mtu) override;
    uint16_t GetMtu() const override;
    bool IsLinkUp() const override;
    void AddLinkChangeCallback(Callback<void> callback) override;
    bool IsBroadcast() const override;
    Address GetBroadcast() const override;
    bool IsMulticast() const override;
    Address GetMulticast(Ipv4Address multicastGroup) const override;
    Address GetMulticast(Ipv6Address addr) const override;
    bool IsBridge() const override;
    bool IsPointToPoint() const override;
    bool Send(Ptr<Packet> packet, const Address& dest, uint16_t protocolNumber) override;
    bool SendFrom(Ptr<Packet> packet,
                  const Address& source,
                  const Address& dest,
                  uint16_t protocolNumber) override;
    Ptr<Node> GetNode() const override;
    void SetNode(Ptr<Node> node) override;
    bool NeedsArp() const override;
    void SetReceiveCallback(NetDevice::ReceiveCallback cb) override;
    void SetPromiscReceiveCallback(NetDevice::PromiscReceiveCallback cb) override;
    bool SupportsSendFrom() const override;

  protected:
    void DoDispose() override;

  private:
    Ptr<Node> m_node;                              //!< owning node
    uint32_t m_ifIndex{0};                         //!< interface index
    uint32_t m_topologyNode{0};                    //!< NIC node in the topology
    Mac48Address m_address;                        //!< unused MAC address
    uint16_t m_mtu;                                //!< IP MTU, bytes
    TransmitCallback m_transmit;                   //!< to the fabric
    NetDevice::ReceiveCallback m_rx;               //!< up the stack
    TracedCallback<Ptr<const Packet>> m_txTrace;   //!< packet handed to the fabric
    TracedCallback<Ptr<const Packet>> m_dropTrace; //!< packet refused (transmit queue full)
    TracedCallback<Ptr<const Packet>> m_rxTrace;   //!< packet delivered up the stack
};

} // namespace ns3

#endif /* HETEROSIM_FABRIC_IP_DEVICE_H */
