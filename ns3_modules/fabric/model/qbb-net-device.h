/*
 * HeteroSim: a port of the RDMA fabric with per-priority egress queues and 802.1Qbb PFC.
 */
#ifndef HETEROSIM_QBB_NET_DEVICE_H
#define HETEROSIM_QBB_NET_DEVICE_H

#include "frame-handler.h"
#include "qbb-channel.h"
#include "rdma-frame-pool.h"
#include "rdma-frame.h"

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/mac48-address.h"
#include "ns3/net-device.h"
#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/random-variable-stream.h"
#include "ns3/traced-callback.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief Point-to-point port with 8 data priorities, a strict control queue and PFC.
 *
 * Egress: the control queue (ACK, NACK, CNP, PFC frames; never paused, never marked) is served
 * first, then the data priorities round-robin, skipping priorities paused by the peer; when
 * all are empty the owning node may offer a frame through FrameHandler::PullFrame (RDMA
 * endpoints pace their queue pairs this way). A frame already on the wire always completes.
 *
 * Timing: serialisation time is wireBytes * 8 / rate in integer nanoseconds; the sub-ns
 * remainder is carried to the next frame, so a busy port sends exactly \c rate bits per second
 * over any long interval (no rounding drift). Propagation is the channel's delay.
 *
 * PFC: a received PFC frame pauses its priority for quanta * 512 bit times at this port's
 * rate (quanta 0 = resume); pauses expire unless refreshed. The device counts pause frames,
 * paused time, bytes sent and queue depth (max and time-weighted mean).
 *
 * Faults (driven by a FaultSchedule through the network): SetLinkDown(true) takes the port
 * down: every queued frame is dropped (data frames are released through the owner's dequeue
 * hook first, so a switch's buffer accounting stays exact), the port stops transmitting, pauses
 * from the peer are forgotten, frames offered while down are dropped, and a frame that was on
 * the wire in either direction when the link went down is lost on arrival. SetLinkDown(false)
 * brings it back. SetRate() changes the line rate from now on; SetLossProbability() drops each
 * arriving frame (PFC frames excepted) with that probability from its own random stream. These
 * drops count in GetDrops() and, separately, in GetFaultDrops().
 *
 * Frames are RdmaFrame descriptors, not ns3::Packet: Send() with an ns3::Packet is not
 * supported by this device and returns false.
 */
class QbbNetDevice : public NetDevice
{
  public:
    static constexpr uint8_t N_PRIORITIES = 8;  //!< data priorities
    static constexpr uint8_t CONTROL_QUEUE = 8; //!< index of the strict control queue

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    QbbNetDevice();
    ~QbbNetDevice() override;

    /**
     * \brief Bind the device to its owner.
     * \param handler node logic receiving frames
     * \param port owner's index of this device
     * \param pool frame allocator (for PFC frames)
     */
    void SetHandler(FrameHandler* handler, uint32_t port, RdmaFramePool* pool);

    /**
     * \brief Attach to a channel.
     * \param channel the channel
     */
    void Attach(Ptr<QbbChannel> channel);

    /** \return line rate, bit/s */
    uint64_t GetRateBps() const;

    /**
     * \brief Serialisation time of \p bytes at this port's rate (no remainder carry).
     * \param bytes wire bytes
     * \return time, rounded up to the next ns
     */
    Time GetTxTime(uint32_t bytes) const;

    /**
     * \brief Queue a frame for transmission.
     * \param frame the frame (ownership passes to the device)
     * \param queue 0..7 data priority or CONTROL_QUEUE
     */
    void Enqueue(RdmaFrame* frame, uint8_t queue);

    /** \brief Start transmitting if idle and something is eligible. */
    void TryTransmit();

    /**
     * \brief Called by the channel when a frame has fully arrived.
     * \param frame the frame
     */
    void Receive(RdmaFrame* frame);

    /**
     * \brief Send a PFC frame for one priority ahead of all data.
     * \param priority the priority
     * \param quanta pause time in 512-bit quanta (0 = resume)
     */
    void SendPfc(uint8_t priority, uint16_t quanta);

    /** \param priority a priority \return whether the peer has paused it */
    bool IsPaused(uint8_t priority) const;

    /** \param queue 0..7 \return bytes waiting in that data queue */
    uint64_t GetQueueBytes(uint8_t queue) const;
    /** \return bytes waiting in all data queues */
    uint64_t GetTotalQueueBytes() const;
    /** \return wire bytes sent (all frames) */
    uint64_t GetTxBytes() const;
    /** \return frames sent (all kinds) */
    uint64_t GetTxFrames() const;
    /** \return maximum of the data queue bytes */
    uint64_t GetMaxQueueBytes() const;
    /** \return time-weighted mean of the data queue bytes since time 0 */
    double GetMeanQueueBytes() const;
    /** \return PFC pause (XOFF) frames sent */
    uint64_t GetPauseSent() const;
    /** \return PFC resume (XON) frames sent */
    uint64_t GetResumeSent() const;
    /** \return PFC pause (XOFF) frames received */
    uint64_t GetPauseReceived() const;
    /** \return time during which at least one priority was paused, ns */
    int64_t GetPausedNs() const;
    /** \return ECN marks applied to frames leaving this port */
    uint64_t GetEcnMarks() const;
    /** \return frames dropped that were bound for this port */
    uint64_t GetDrops() const;
    /** \return data frames trimmed to their header on admission to this port (RdmaSwitch::Trim) */
    uint64_t GetTrims() const;

    /**
     * \brief Steady-state fast-forward (PacketFastForward): count traffic the port carried
     * over a skipped interval at its settled rate (queue and pause state are left as they are).
     * \param bytes wire bytes
     * \param frames frames
     */
    void AddFastForwardTraffic(uint64_t bytes, uint64_t frames);
    /**
     * \brief Steady-state fast-forward of a congested equilibrium: count the ECN marks and PFC
     * pause frames the skipped interval carried at their measured rates.
     * \param marks ECN marks
     * \param pauses PFC pause frames sent
     */
    void AddFastForwardSignals(uint64_t marks, uint64_t pauses);

    /**
     * \brief Episode memoization (PacketEpisodeCache): count what a replayed episode did at
     * this port besides traffic (AddFastForwardTraffic); queue and pause state are left as
     * they are.
     * \param pauseSent XOFF frames sent
     * \param pauseReceived XOFF frames received
     * \param pausedNs time paused, ns
     * \param ecnMarks ECN marks
     * \param drops drops
     * \param queueArea integral of the data queue over time, byte-ns
     * \param maxQueue data queue maximum reached (0: none above the current maximum)
     */
    void AddMemoizedCounters(uint64_t pauseSent,
                             uint64_t pauseReceived,
                             int64_t pausedNs,
                             uint64_t ecnMarks,
                             uint64_t drops,
                             double queueArea,
                             uint64_t maxQueue);

    /** \brief Count one ECN mark (called by the switch's marker). \param frame the frame */
    void CountEcnMark(const RdmaFrame* frame);
    /** \brief Count one drop of a frame bound for this port. \param frame the frame */
    void CountDrop(const RdmaFrame* frame);
    /**
     * \brief Count one data frame bound for this port that the switch trimmed to its header
     * (called by RdmaSwitch::Trim, whose trace source Trim reports it). \param frame the frame
     */
    void CountTrim(const RdmaFrame* frame);

    /**
     * \brief Take the port down (drop what it holds, stop sending) or bring it back up.
     * \param down true: link down; false: link up
     */
    void SetLinkDown(bool down);
    /** \return whether the port is down */
    bool IsLinkDown() const;
    /**
     * \brief Change the line rate from now on (a degraded link).
     * \param rateBps new rate, bit/s (> 0)
     */
    void SetRate(uint64_t rateBps);
    /**
     * \brief Drop arriving frames (PFC excepted) with probability \p probability.
     * \param probability per-frame loss probability, 0..1 (0 = off)
     * \param stream random stream number of this port's loss process
     */
    void SetLossProbability(double probability, int64_t stream);
    /** \return frames dropped here by faults (link down, random loss) */
    uint64_t GetFaultDrops() const;

    /** \return the peer device's node id, or -1 */
    int32_t GetPeerNodeId() const;

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
    friend class QbbDeviceEvent; //!< calls TransmitComplete()

    /** FIFO of frames linked through RdmaFrame::next. */
    struct Fifo
    {
        RdmaFrame* head{nullptr}; //!< first frame
        RdmaFrame* tail{nullptr}; //!< last frame
        uint64_t bytes{0};        //!< wire bytes queued
    };

    /** Pop the head of queue \p q. */
    RdmaFrame* Pop(uint8_t q);
    /** Put \p frame on the wire. */
    void StartTransmission(RdmaFrame* frame);
    /** The frame on the wire has been serialised. */
    void TransmitComplete();
    /** A pause on \p priority expired or was lifted. */
    void Resume(uint8_t priority);
    /** Account the queue-depth integral up to now. */
    void UpdateQueueArea();
    /** Drop a frame because of a fault (release its buffer first if it was queued). */
    void FaultDrop(RdmaFrame* frame, bool queued);

    Ptr<Node> m_node;                 //!< owning node
    Ptr<QbbChannel> m_channel;        //!< attached channel
    uint32_t m_ifIndex{0};            //!< interface index
    Mac48Address m_address;           //!< unused MAC address
    uint16_t m_mtu{9216};             //!< Ethernet MTU (informational)
    FrameHandler* m_handler{nullptr}; //!< owner logic
    uint32_t m_port{0};               //!< owner's port index
    RdmaFramePool* m_pool{nullptr};   //!< frame allocator

    DataRate m_rate;              //!< line rate
    uint64_t m_rateBps{0};        //!< line rate as integer bit/s
    uint32_t m_pfcFrameBytes{84}; //!< PFC frame bytes on the wire
    uint64_t m_txCarry{0};        //!< sub-ns serialisation remainder (bit*1e9 units)

    Fifo m_queue[N_PRIORITIES + 1];      //!< data queues + control queue
    RdmaFrame* m_lastPfc{nullptr};       //!< last PFC frame in the control queue
    uint8_t m_rr{0};                     //!< next data priority to serve
    bool m_busy{false};                  //!< a frame is on the wire
    bool m_paused[N_PRIORITIES]{};       //!< paused by the peer
    EventId m_resumeEvent[N_PRIORITIES]; //!< pause expiry
    uint8_t m_nPaused{0};                //!< priorities paused now
    int64_t m_pausedSinceNs{0};          //!< when m_nPaused became non-zero

    uint64_t m_dataQueueBytes{0};        //!< bytes in data queues
    uint64_t m_txBytes{0};               //!< wire bytes sent
    uint64_t m_txFrames{0};              //!< frames sent
    uint64_t m_maxQueueBytes{0};         //!< max data queue bytes
    double m_queueArea{0};               //!< integral of data queue bytes over ns
    int64_t m_lastQueueChangeNs{0};      //!< time of the last queue change
    uint64_t m_pauseSent{0};             //!< XOFF frames sent
    uint64_t m_resumeSent{0};            //!< XON frames sent
    uint64_t m_pauseReceived{0};         //!< XOFF frames received
    int64_t m_pausedNs{0};               //!< accumulated paused time
    uint64_t m_ecnMarks{0};              //!< ECN marks
    uint64_t m_drops{0};                 //!< drops bound for this port
    uint64_t m_trims{0};                 //!< data frames trimmed on admission to this port
    bool m_down{false};                  //!< link down (fault)
    int64_t m_lastDownNs{-1};            //!< when the link last went down, -1 never
    double m_lossProbability{0};         //!< per-frame loss probability (fault)
    Ptr<UniformRandomVariable> m_lossRv; //!< loss process
    uint64_t m_faultDrops{0};            //!< frames dropped by faults

    TracedCallback<const RdmaFrame*, uint64_t> m_enqueueTrace; //!< frame, data queue bytes after
    TracedCallback<const RdmaFrame*, uint64_t> m_dequeueTrace; //!< frame, data queue bytes after
    TracedCallback<const RdmaFrame*> m_dropTrace;              //!< frame dropped for this port
    TracedCallback<const RdmaFrame*> m_markTrace;              //!< frame ECN-marked here
    TracedCallback<uint8_t, uint16_t, bool> m_pauseTrace;      //!< priority, quanta, true=sent
    TracedCallback<bool> m_linkStateTrace;                     //!< true = up
};

} // namespace ns3

#endif /* HETEROSIM_QBB_NET_DEVICE_H */
