/*
 * HeteroSim: base class of the per-queue-pair congestion control algorithms.
 */
#ifndef HETEROSIM_RDMA_CONGESTION_CONTROL_H
#define HETEROSIM_RDMA_CONGESTION_CONTROL_H

#include "ns3/callback.h"
#include "ns3/data-rate.h"
#include "ns3/event-impl.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/rdma-frame.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief What a sender learns from one ACK (or NACK).
 */
struct RdmaAckInfo
{
    uint64_t ackSeq;     //!< cumulative ack: next byte expected by the receiver
    uint64_t sndNxt;     //!< sender's next byte to send when the ACK arrived
    uint64_t newlyAcked; //!< bytes newly acknowledged by this ACK
    bool ecnEcho;        //!< the acknowledged data carried CE marks
    int64_t rttNs;       //!< now minus the echoed send time of the data packet, ns
    const IntHop* hops;  //!< echoed INT records (HPCC), or nullptr
    uint8_t nHops;       //!< number of INT records
};

/**
 * \brief Rate (and optional window) controller of one RDMA queue pair.
 *
 * A controller starts at line rate, reacts to CNPs, ACK feedback and its own timers, and
 * reports its sending rate; the queue pair paces packets at that rate. Rate changes fire the
 * RateChange trace and the owner's callback.
 */
class RdmaCongestionControl : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    RdmaCongestionControl();
    ~RdmaCongestionControl() override;

    /**
     * \brief Start controlling a queue pair.
     * \param lineRateBps the queue pair's maximum rate, bit/s
     * \param baseRtt round-trip time of the empty path
     * \param mtuBytes payload bytes per packet
     */
    virtual void Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes);
    /** \brief Stop all timers (queue pair finished). */
    virtual void Stop();
    /** \brief A CNP arrived for this queue pair. */
    virtual void ReceiveCnp();
    /** \brief An ACK arrived. \param info what it says */
    virtual void ReceiveAck(const RdmaAckInfo& info);
    /** \brief Payload bytes were sent. \param bytes payload bytes */
    virtual void OnSend(uint32_t bytes);
    /**
     * \brief The transport resends bytes it counts lost (RdmaNic Transport=uet; no other
     * transport calls it). \param bytes payload bytes resent
     */
    virtual void ReceiveLoss(uint32_t bytes);

    /** \return whether the receiver must generate CNPs for CE-marked packets */
    virtual bool UsesCnp() const;
    /** \return whether switches must stamp INT records */
    virtual bool UsesInt() const;
    /**
     * \return whether the queue pair sends new data only with credit from its receiver
     * (RdmaNic keeps the credit; Rccc)
     */
    virtual bool UsesCredit() const;
    /** \return credit, bytes, a credit-based sender holds before its first grant */
    virtual uint64_t GetInitialCredit() const;
    /**
     * \return bytes of in-band telemetry every data and ACK frame of this algorithm carries
     * (0 unless UsesInt())
     */
    virtual uint32_t GetIntHeaderBytes() const;
    /**
     * \brief Steady-state fast-forward (PacketFastForward): move the controller's pending
     * timers \p deltaNs later, freezing its state over the skipped interval.
     * \param deltaNs shift, ns
     * \param moved receives the events to shift in the event queue
     */
    virtual void ShiftClock(int64_t deltaNs, std::vector<const EventImpl*>* moved);
    /**
     * \brief Steady-state fast-forward, after the event queue moved: apply what the skipped
     * interval would have done to the controller without CNPs or marks (rate increases that
     * fall due with time or bytes sent).
     * \param deltaNs skipped interval, ns
     * \param bytes payload bytes sent over it
     */
    virtual void AdvanceSkipped(int64_t deltaNs, uint64_t bytes);
    /**
     * \brief Steady-state fast-forward of a congested equilibrium, after the event queue
     * moved: the controller keeps its state as it was (the cuts and recoveries of the skipped
     * interval cancel); clocks it reads lazily move with the interval.
     * \param deltaNs skipped interval, ns
     */
    virtual void HoldSkipped(int64_t deltaNs);

    /**
     * \brief Episode memoization (PacketEpisodeCache): continue a materialised replay at the
     * rate the recorded episode had (clamped as every rate change); the rest of the
     * algorithm's state starts afresh.
     * \param bps rate, bit/s
     */
    void RestoreRate(double bps);

    /** \return current sending rate, bit/s */
    double GetRate() const;
    /** \return in-flight limit, bytes (0 = none) */
    uint64_t GetWindow() const;
    /** \return number of rate changes so far */
    uint64_t GetRateChanges() const;
    /** \return the maximum rate, bit/s */
    double GetLineRate() const;
    /** \return the round-trip time of the empty path (set by Start) */
    Time GetBaseRtt() const;

    /**
     * \brief Set the callback invoked on every rate change (old rate, new rate, bit/s).
     * \param cb the callback
     */
    void SetRateChangeCallback(Callback<void, double, double> cb);

  protected:
    /**
     * \brief Change the sending rate (clamped to [MinRate, line rate]).
     * \param bps new rate, bit/s
     */
    void SetRate(double bps);

    void DoDispose() override;

    double m_lineRate{0}; //!< maximum rate, bit/s
    double m_rate{0};     //!< current sending rate, bit/s
    uint64_t m_window{0}; //!< in-flight limit, bytes (0 = none)
    Time m_baseRtt;       //!< empty-path RTT
    uint32_t m_mtu{0};    //!< payload bytes per packet
    DataRate m_minRate;   //!< rate floor

  private:
    uint64_t m_rateChanges{0};                     //!< count
    Callback<void, double, double> m_rateCallback; //!< owner's hook
    TracedCallback<double, double> m_rateTrace;    //!< old, new rate
};

} // namespace ns3

#endif /* HETEROSIM_RDMA_CONGESTION_CONTROL_H */
