/*
 * HeteroSim: RCCC, the receiver-credit congestion control of the Ultra Ethernet transport (UET).
 */
#ifndef HETEROSIM_RCCC_H
#define HETEROSIM_RCCC_H

#include "rdma-congestion-control.h"

namespace ns3
{

/**
 * \brief Receiver Credit-based Congestion Control (RCCC) of UET 1.0 (Ultra Ethernet Consortium,
 * "Ultra Ethernet Specification 1.0", June 2025, congestion management; Hoefler et al., "Ultra
 * Ethernet's Design Principles and Architectural Innovations", arXiv 2508.08906, 2025): the
 * receiver, which sees every sender that shares its downlink, hands out credit, and a sender
 * sends new data only with credit. The spec lets it run alone or beside NSCC; this class is
 * RCCC alone (network.cc: rccc), the sender's part of it: no window and no rate limit, only the
 * credit the RdmaNic keeps per queue pair (RdmaQueuePair::creditLimit). A sender asks for credit
 * with a REQUEST frame carrying the bytes it has posted (UET's backlog signal) when it starts
 * and whenever more is posted; the receiving NIC's RcccPacer grants one packet of credit at a
 * time, round robin over the senders still owed credit, at its downlink rate, in cumulative
 * CREDIT frames. Credit paced at the downlink rate keeps the last-hop queue near empty and
 * splits the downlink equally (the receiver-driven pull of NDP, Handley et al., SIGCOMM 2017,
 * and Homa, Montazeri et al., SIGCOMM 2018, that RCCC follows).
 * A sender starts with InitialCredit base-RTT bandwidth-delay products of credit, so that a
 * lone flow runs at line rate from its first packet instead of waiting one RTT for credit.
 * Retransmissions need no credit (their bytes were credited once).
 * APPROXIMATION: credit is granted per packet at the full downlink rate to every sender with a
 * backlog, whatever the rest of the path (a bottleneck inside the fabric is not seen: RCCC
 * alone handles last-hop incast, as the spec intends it to be combined with NSCC for the
 * fabric); the backlog is the bytes posted, sent once per posting; credits are not coalesced
 * into ACKs; initial credit is the same protocol constant at both ends.
 */
class Rccc : public RdmaCongestionControl
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    Rccc();

    void Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes) override;
    bool UsesCredit() const override;
    uint64_t GetInitialCredit() const override;

  private:
    double m_initialBdps;        //!< InitialCredit attribute, base-RTT BDPs
    uint64_t m_initialCredit{0}; //!< initial credit, bytes (whole packets)
};

} // namespace ns3

#endif /* HETEROSIM_RCCC_H */
