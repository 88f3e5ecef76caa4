/*
 * HeteroSim: NSCC, the sender-based congestion control of the Ultra Ethernet transport (UET).
 */
#ifndef HETEROSIM_NSCC_H
#define HETEROSIM_NSCC_H

#include "rdma-congestion-control.h"

#include "ns3/traced-value.h"

namespace ns3
{

/**
 * \brief Network Signal-based Congestion Control (NSCC) of UET 1.0 (Ultra Ethernet Consortium,
 * "Ultra Ethernet Specification 1.0", June 2025, congestion management; summarised in Hoefler
 * et al., "Ultra Ethernet's Design Principles and Architectural Innovations", arXiv 2508.08906,
 * 2025). A window-based sender algorithm that reads two signals from every acknowledgement:
 * the ECN-CE echo (a queue on the packet's path) and the queueing delay, RTT minus the base
 * RTT (a queue at the endpoint the flow shares with others). The pair selects a quadrant:
 *
 * | ECN | delay < TargetDelay         | delay >= TargetDelay                       |
 * |-----|-----------------------------|--------------------------------------------|
 * | no  | proportional + fair increase| fair increase                              |
 * | yes | no change (path congestion: | multiplicative decrease, at most once per  |
 * |     | spraying moves away)        | base RTT: W *= max(1 - Gamma (d - T)/d, MaxDecrease) |
 *
 * with d the smoothed delay (EWMA, gain DelayGain). Increases accumulate in bytes^2 and are
 * applied as W += inc / W, so per window of acknowledged bytes the fair increase adds
 * FairIncrease MTUs (equal for every flow: the AIMD term that converges to a fair share) and
 * the proportional increase adds 4 a b (1 - delay/T) MTUs, where a = BDP / (100 Gb/s x 12 us)
 * and b = T / 12 us scale the constants from the specification's reference network (100 Gb/s,
 * 12 us). Below FastIncreaseDelay for a whole window of acknowledgements the window grows by
 * FastIncreaseGain a of the acknowledged bytes (fast increase); every 12 us the window also
 * grows by Eta a MTU. Quick adapt: once per base RTT + T, if a loss was seen or d exceeds
 * QuickAdaptFactor T, the window drops to the bytes acknowledged in that interval and
 * ECN-marked feedback for the data then in flight is ignored. A loss (a retransmitted packet)
 * takes its bytes off the window. The window starts at, and never exceeds, MaxWindow x BDP
 * (BDP = line rate x base RTT) and never falls below one MTU; the base RTT is the path's
 * empty-network RTT, lowered by any smaller sample.
 *
 * The defaults are the reference values of the UEC's NSCC reference simulator (htsim,
 * uec.cpp, initNsccParams: target 6 us, gamma 0.8, fair increase 5 a, eta 0.15 a MTU,
 * fast increase 0.25 a, delay EWMA 0.0125, quick adapt at 4 x target, max window 1.5 BDP,
 * adjustment period 12 us).
 *
 * APPROXIMATION: the accumulated increase is applied on every acknowledgement (the reference
 * batches it per adjustment period or byte threshold); the receiver's window penalty
 * (rcv_cwnd_pend), its combination with RCCC credits (Rccc runs alone) and entropy skipping
 * on ECN are not modelled; the queue pair
 * is not paced (the window alone limits it), so GetRate() stays at line rate.
 */
class Nscc : public RdmaCongestionControl
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    Nscc();

    void Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes) override;
    void ReceiveAck(const RdmaAckInfo& info) override;
    void ReceiveLoss(uint32_t bytes) override;

    /** \return the congestion window, bytes */
    double GetCwnd() const;
    /** \return the smoothed queueing delay, ns */
    double GetAvgDelayNs() const;
    /** \return multiplicative decreases so far */
    uint64_t GetDecreases() const;
    /** \return quick adapts so far */
    uint64_t GetQuickAdapts() const;

  private:
    /** Once per base RTT + target: quick adapt if a loss or a long delay was seen. */
    bool QuickAdapt(int64_t nowNs, uint64_t sndNxt);
    /** Clamp the window and publish it as the in-flight limit. */
    void Publish();

    // attributes
    Time m_target;            //!< target queueing delay
    double m_gamma;           //!< multiplicative decrease gain
    double m_maxDecrease;     //!< smallest factor of one decrease
    double m_fairIncrease;    //!< MTUs per window at the reference network
    double m_eta;             //!< MTU fraction added per adjustment period (reference network)
    double m_fastGain;        //!< fast increase: fraction of acked bytes (reference network)
    Time m_fastDelay;         //!< fast increase below this delay
    double m_delayGain;       //!< EWMA gain of the delay
    double m_qaFactor;        //!< quick adapt above this many targets of delay
    double m_maxWindow;       //!< window cap, BDPs
    Time m_adjustPeriod;      //!< eta period
    DataRate m_referenceRate; //!< reference network rate
    Time m_referenceRtt;      //!< reference network RTT

    // derived at Start
    double m_baseRttNs{0}; //!< base RTT, ns
    double m_bdp{0};       //!< line rate x base RTT, bytes
    double m_maxWnd{0};    //!< window cap, bytes
    double m_scaleA{1};    //!< BDP / reference BDP
    double m_scaleB{1};    //!< target / reference RTT
    double m_alpha{0};     //!< proportional increase, bytes per ns of headroom

    // state
    TracedValue<double> m_cwnd{0}; //!< congestion window, bytes
    double m_avgDelayNs{0};        //!< smoothed queueing delay
    double m_inc{0};               //!< accumulated increase, bytes^2
    double m_fastCount{0};         //!< bytes acknowledged below the fast-increase delay
    bool m_fast{false};            //!< in fast increase
    int64_t m_lastDecNs{-1};       //!< last multiplicative decrease
    int64_t m_lastEtaNs{0};        //!< last eta step
    int64_t m_qaEndNs{0};          //!< end of the quick-adapt interval
    double m_achieved{0};          //!< bytes acknowledged in the interval
    bool m_lossSeen{false};        //!< a loss since the last quick adapt
    uint64_t m_ignoreUntil{0};     //!< ignore ECN feedback until acks pass this byte
    uint64_t m_decreases{0};       //!< count
    uint64_t m_quickAdapts{0};     //!< count
};

} // namespace ns3

#endif /* HETEROSIM_NSCC_H */
