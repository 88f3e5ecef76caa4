/*
 * HeteroSim: state of one RDMA queue pair (one flow), sender and receiver side.
 */
#ifndef HETEROSIM_RDMA_QUEUE_PAIR_H
#define HETEROSIM_RDMA_QUEUE_PAIR_H

#include "rdma-congestion-control.h"

#include "ns3/event-id.h"
#include "ns3/ptr.h"

#include <cstdint>
#include <deque>
#include <map>
#include <utility>

namespace ns3
{

/**
 * \brief One reliable-connection queue pair carrying one or more messages, in order, from a
 * source endpoint to a destination endpoint.
 *
 * A queue pair opened for a single flow carries one message. One opened for a connection
 * (PacketNetwork::StartFlowOnConnection) carries every message posted on the connection while
 * it is open: message k occupies bytes [end(k-1), end(k)) of the queue pair's byte stream, no
 * packet spans two messages, the sender may send only bytes already posted, and the receiver
 * completes each message when its last byte arrives in order. Congestion-control state is the
 * queue pair's, shared by its messages.
 *
 * The sender fields are used by the source endpoint's RdmaNic, the receiver fields by the
 * destination's; both halves live in one record indexed by the flow slot carried in frames.
 */
class RdmaQueuePair
{
  public:
    /** \return whether every byte has been acknowledged */
    bool
    IsFinished() const
    {
        return sndUna >= size;
    }

    /** \return bytes sent and not yet acknowledged */
    uint64_t
    InFlight() const
    {
        return sndNxt - sndUna;
    }

    // identity
    uint32_t flowId{0};  //!< caller's flow id
    uint32_t slot{0};    //!< index in the network's queue-pair table
    uint32_t srcNode{0}; //!< sending endpoint node (NIC or GPU)
    uint32_t dstNode{0}; //!< receiving endpoint node
    uint32_t hash{0};    //!< ECMP hash of data packets
    uint32_t ackHash{0}; //!< ECMP hash of ACK/NACK/CNP
    uint8_t priority{3}; //!< traffic class
    uint32_t srcPort{0}; //!< egress port at the sender
    uint32_t dstPort{0}; //!< egress port at the receiver (for ACKs)
    uint64_t size{0};    //!< bytes of every message posted so far (end of the byte stream)
    uint64_t posted{0};  //!< bytes the sender may send (posted after the host-side latency)
    std::deque<uint64_t> sendEnds; //!< end offsets of messages not yet fully acknowledged
    std::deque<std::pair<uint64_t, uint32_t>> recvEnds; //!< (end offset, flow id) not delivered
    int64_t srcDelayNs{0}; //!< host-side latency before posted bytes reach the NIC

    // sender
    uint64_t sndNxt{0};            //!< next byte to send
    uint64_t sndUna{0};            //!< first unacknowledged byte
    uint64_t maxSent{0};           //!< highest byte sent + 1
    int64_t nextAvailNs{0};        //!< pacing: earliest next send
    int64_t lastTxNs{0};           //!< start time of the last send
    uint32_t lastTxBytes{0};       //!< wire bytes of the last send
    double paceCarry{0};           //!< sub-ns pacing remainder
    double lineRate{0};            //!< maximum rate, bit/s
    double portRate{0};            //!< egress port rate, bit/s
    Ptr<RdmaCongestionControl> cc; //!< rate controller
    int64_t lastProgressNs{0};     //!< last ACK progress (RTO)
    EventId rtoEvent;              //!< retransmission timer
    bool active{false};            //!< in the sender's scheduling list
    int64_t startNs{-1};           //!< first packet eligible
    int64_t senderDoneNs{-1};      //!< all bytes acknowledged

    // receiver
    uint64_t rcvNxt{0};        //!< next byte expected
    uint32_t pktsSinceAck{0};  //!< in-order packets not yet acknowledged
    bool ceSinceAck{false};    //!< CE seen since the last ACK
    int64_t lastCnpNs{-1};     //!< last CNP sent
    int64_t lastNackNs{-1};    //!< last NACK sent
    uint64_t lastNackSeq{0};   //!< its sequence
    bool delivered{false};     //!< every posted message arrived in order
    int64_t deliverDelayNs{0}; //!< destination host latency added after delivery

    // statistics
    uint64_t retransmits{0}; //!< data packets sent again
    uint64_t timeouts{0};    //!< retransmission timeouts
    uint64_t nacks{0};       //!< NACKs received
    uint64_t cnps{0};        //!< CNPs received
    uint64_t ffBytes{0};     //!< bytes carried by steady-state fast-forward (PacketFastForward)

    // receiver, out of order (RdmaNic Transport=irn keeps the packets; both count them)
    std::map<uint64_t, uint64_t> oooRecv; //!< [start, end) received above rcvNxt (irn)
    uint64_t oooPackets{0};               //!< data packets that arrived ahead of rcvNxt
    uint32_t maxReorderDepth{0};          //!< largest lead of such a packet, MTU packets

    // sender, selective retransmission (RdmaNic Transport=irn)
    std::map<uint64_t, uint64_t> sacked; //!< selectively acknowledged [start, end) above sndUna
    uint64_t sackHigh{0};                //!< highest selectively acknowledged byte + 1
    bool recovery{false};                //!< retransmitting the holes below recoverEnd
    bool rtoRecovery{false};             //!< recovery entered by a timeout: every hole is lost
    uint64_t recoverEnd{0};              //!< sndNxt when recovery began
    uint64_t rtxNext{0};                 //!< next byte the recovery may retransmit
    uint64_t sackedBytes{0};             //!< bytes of the ranges in \c sacked

    // sender, UET (RdmaNic Transport=uet)
    uint32_t entropy{0};     //!< entropy value of the next data packet
    uint64_t ccAcked{0};     //!< bytes acknowledged (cumulatively or selectively) told to the CC
    uint64_t reorderSeen{0}; //!< largest reordering seen: bytes acked beyond a late packet
    std::map<uint64_t, int64_t> rtxTimes;  //!< first byte of a resent packet -> when, ns
    std::map<uint64_t, uint64_t> trimLost; //!< [start, end) of trimmed packets not yet resent

    // RCCC credit (Rccc): the sender may send new data below creditLimit; the receiver's
    // RcccPacer grants credit up to creditWant (the backlog REQUEST frames announced)
    bool credited{false};      //!< sender: new data needs credit
    uint64_t creditLimit{0};   //!< sender: end of the credited bytes (initial credit + grants)
    uint64_t creditAsked{0};   //!< sender: backlog last announced in a REQUEST
    uint64_t creditWant{0};    //!< receiver: backlog announced by the sender
    uint64_t creditEnd{0};     //!< receiver: end of the bytes credited so far
    bool creditOwed{false};    //!< receiver: in its pacer's list
    bool creditTracked{false}; //!< receiver: its pacer counts this queue pair's arrivals
    uint64_t creditRcvd{0};    //!< receiver: payload bytes of data packets received
    uint64_t trimNacks{0};     //!< NACKs of trimmed packets received
};

} // namespace ns3

#endif /* HETEROSIM_RDMA_QUEUE_PAIR_H */
