/*
 * HeteroSim: DCTCP-style rate control for RDMA (ECN echo in ACKs).
 */
#ifndef HETEROSIM_DCTCP_H
#define HETEROSIM_DCTCP_H

#include "rdma-congestion-control.h"

namespace ns3
{

/**
 * \brief "Hardware" DCTCP as in the HPCC simulator (docs/network_models.md §2.11): starts at line
 * rate, alpha <- (1-g) alpha + g F once per window of ACKs (F = fraction of ECN-echoed bytes);
 * on an ECN echo outside congestion-window-reduced (CWR) state, R <- R (1 - alpha/2) and CWR
 * holds for one window; each window without CWR adds RateAi. For DCTCP's cut-off marking set
 * the switch's EcnKmin = EcnKmax and EcnPmax = 1.
 */
class Dctcp : public RdmaCongestionControl
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    Dctcp();

    void Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes) override;
    void ReceiveAck(const RdmaAckInfo& info) override;

    /** \return alpha */
    double GetAlpha() const;

  private:
    double m_g;            //!< EWMA gain
    double m_initialAlpha; //!< alpha at start
    DataRate m_rai;        //!< additive step per window

    double m_alpha{1};         //!< fraction-of-marks estimate
    uint64_t m_ackedBytes{0};  //!< bytes acked in this window
    uint64_t m_markedBytes{0}; //!< of which ECN-echoed
    uint64_t m_windowEnd{0};   //!< end of the current observation window
    bool m_cwr{false};         //!< in CWR
    uint64_t m_cwrEnd{0};      //!< CWR ends when acks pass this
};

} // namespace ns3

#endif /* HETEROSIM_DCTCP_H */
