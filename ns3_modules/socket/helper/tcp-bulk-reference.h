/*
 * HeteroSim: the goodput of one bulk TCP flow on ns-3's stock devices, as a reference.
 */
#ifndef HETEROSIM_TCP_BULK_REFERENCE_H
#define HETEROSIM_TCP_BULK_REFERENCE_H

#include "ns3/address.h"
#include "ns3/application-container.h"
#include "ns3/attribute.h"
#include "ns3/data-rate.h"
#include "ns3/node-container.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/packet.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ns3
{

/**
 * \brief One bulk TCP transfer between two hosts joined through one router by ns-3's own
 * PointToPointNetDevices (no HeteroSim code on the data path): BulkSendApplication ->
 * PacketSink, ns-3's TCP with the given congestion control, segment size and buffers,
 * DropTail device queues of QueuePackets packets and no queue disc.
 *
 * With Bidirectional, a second transfer runs the other way at the same time (the load of a
 * 2-rank all-reduce: each direction also carries the other's ACKs).
 *
 * It is the reference that the socket transport's collectives are checked against: what ns-3's
 * TCP reaches for a bulk flow on a link of the same rate and delay. Point-to-point frames carry
 * a 2-byte PPP header instead of Ethernet's 18 bytes + 20 bytes of preamble and gap, so callers
 * comparing with the fabric scale by the framing ratio (GetFramingRatio()).
 */
class TcpBulkReference : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    TcpBulkReference();
    ~TcpBulkReference() override;

    /**
     * \brief Build the three nodes, run the transfer to its end on a fresh simulator and
     * destroy the simulator again.
     * \return false if the congestion control names no TcpCongestionOps or the transfer did
     * not finish within StopTime
     */
    bool Run();

    /** \return time from the first SYN to the last payload byte received, ns */
    int64_t GetTransferNs() const;
    /** \return payload bytes received (both directions when Bidirectional) */
    uint64_t GetBytesReceived() const;
    /** \return goodput per direction: payload bits per second over the transfer */
    double GetGoodputBps() const;
    /** \return largest congestion window of the sender, bytes */
    uint32_t GetMaxCwnd() const;
    /** \return segments retransmitted by the sender */
    uint64_t GetRetransmits() const;
    /** \return (segment + 52 + 2) / (segment + 52 + 38): PPP over Ethernet+PHY bytes per segment */
    double GetFramingRatio() const;

  private:
    /** Socket defaults by full attribute name ("ns3::TcpSocket::SegmentSize"), as set before. */
    using SocketDefaults = std::vector<std::pair<std::string, Ptr<const AttributeValue>>>;

    /**
     * Create the three nodes and the two links, install IPv4 with no queue disc, route, and make
     * \p cc every node's congestion control. \return the nodes (sender, router, receiver)
     */
    NodeContainer BuildNetwork(TypeId cc) const;
    /** Set this run's TCP socket defaults. \return the defaults they replaced */
    SocketDefaults SetSocketDefaults() const;
    /** Put back the socket defaults that SetSocketDefaults() replaced. */
    static void RestoreSocketDefaults(const SocketDefaults& previous);
    /** Install a sink and a bulk sender per direction, started at 0. \return the senders */
    std::vector<ApplicationContainer> InstallTransfers(const NodeContainer& nodes);
    /** Connect the window and retransmission traces of the senders' sockets (once open). */
    void ConnectSenderTraces(const std::vector<ApplicationContainer>& senders);
    /** Sink received a packet. */
    void Received(Ptr<const Packet> packet, const Address& from);
    /** Sender's congestion window changed. */
    void Cwnd(uint32_t oldCwnd, uint32_t newCwnd);

    DataRate m_rate;         //!< link rate
    Time m_delay;            //!< per-link propagation delay
    uint64_t m_bytes;        //!< bytes to send
    std::string m_tcpType;   //!< congestion control
    uint32_t m_segment;      //!< TCP segment size
    uint32_t m_sndBuf;       //!< send buffer
    uint32_t m_rcvBuf;       //!< receive buffer
    uint32_t m_initialCwnd;  //!< initial window
    Time m_minRto;           //!< minimum RTO
    uint32_t m_queuePackets; //!< device queue length
    bool m_bidirectional;    //!< a second flow the other way
    Time m_stop;             //!< give up after

    uint64_t m_received{0};    //!< bytes received
    int64_t m_lastRxNs{-1};    //!< time of the last byte
    uint32_t m_maxCwnd{0};     //!< largest window
    uint64_t m_retransmits{0}; //!< retransmissions
};

} // namespace ns3

#endif /* HETEROSIM_TCP_BULK_REFERENCE_H */
