/*
 * HeteroSim: HPCC congestion control (INT-based).
 */
#ifndef HETEROSIM_HPCC_H
#define HETEROSIM_HPCC_H

#include "rdma-congestion-control.h"

namespace ns3
{

/**
 * \brief HPCC (Li et al., SIGCOMM 2019) in the rate form of the HPCC simulator
 * (docs/network_models.md §2.11).
 *
 * Per ACK with INT records of every hop: u_j = txRate_j / B_j + min(qlen_j, qlen_j^prev) /
 * (B_j T) (bytes and bit/s), U_now = max_j u_j, U <- U (T - tau)/T + U_now tau/T with tau the
 * max hop's interval capped at T. If U >= eta or the stage reached MaxStage: R = Rc / (U/eta)
 * + RateAi, stage 0; else R = Rc + RateAi, stage + 1. Once per RTT (ACK beyond the last
 * update point) Rc and the stage are committed; in between (FastReact) the sending rate
 * follows R without committing. Window W = Rc T / 8 bytes (at least one packet) limits bytes
 * in flight. T is the queue pair's base RTT. Defaults: eta 0.95, MaxStage 0 (the HPCC authors'
 * evaluation setting; the paper's "5" is a typo per the project page), RateAi 50 Mb/s, MinRate
 * 100 Mb/s.
 */
class Hpcc : public RdmaCongestionControl
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    Hpcc();

    void Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes) override;
    void ReceiveAck(const RdmaAckInfo& info) override;
    bool UsesInt() const override;
    /**
     * \return the INT stack: a 2-byte hop count and 8 bytes per hop for MAX_INT_HOPS hops
     * (42 bytes, the layout of HPCC's reference ns-3 implementation)
     */
    uint32_t GetIntHeaderBytes() const override;

    /** \return smoothed utilisation U */
    double GetUtilization() const;

  private:
    /** Recompute the window from the reference rate. */
    void UpdateWindow();

    double m_eta;        //!< target utilisation
    uint32_t m_maxStage; //!< additive stages before a multiplicative update
    DataRate m_rai;      //!< additive step
    bool m_fastReact;    //!< per-ACK reaction

    double m_rc{0};                           //!< reference rate
    double m_u{0};                            //!< smoothed utilisation
    uint32_t m_stage{0};                      //!< increase stage
    uint64_t m_lastUpdateSeq{0};              //!< commit point
    IntHop m_prev[RdmaFrame::MAX_INT_HOPS]{}; //!< previous INT records
    uint8_t m_prevHops{0};                    //!< records held in m_prev
};

} // namespace ns3

#endif /* HETEROSIM_HPCC_H */
