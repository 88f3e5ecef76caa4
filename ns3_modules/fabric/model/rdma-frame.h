/*
 * HeteroSim: the frame descriptor carried by the packet-level RDMA network.
 */
#ifndef HETEROSIM_RDMA_FRAME_H
#define HETEROSIM_RDMA_FRAME_H

#include <cstdint>

namespace ns3
{

/**
 * \brief One INT (in-band network telemetry) hop record, pushed by a switch egress at dequeue
 * for HPCC.
 */
struct IntHop
{
    uint64_t rateBps;   //!< line rate of the egress port, bit/s
    int64_t tsNs;       //!< dequeue time, ns
    uint64_t txBytes;   //!< cumulative bytes sent by the port (wire bytes)
    uint32_t qlenBytes; //!< egress queue length of the port when the frame left, bytes
};

/**
 * \brief A frame on the wire of the RDMA fabric: RoCEv2 data, ACK, NACK, CNP or a PFC frame.
 *
 * Frames are plain descriptors owned by an RdmaFramePool and recycled, so that the hot path
 * allocates nothing. Header bytes are not serialised; \c wireBytes holds the exact number of
 * bytes the frame occupies on the link (see RdmaNic for what is counted), which drives
 * serialisation time and buffer accounting. Queues link frames through \c next.
 */
struct RdmaFrame
{
    /** Frame kinds. */
    enum Type : uint8_t
    {
        DATA = 0,    //!< RoCEv2 payload packet (BTH, payload)
        ACK = 1,     //!< acknowledgement (BTH + AETH), cumulative
        NACK = 2,    //!< negative acknowledgement: go back to \c seq (IRN: a selective ack)
        CNP = 3,     //!< congestion notification packet (DCQCN)
        PFC = 4,     //!< IEEE 802.1Qbb priority flow control frame
        IP = 5,      //!< an IPv4 packet of a socket-transport host (\c seq keys the ns3::Packet)
        REQUEST = 6, //!< RCCC: sender to receiver, the bytes posted (\c seq) it needs credit for
        CREDIT = 7   //!< RCCC: receiver to sender, credit up to byte \c seq (cumulative)
    };

    /** \return whether switches queue, account and mark this frame as data (DATA or IP) */
    bool
    IsData() const
    {
        return type == DATA || type == IP;
    }

    static constexpr uint8_t MAX_INT_HOPS = 5; //!< INT stack depth (as in HPCC)

    RdmaFrame* next;           //!< intrusive queue link
    uint64_t seq;              //!< DATA: first payload byte; ACK/NACK: next expected byte
    int64_t tsNs;              //!< DATA: send time (echoed in ACKs for RTT), ns
    uint64_t sack;             //!< NACK of an IRN receiver: first byte of the packet received
    uint32_t flow;             //!< internal flow slot of the queue pair
    uint32_t dst;              //!< destination node (routing key)
    uint32_t hash;             //!< ECMP hash of the flow / its reverse direction
    uint32_t wireBytes;        //!< bytes on the wire, all counted overheads included
    uint32_t payload;          //!< DATA: payload bytes; IRN NACK: bytes selectively acked
    uint16_t inPort;           //!< port on which the frame entered the current node
    uint16_t pfcQuanta;        //!< PFC: pause time in 512-bit quanta (0 = resume)
    uint8_t type;              //!< one of Type
    uint8_t priority;          //!< traffic class 0..7 (PFC: the priority paused/resumed)
    uint8_t hop;               //!< hops taken on the current route segment (ECMP input)
    uint8_t ce;                //!< DATA: ECN congestion experienced; ACK: ECN echo
    uint8_t nHops;             //!< number of INT records in \c hops
    uint8_t last;              //!< DATA: last packet of the message
    uint8_t trimmed;           //!< DATA: payload cut off by a switch (header only, RdmaSwitch
                               //!< Trimming); NACK: the packet at \c sack arrived trimmed
    IntHop hops[MAX_INT_HOPS]; //!< INT records (HPCC)
};

} // namespace ns3

#endif /* HETEROSIM_RDMA_FRAME_H */
