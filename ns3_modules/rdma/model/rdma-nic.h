/*
 * HeteroSim: RDMA (RoCEv2) endpoint: queue-pair scheduler, transport and NP of a NIC or GPU.
 */
#ifndef HETEROSIM_RDMA_NIC_H
#define HETEROSIM_RDMA_NIC_H

#include "rccc-pacer.h"
#include "rdma-queue-pair.h"

#include "ns3/callback.h"
#include "ns3/event-id.h"
#include "ns3/frame-handler.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/qbb-net-device.h"
#include "ns3/rdma-frame-pool.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace ns3
{

/**
 * \brief Wire sizes of the RoCEv2 frames, bytes.
 *
 * Counted: Ethernet header 14 + FCS 4, IPv4 20, UDP 8, BTH 12, ICRC 4 (= 62 per data packet);
 * ACK/NACK add AETH 4 (66); CNP carries 16 reserved bytes (78); HPCC adds a 42-byte INT stack
 * to data and ACK frames; the 8-byte preamble/SFD and 12-byte inter-frame gap (20) are added
 * to every frame when the physical-layer overhead is counted (the default). No 802.1Q tag.
 */
struct RdmaFrameSizes
{
    uint32_t dataHeader{82}; //!< bytes added to each data payload
    uint32_t ack{86};        //!< ACK/NACK frame bytes
    uint32_t cnp{98};        //!< CNP frame bytes
    uint32_t intBytes{0};    //!< INT stack bytes added to data and ACK frames
};

/**
 * \brief RDMA transport of one endpoint node: NICs for traffic between hosts, GPUs for
 * traffic inside a host (GPU copy engines over NVLink/PCIe use the same reliable transport
 * without congestion control; their links are lossless).
 *
 * Sender: one queue pair per flow, or per connection carrying its messages in order
 * (RdmaQueuePair); on each port the queue pairs that have data, whose
 * priority is not paused, whose window (if any) is open and whose pacing time has come are
 * served round-robin, one MTU-sized packet at a time. Pacing: after a packet of L wire bytes
 * at rate R the queue pair waits L*8/R (a rate change re-times the pending gap); a queue pair
 * at (or above) the port's rate is not paced. Loss recovery is go-back-N on NACK and on the
 * retransmission timeout (no ACK progress for Rto while data is outstanding; a timer that
 * expires while the queue pair's priority is paused by PFC at its NIC restarts instead, and
 * the default Rto, in the ms range like ConnectX's local ACK timeout, exceeds the queueing
 * delay a lossless fabric can build, so a network without drops never retransmits; with PFC
 * off the fabric queues are bounded by the buffers and RtoLossy applies).
 *
 * Receiver: in-order data advances the expected sequence and is acknowledged every
 * AckInterval packets and on the last packet; out-of-order data triggers a NACK for the
 * expected byte (at most one per NackInterval for the same byte); duplicates are discarded.
 * NP (DCQCN): a CE-marked arrival triggers a CNP unless one was sent for that queue pair in
 * the last CnpInterval (Mellanox min_time_between_cnps, 4 us, matching the RP's Mellanox
 * timers). ACK, NACK and CNP frames use the device's strict control queue, which PFC never
 * pauses and switches never mark, so feedback is not stuck behind the congestion it reports. ACKs
 * echo ECN (DCTCP), the send time (TIMELY) and INT records (HPCC). The receive buffer is unlimited
 * (the NIC never sends PFC).
 *
 * Transport=irn replaces go-back-N by IRN's loss recovery (Mittal et al., "Revisiting Network
 * Support for RDMA", SIGCOMM 2018, sec. 3.1): the receiver keeps out-of-order packets (a set
 * of received byte ranges above the expected byte, standing for IRN's bitmap) and answers each
 * with a NACK that carries the cumulative acknowledgement and the packet it received (a
 * selective acknowledgement); the sender records the selectively acknowledged ranges and, in
 * recovery, retransmits only the holes below them, before new data; recovery ends when the
 * cumulative acknowledgement passes the highest byte sent when it began. A hole counts as
 * lost once data at least SackReorderThreshold packets beyond its start has been selectively
 * acknowledged (1: IRN as published; higher values tolerate the reordering of packet
 * spraying, as TCP's duplicate-ACK threshold of 3 does, RFC 5681). A timeout retransmits
 * every hole below the highest byte sent (IRN's RTO recovery). Messages still complete only
 * when their last byte arrived in order (delivery to the application stays in order).
 * APPROXIMATION: IRN's BDP-FC (a cap of one bandwidth-delay product of packets in flight) is
 * not modelled; the congestion control's window, if any, caps what is in flight.
 *
 * Transport=uet models the packet delivery of the Ultra Ethernet transport (UET 1.0: Ultra
 * Ethernet Consortium, "Ultra Ethernet Specification 1.0", June 2025, packet delivery
 * sublayer; Hoefler et al., arXiv 2508.08906, 2025, sec. 2) on a lossy fabric: every data packet
 * carries an entropy value chosen by the sender, cycling over UetEntropies values per queue
 * pair (oblivious spraying, as the UEC reference simulator's default: htsim uec.cpp,
 * nextEntropy_oblivious), and the ECMP hash of the switches covers it (UET puts it in the UDP
 * source port), so ECMP switches spray a UET flow's packets over the equal-cost paths with no
 * load balancer; retransmissions take the next entropy as well. Delivery is out of order with
 * selective acknowledgement, by IRN's receiver and sender machinery above (every packet
 * acknowledged; a NACK frame is the selective ACK). A hole counts as lost once data one
 * congestion window beyond it, and at least UetMinReorderPackets packets, has been selectively
 * acknowledged (the reference simulator's fast loss recovery threshold, htsim uec.cpp
 * fastLossRecovery), and beyond the largest reordering the queue pair has seen (bytes
 * acknowledged beyond a packet that then arrived, outside resent ranges; Linux TCP adapts its
 * reordering degree the same way, and RFC 8985 sec. 6.2 RACK's reordering window), so the
 * reordering of spraying is not taken for loss. The congestion
 * control hears every acknowledgement, selective ones included, with the bytes it newly
 * acknowledged cumulatively or selectively (UET's rcvd_bytes) and the RTT of the packet it
 * acknowledges, and every resent packet (ReceiveLoss); its window limits the bytes in flight
 * not selectively acknowledged, and a lost hole may be resent whatever the window.
 * UetTrimming (set when the switches trim, RdmaSwitch Trimming) adds UET's trimmed-packet
 * loss signal: a receiver that gets a data packet cut to its header answers it at once with a
 * NACK naming that packet (UET 1.0's NACK of a trimmed packet; the NDP receiver's NACK of a
 * header, Handley et al., SIGCOMM 2017), and the sender resends that packet next, ahead of new
 * data and whatever the window; the congestion control hears the resend as a loss
 * (ReceiveLoss, as the reference simulator's NSCC hears a NACK: htsim uec.cpp). The NACK of a
 * trimmed packet carries no RTT sample (its header skipped the data queues). With trimming every
 * drop at a switch is signalled, so reordering is never taken for loss (NDP sprays per packet on
 * this ground): only trimmed packets are resent, and the timeout (RtoLossy) still recovers what
 * a link loses. A trimmed copy of data already received is ignored; a trimmed frame reaching a
 * NIC without UetTrimming is discarded, as a drop.
 * A congestion control that uses credit (Rccc, UET's RCCC) holds new data back until the
 * receiver's RcccPacer has granted it (RdmaQueuePair::creditLimit): the sender asks with a
 * REQUEST frame carrying the bytes posted, the receiver answers with cumulative CREDIT frames
 * (both in the control queue); resends need no credit, and the UET loss threshold counts the
 * initial credit as the window of such a windowless sender. A sender left without credit and
 * without data in flight for a retransmission timeout asks again, and the receiver answers a
 * repeated request with the credit it granted (a lost REQUEST or CREDIT frame).
 * APPROXIMATION: one PDC per queue pair, no ACK coalescing, RCCC without NSCC; without
 * trimming, losses are found by the reorder threshold and the timeout only.
 *
 * Reordering is measured at every receiver, in every transport: a data packet that arrives
 * ahead of the expected byte counts as out of order, and its lead over the expected byte in
 * MTU packets is its reorder depth (trace source Reorder; RdmaQueuePair::oooPackets and
 * maxReorderDepth). After a loss, the packets that follow count as well.
 */
class RdmaNic : public Object, public FrameHandler
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    /** Loss recovery of the transport. */
    enum Transport
    {
        ROCE = 0, //!< go-back-N (RoCEv2 as ConnectX runs it)
        IRN = 1,  //!< selective acknowledgement and retransmission (IRN)
        UET = 2,  //!< UET packet delivery: per-packet entropy, selective ack (lossy fabric)
    };

    RdmaNic();
    ~RdmaNic() override;

    /**
     * \brief Wire the endpoint up.
     * \param nodeId topology node id
     * \param ports devices, in port order
     * \param pool frame allocator
     * \param qps the network's queue-pair table (indexed by flow slot)
     * \param sizes frame sizes
     * \param mtu payload bytes per packet
     */
    void Setup(uint32_t nodeId,
               const std::vector<Ptr<QbbNetDevice>>& ports,
               RdmaFramePool* pool,
               const std::vector<std::unique_ptr<RdmaQueuePair>>* qps,
               const RdmaFrameSizes& sizes,
               uint32_t mtu);

    /**
     * \brief Tell the endpoint whether the fabric is lossless (PFC on): selects Rto (lossless,
     * the default) or RtoLossy.
     * \param lossless whether switches pause instead of dropping
     */
    void SetLossless(bool lossless);

    /**
     * \brief Set the hook called when a message's last byte arrived in order at this receiver.
     * \param cb callback(queue-pair slot, flow id of the message)
     */
    void SetDeliveredCallback(Callback<void, uint32_t, uint32_t> cb);

    /**
     * \brief Set the hook that takes IP frames (socket-transport hosts, see SocketTransport);
     * the frame is freed by this endpoint after the hook returns.
     * \param cb callback(frame, endpoint node id)
     */
    void SetIpReceiveCallback(Callback<void, const RdmaFrame*, uint32_t> cb);

    /**
     * \brief Start sending a queue pair from this endpoint.
     * \param slot flow slot in the queue-pair table
     */
    void StartQueuePair(uint32_t slot);

    /**
     * \brief Let the sender of a queue pair send up to byte \p end (a message posted on it).
     * \param slot queue-pair slot
     * \param end new end of the sendable bytes
     * \param ffAt the queue pair's fast-forwarded bytes when \p end was taken (bytes the
     * fast-forward removed from the stream since then move \p end back by as much)
     */
    void Post(uint32_t slot, uint64_t end, uint64_t ffAt);

    void HandleFrame(RdmaFrame* frame, uint32_t port) override;
    RdmaFrame* PullFrame(uint32_t port) override;

    /**
     * \brief Steady-state fast-forward: the endpoint's pending pacing wake-ups and their
     * times move \p deltaNs later (see PacketFastForward).
     * \param deltaNs shift, ns
     * \param moved receives the events to shift in the event queue
     * \param acks ACKs the receivers sent during the skipped interval (counted)
     * \param cnps CNPs the receivers sent during the skipped interval (counted)
     */
    void ShiftClock(int64_t deltaNs,
                    std::vector<const EventImpl*>* moved,
                    uint64_t acks,
                    uint64_t cnps);

    /** \return CNPs sent by this endpoint's NP */
    uint64_t GetCnpsSent() const;
    /** \return ACKs sent */
    uint64_t GetAcksSent() const;
    /** \return NACKs sent */
    uint64_t GetNacksSent() const;
    /** \return the transport's loss recovery */
    Transport GetTransport() const;

  protected:
    void DoDispose() override;

  private:
    /** Receiver side of a data frame. */
    void ReceiveData(RdmaFrame* frame);
    /** Receiver: a data frame carrying the expected byte. */
    void ReceiveInOrder(RdmaQueuePair* qp, const RdmaFrame* f);
    /** IRN sender: drop selective acknowledgements below sndUna; end recovery past its end. */
    static void AdvanceSelective(RdmaQueuePair* qp);
    /** Sender side of an ACK or NACK. */
    void ReceiveAck(RdmaFrame* frame);
    /** Queue an ACK/NACK/CNP for \p qp. */
    void SendControl(RdmaQueuePair* qp, uint8_t type, uint64_t seq, bool ce, const RdmaFrame* data);
    /** Build the next data packet of \p qp. */
    RdmaFrame* MakeData(RdmaQueuePair* qp);
    /**
     * \param qp a queue pair
     * \param seq a byte sequence number
     * \param fallback returned when no posted message ends after \p seq
     * \return the end of the message \p seq is in (a packet never spans two messages)
     */
    uint64_t MessageEnd(const RdmaQueuePair* qp, uint64_t seq, uint64_t fallback) const;
    /**
     * \brief When \p qp may send again after a packet of \p wireBytes at \p nowNs: at once at
     * line rate, else after the packet's time at the congestion control's rate (the fraction of
     * a ns carried to the next packet).
     */
    void PaceAfter(RdmaQueuePair* qp, uint32_t wireBytes, int64_t nowNs) const;
    /** Retransmission timer of \p slot. */
    void RetransmitTimeout(uint32_t slot);
    /** Go back to the first unacknowledged byte. */
    void GoBack(RdmaQueuePair* qp);
    /** Loss recovery of \p qp after a NACK or (\p timeout) a retransmission timeout. */
    void Recover(RdmaQueuePair* qp, bool timeout);
    /** IRN receiver: keep an out-of-order packet and selectively acknowledge it. */
    void ReceiveOutOfOrder(RdmaQueuePair* qp, const RdmaFrame* f);
    /** IRN receiver: advance the expected byte over the ranges received beyond it. */
    static void AbsorbOutOfOrder(RdmaQueuePair* qp);
    /** IRN sender: record a selective acknowledgement of [seq, seq + bytes). */
    static void AddSack(RdmaQueuePair* qp, uint64_t seq, uint64_t bytes);
    /** UET receiver: answer a data packet trimmed to its header with a NACK naming it. */
    void ReceiveTrimmed(RdmaQueuePair* qp, const RdmaFrame* f);
    /** UET sender: record that the packet [seq, seq + bytes) was trimmed (to resend next). */
    static void AddTrimmed(RdmaQueuePair* qp, uint64_t seq, uint64_t bytes);
    /** RCCC sender: announce the bytes posted beyond the credit held (a REQUEST frame). */
    void RequestCredit(RdmaQueuePair* qp);
    /** RCCC receiver: a REQUEST arrived; owe its queue pair credit. */
    void ReceiveRequest(const RdmaFrame* f);
    /** RCCC receiver: send the credit granted to \p qp so far (a CREDIT frame). */
    void SendCredit(RdmaQueuePair* qp);
    /** RCCC sender: a CREDIT frame arrived. */
    void ReceiveCredit(const RdmaFrame* f);
    /**
     * IRN sender: the next hole recovery must retransmit.
     * \param qp the queue pair
     * \param start receives its first byte
     * \param end receives its end (the next selectively acknowledged byte)
     * \return false if there is none
     */
    bool NextHole(const RdmaQueuePair* qp, uint64_t* start, uint64_t* end) const;
    /** \return whether \p qp has a packet to send (new data, or a hole to retransmit) */
    bool HasData(const RdmaQueuePair* qp) const;
    /** \return whether \p qp may send under its congestion window \p window (non-zero) */
    bool WindowOpen(const RdmaQueuePair* qp, uint64_t window) const;
    /** UET: record how late the packet \p f acknowledges arrived (RdmaQueuePair::reorderSeen). */
    static void LearnReordering(RdmaQueuePair* qp, const RdmaFrame* f);
    /** UET: bytes newly acknowledged, cumulatively or selectively, since the last report. */
    static uint64_t UetNewlyAcked(RdmaQueuePair* qp);
    /** Count a data packet that arrived ahead of the expected byte. */
    void CountReorder(RdmaQueuePair* qp, const RdmaFrame* f);
    /** Rate change of \p slot (re-times the pending pacing gap). */
    void RateChanged(uint32_t slot, double oldRate, double newRate);
    /** Wake-up of a port waiting for a pacing gap. */
    void Wake(uint32_t port);
    /** \return the retransmission timeout for this fabric */
    Time ActiveRto() const;
    /** Remove finished queue pairs of \p port from the scheduling list. */
    void Compact(uint32_t port);

    // attributes
    uint32_t m_ackInterval;      //!< ACK every N in-order packets
    Time m_cnpInterval;          //!< NP: minimum time between CNPs of a queue pair
    Time m_nackInterval;         //!< receiver: minimum time between NACKs for the same byte
    Time m_rto;                  //!< retransmission timeout (lossless fabric)
    Time m_rtoLossy;             //!< retransmission timeout (lossy fabric)
    bool m_lossless{true};       //!< PFC on in the fabric
    Transport m_transport{ROCE}; //!< loss recovery
    uint32_t m_sackThreshold{1}; //!< IRN: packets acknowledged beyond a hole before it is lost
    uint32_t m_entropies{256};   //!< UET: entropy values a queue pair cycles over
    uint32_t m_uetMinReorder{5}; //!< UET: least packets acknowledged beyond a lost hole
    bool m_uetTrimming{false};   //!< UET: switches trim; only trims (and timeouts) are losses
    double m_rcccShare{1.0};     //!< RCCC: share of a receiving port's rate credit fills

    uint32_t m_nodeId{0};                                              //!< topology node
    std::vector<Ptr<QbbNetDevice>> m_ports;                            //!< devices
    RdmaFramePool* m_pool{nullptr};                                    //!< frame allocator
    const std::vector<std::unique_ptr<RdmaQueuePair>>* m_qps{nullptr}; //!< queue-pair table
    RdmaFrameSizes m_sizes;                                            //!< frame sizes
    uint32_t m_mtu{4096};                                              //!< payload per packet
    std::vector<std::vector<RdmaQueuePair*>> m_active;                 //!< scheduling list per port
    std::vector<uint32_t> m_rr;                     //!< round-robin position per port
    std::vector<EventId> m_wake;                    //!< pacing wake-up per port
    std::vector<int64_t> m_wakeAt;                  //!< its time, ns
    std::vector<uint32_t> m_finishedOnPort;         //!< finished entries awaiting compaction
    std::vector<Ptr<RcccPacer>> m_pacers;           //!< RCCC credit pacer per port (lazily)
    Callback<void, uint32_t, uint32_t> m_delivered; //!< delivery hook
    Callback<void, const RdmaFrame*, uint32_t> m_ipReceive; //!< IP frame hook (socket hosts)

    uint64_t m_cnpsSent{0};  //!< CNPs sent
    uint64_t m_acksSent{0};  //!< ACKs sent
    uint64_t m_nacksSent{0}; //!< NACKs sent

    TracedCallback<uint32_t, uint64_t> m_retransmitTrace; //!< flow id, go-back sequence
    TracedCallback<uint32_t> m_cnpTrace;                  //!< flow id of a CNP sent
    TracedCallback<uint32_t, uint32_t> m_reorderTrace;    //!< flow id, reorder depth (packets)
};

} // namespace ns3

#endif /* HETEROSIM_RDMA_NIC_H */
