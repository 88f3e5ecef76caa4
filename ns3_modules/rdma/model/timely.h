/*
 * HeteroSim: TIMELY congestion control (RTT gradient).
 */
#ifndef HETEROSIM_TIMELY_H
#define HETEROSIM_TIMELY_H

#include "rdma-congestion-control.h"

namespace ns3
{

/**
 * \brief TIMELY (Mittal et al., SIGCOMM 2015) as in the HPCC simulator (docs/network_models.md
 * §2.11): once per RTT, rtt_diff <- (1-a) rtt_diff + a (rtt - prev_rtt), gradient =
 * rtt_diff / MinRtt; below TLow increase; above THigh R <- R (1 - beta (1 - THigh/rtt));
 * else increase if gradient <= 0, otherwise R <- R (1 - beta gradient). Increase is +RateAi,
 * or +RateHai after 5 consecutive increase rounds. RTT is measured by the NIC from the send
 * time echoed in ACKs (hardware timestamps, no header bytes). Defaults are the simulator's
 * values at 100 Gb/s.
 */
class Timely : public RdmaCongestionControl
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    Timely();

    void Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes) override;
    void ReceiveAck(const RdmaAckInfo& info) override;

  private:
    double m_a;          //!< EWMA weight of the RTT difference
    double m_beta;       //!< multiplicative decrease factor
    Time m_tLow;         //!< low RTT threshold
    Time m_tHigh;        //!< high RTT threshold
    Time m_minRtt;       //!< gradient normaliser
    DataRate m_rai;      //!< additive step
    DataRate m_rhai;     //!< hyper step
    uint32_t m_haiAfter; //!< increase rounds before hyper steps

    bool m_havePrev{false};      //!< a previous RTT sample exists
    double m_prevRtt{0};         //!< previous RTT, s
    double m_rttDiff{0};         //!< smoothed RTT difference, s
    uint32_t m_incStage{0};      //!< consecutive increase rounds
    uint64_t m_lastUpdateSeq{0}; //!< once-per-RTT point
};

} // namespace ns3

#endif /* HETEROSIM_TIMELY_H */
